// transform.ops on real DuckDB: each op kind, their composition, stable field ids, and failures
// that name the op and the record.
#include "transform/transform.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/hash.hpp"
#include "query/query.hpp"
#include "support/temp_dir.hpp"

namespace skippr::transform {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

config::PipelineConfig PipelineWithOps(const std::string& ops_yaml) {
  const std::string yaml = R"y(data_sources:
  files: {File: {path: in.jsonl}}
pipelines:
  p:
    data_source: data_sources.files
    transform:
      ops:
)y" + ops_yaml;
  MapEnvironment environment;
  Result<config::Config> parsed = config::ParseConfig(yaml, "skippr.yml", environment);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? parsed->pipelines.at("p") : config::PipelineConfig{};
}

// Records shaped as sync shapes them: one batch of namespace "p", with each record's origin
// "in.jsonl:<line>".
struct Shaped {
  schema::NamespaceSchema input;
  Batch batch;
  RowOrigins origins;
};

Shaped Shape(const std::vector<Value>& records) {
  schema::ShaperOptions options;
  options.default_namespace = "p";
  options.build_columns = true;
  options.keep_origins = true;
  schema::Shaper shaper(schema::PipelineSchema{}, options);
  schema::RecordContext context;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_FALSE(shaper.Absorb(records[i], {"in.jsonl", i + 1, i + 1}, context).has_value());
  }
  shaper.Seal();
  std::vector<RowOrigins> origins;
  std::vector<Batch> batches = shaper.TakeBatches(&origins);
  EXPECT_EQ(batches.size(), 1u);
  return {shaper.schema().namespaces.at("p"), std::move(batches.at(0)), std::move(origins.at(0))};
}

Value Record(ValueObject fields) { return Value::Object(std::move(fields)); }

std::unique_ptr<OpsRunner> Open(const std::string& ops_yaml, schema::PipelineSchema output = {}) {
  Result<std::unique_ptr<OpsRunner>> runner =
      OpsRunner::Open(PipelineWithOps(ops_yaml), std::move(output), "skippr.yml");
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return runner.ok() ? std::move(runner).value() : nullptr;
}

Batch ApplyOk(OpsRunner& runner, Shaped shaped) {
  Result<Batch> output = runner.Apply(std::move(shaped.batch), &shaped.origins, nullptr);
  EXPECT_TRUE(output.ok()) << output.status().message();
  if (!output.ok()) return Batch{};
  std::string reason;
  EXPECT_TRUE(output->Validate(&reason)) << reason;
  return std::move(output).value();
}

std::vector<std::string> Names(const std::vector<Field>& fields) {
  std::vector<std::string> names;
  for (const Field& field : fields) names.push_back(field.name);
  return names;
}

std::vector<Value> Records() {
  return {Record({{"id", Value::Int(1)},
                  {"name", Value::String("Ada")},
                  {"email", Value::String("ada@example.com")},
                  {"amount", Value::String("12.50")},
                  {"country", Value::Null()},
                  {"internal", Value::Bool(true)}}),
          Record({{"id", Value::Int(2)},
                  {"name", Value::String("Bob")},
                  {"email", Value::String("bob@example.com")},
                  {"amount", Value::String("3")},
                  {"country", Value::String("FR")},
                  {"internal", Value::Bool(false)}})};
}

TEST(TransformOps, RenameDropAndSelectShapeTheFields) {
  auto runner = Open(R"y(        - rename: {name: full_name}
        - drop: internal
        - select: [id, full_name, email, missing]
)y");
  ASSERT_NE(runner, nullptr);
  const Batch out = ApplyOk(*runner, Shape(Records()));
  EXPECT_THAT(Names(out.fields), ElementsAre("id", "full_name", "email"));
  ASSERT_EQ(out.num_rows, 2);
  EXPECT_EQ(out.RowAt(1).Find("full_name")->as_string(), "Bob");
  EXPECT_EQ(out.RowAt(0).Find("id")->as_int(), 1);
  EXPECT_EQ(out.fields[0].type, LogicalType::Int());  // the shaper's type, through DuckDB and back
}

TEST(TransformOps, CastFilterAndDeriveRunInOrder) {
  auto runner = Open(R"y(        - cast: {amount: "decimal(12, 2)"}
        - filter: "amount > 10"
        - derive: {amount_pence: "CAST(amount * 100 AS BIGINT)", label: "upper(name)"}
)y");
  ASSERT_NE(runner, nullptr);
  const Batch out = ApplyOk(*runner, Shape(Records()));
  ASSERT_EQ(out.num_rows, 1);  // Bob's 3.00 is filtered out
  const Value row = out.RowAt(0);
  EXPECT_EQ(row.Find("id")->as_int(), 1);
  EXPECT_EQ(out.fields[3].type, LogicalType::Decimal(12, 2).value());
  EXPECT_EQ(row.Find("amount")->decimal_unscaled(), 1250);
  EXPECT_EQ(row.Find("amount_pence")->as_int(), 1250);
  EXPECT_EQ(row.Find("label")->as_string(), "ADA");
  EXPECT_EQ(Names(out.fields).back(), "label");
}

TEST(TransformOps, FilterDropsRowsWhereThePredicateIsNull) {
  auto runner = Open(R"y(        - filter: "country <> 'XX'"
)y");
  ASSERT_NE(runner, nullptr);
  const Batch out = ApplyOk(*runner, Shape(Records()));
  ASSERT_EQ(out.num_rows, 1);  // country NULL → predicate NULL → dropped
  EXPECT_EQ(out.RowAt(0).Find("id")->as_int(), 2);
}

TEST(TransformOps, HashIsTheSha256HexOfTheValueText) {
  auto runner = Open(R"y(        - hash: [email, id, country]
)y");
  ASSERT_NE(runner, nullptr);
  const Batch out = ApplyOk(*runner, Shape(Records()));
  const Value row = out.RowAt(0);
  EXPECT_EQ(row.Find("email")->as_string(), Sha256Hex("ada@example.com"));
  EXPECT_EQ(row.Find("id")->as_string(), Sha256Hex("1"));
  EXPECT_TRUE(row.Find("country")->is_null());  // NULL stays NULL
  EXPECT_EQ(out.fields[0].type, LogicalType::String());
}

TEST(TransformOps, DefaultFillsNullsWithAValueOfTheFieldsType) {
  std::vector<Value> records = Records();
  records.push_back(Record({{"id", Value::Null()}, {"name", Value::String("Cy")}}));
  auto runner = Open(R"y(        - default: {country: GB, id: "0"}
)y");
  ASSERT_NE(runner, nullptr);
  const Batch out = ApplyOk(*runner, Shape(records));
  ASSERT_EQ(out.num_rows, 3);
  EXPECT_EQ(out.RowAt(0).Find("country")->as_string(), "GB");
  EXPECT_EQ(out.RowAt(1).Find("country")->as_string(), "FR");
  EXPECT_EQ(out.RowAt(2).Find("id")->as_int(), 0);
  EXPECT_EQ(out.fields[0].type, LogicalType::Int());
}

TEST(TransformOps, OutputFieldIdsAreStableByNameAndNewFieldsGetNewIds) {
  auto runner = Open(R"y(        - rename: {name: full_name}
        - drop: [internal]
)y");
  ASSERT_NE(runner, nullptr);
  std::optional<schema::NamespaceChange> change;
  Shaped first = Shape(Records());
  Result<Batch> out = runner->Apply(std::move(first.batch), &first.origins, &change);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_TRUE(change.has_value());
  EXPECT_TRUE(change->is_new_namespace);
  const schema::NamespaceSchema saved = runner->output_schema().namespaces.at("p");
  EXPECT_EQ(saved.schema_id, 1);
  EXPECT_EQ(out->schema_id, 1);
  EXPECT_EQ(out->fields, saved.fields);

  // A new runner over the saved output (the next sync), and a new input field: ids kept, the new
  // field numbered after the last one.
  auto next = Open(R"y(        - rename: {name: full_name}
        - drop: [internal]
)y",
                   runner->output_schema());
  std::vector<Value> records = Records();
  records.push_back(Record({{"id", Value::Int(3)}, {"city", Value::String("Oslo")}}));
  Shaped second = Shape(records);
  Result<Batch> again = next->Apply(std::move(second.batch), &second.origins, &change);
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->changes, ElementsAre("added city (string)"));
  for (const Field& field : saved.fields) {
    const Field* now = next->output_schema().namespaces.at("p").FindField(field.name);
    ASSERT_NE(now, nullptr);
    EXPECT_EQ(now->id, field.id) << field.name;
  }
  EXPECT_EQ(next->output_schema().namespaces.at("p").FindField("city")->id,
            saved.last_field_id + 1);
  EXPECT_EQ(again->schema_id, 2);

  // The same shape once more: no change.
  Shaped third = Shape(records);
  ASSERT_TRUE(next->Apply(std::move(third.batch), &third.origins, &change).ok());
  EXPECT_FALSE(change.has_value());
}

TEST(TransformOps, EvolveGivesTheOutputShapeWithoutRows) {
  auto runner = Open(R"y(        - cast: {amount: double}
        - derive: {double_amount: "amount * 2"}
        - drop: [email]
)y");
  ASSERT_NE(runner, nullptr);
  const Shaped shaped = Shape(Records());
  Result<std::optional<schema::NamespaceChange>> change = runner->Evolve(shaped.input);
  ASSERT_TRUE(change.ok()) << change.status().message();
  ASSERT_TRUE(change->has_value());
  const schema::NamespaceSchema& out = runner->output_schema().namespaces.at("p");
  EXPECT_THAT(Names(out.fields),
              ElementsAre("id", "name", "amount", "internal", "country", "double_amount"));
  EXPECT_EQ(out.FindField("double_amount")->type, LogicalType::Double());
}

TEST(TransformOps, NestedFieldsPassThroughUnchanged) {
  std::vector<Value> records = {
      Record({{"id", Value::Int(1)},
              {"address", Record({{"city", Value::String("Oslo")}, {"zip", Value::Int(150)}})},
              {"tags", Value::List({Value::String("a"), Value::String("b")})}}),
      Record({{"id", Value::Int(2)}, {"address", Value::Null()}, {"tags", Value::List({})}})};
  auto runner = Open(R"y(        - derive: {n: "len(tags)"}
)y");
  ASSERT_NE(runner, nullptr);
  Shaped shaped = Shape(records);
  const std::vector<Field> input_fields = shaped.batch.fields;
  const Batch out = ApplyOk(*runner, std::move(shaped));
  ASSERT_EQ(out.num_rows, 2);
  EXPECT_EQ(out.RowAt(0).ToJson(),
            R"({"id":1,"address":{"city":"Oslo","zip":150},"tags":["a","b"],"n":2})");
  EXPECT_EQ(out.RowAt(1).ToJson(), R"({"id":2,"address":null,"tags":[],"n":0})");
}

TEST(TransformOps, ABadCastNamesTheOpAndTheRecord) {
  std::vector<Value> records;
  for (int i = 1; i <= 9; ++i) {
    records.push_back(Record(
        {{"id", Value::Int(i)}, {"code", Value::String(i == 7 ? "abc" : std::to_string(i))}}));
  }
  auto runner = Open(R"y(        - rename: {id: key}
        - cast: {code: int}
        - filter: "code > 0"
)y");
  ASSERT_NE(runner, nullptr);
  Shaped shaped = Shape(records);
  Result<Batch> out = runner->Apply(std::move(shaped.batch), &shaped.origins, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("pipelines.p.transform.ops[1] (cast, skippr.yml:"));
  EXPECT_THAT(out.status().message(), HasSubstr("fails on record in.jsonl:7 (row 7)"));
  EXPECT_THAT(out.status().message(), HasSubstr("'abc'"));
}

TEST(TransformOps, AnExpressionThatDoesNotBindIsAConfigError) {
  auto runner = Open(R"y(        - derive: {x: "no_such_field + 1"}
)y");
  ASSERT_NE(runner, nullptr);
  Shaped shaped = Shape(Records());
  Result<Batch> out = runner->Apply(std::move(shaped.batch), &shaped.origins, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidConfig);
  EXPECT_THAT(out.status().message(), HasSubstr("pipelines.p.transform.ops[0] (derive"));
  EXPECT_THAT(out.status().message(), HasSubstr("no_such_field"));
}

TEST(TransformOps, RenameOntoAnExistingFieldIsAConfigError) {
  auto runner = Open(R"y(        - rename: {name: email}
)y");
  ASSERT_NE(runner, nullptr);
  Shaped shaped = Shape(Records());
  Result<Batch> out = runner->Apply(std::move(shaped.batch), &shaped.origins, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("ops[0] (rename"));
  EXPECT_THAT(out.status().message(), HasSubstr("renames 'name' to 'email'"));
}

TEST(TransformOps, ChangeDataCaptureRowsKeepTheirSidecarAndRefuseAFilter) {
  CdcSidecar cdc;
  cdc.mutations = {Mutation::kInsert, Mutation::kDelete};
  cdc.event_ids = {"e1", "e2"};
  cdc.order_tokens = {"1", "2"};
  cdc.business_keys = {"k1", "k2"};
  auto runner = Open(R"y(        - derive: {doubled: "id * 2"}
)y");
  ASSERT_NE(runner, nullptr);
  Shaped shaped = Shape(Records());
  shaped.batch.cdc = cdc;
  const Batch out = ApplyOk(*runner, std::move(shaped));
  ASSERT_TRUE(out.cdc.has_value());
  EXPECT_EQ(out.cdc->mutations, cdc.mutations);
  EXPECT_EQ(out.cdc->event_ids, cdc.event_ids);

  auto filtering = Open(R"y(        - filter: "id > 1"
)y");
  ASSERT_NE(filtering, nullptr);
  Shaped filtered = Shape(Records());
  filtered.batch.cdc = cdc;
  Result<Batch> refused = filtering->Apply(std::move(filtered.batch), &filtered.origins, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotSupported);
}

// The store keeps the ops' output (what readers see) and the shaper's input schema apart.
TEST(TransformSchemas, InputAndOutputSchemasAreKeptApart) {
  testing::TempDir dir;
  Result<std::unique_ptr<store::Store>> store = store::Store::Open({dir.path() + "/store"});
  ASSERT_TRUE(store.ok()) << store.status().message();
  schema::NamespaceSchema input = Shape(Records()).input;
  auto runner = Open(R"y(        - drop: [internal, email]
)y");
  ASSERT_NE(runner, nullptr);
  ASSERT_TRUE(runner->Evolve(input).ok());
  {
    Result<store::WriteTransaction> write = (*store)->BeginWrite();
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE(schema::SaveInputNamespace(*write, input).ok());
    ASSERT_TRUE(schema::SaveNamespace(*write, runner->output_schema().namespaces.at("p")).ok());
    ASSERT_TRUE(write->Commit().ok());
  }
  Result<store::ReadTransaction> read = (*store)->BeginRead();
  ASSERT_TRUE(read.ok());
  Result<schema::PipelineSchema> output = schema::LoadSchema(*read);
  Result<schema::PipelineSchema> loaded_input = schema::LoadInputSchema(*read);
  ASSERT_TRUE(output.ok() && loaded_input.ok());
  EXPECT_THAT(Names(output->namespaces.at("p").fields),
              ElementsAre("id", "name", "amount", "country"));
  EXPECT_THAT(Names(loaded_input->namespaces.at("p").fields),
              ElementsAre("id", "name", "email", "amount", "internal", "country"));
}

// ----- query::Engine::RunToBatch: DuckDB types back into Batch columns -------------------------

TEST(RunToBatch, ReadsEveryStorableType) {
  Result<std::unique_ptr<query::Engine>> engine = query::Engine::Open();
  ASSERT_TRUE(engine.ok());
  Result<Batch> batch = (*engine)->RunToBatch(
      "SELECT true AS b, 7::TINYINT AS t, 8::INTEGER AS i, 9::BIGINT AS l, 1.5::FLOAT AS f, "
      "2.25::DOUBLE AS d, 12.34::DECIMAL(4,2) AS d4, 123456789012.345::DECIMAL(20,3) AS d20, "
      "DATE '2024-01-02' AS dt, TIME '01:02:03' AS tm, TIMESTAMP '2024-01-02 03:04:05' AS ts, "
      "TIMESTAMP_MS '2024-01-02 03:04:05' AS tms, TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tz, "
      "'x' AS s, '\\x01\\x02'::BLOB AS bl, '00112233-4455-6677-8899-aabbccddeeff'::UUID AS u, "
      "NULL::VARCHAR AS n, {'a': 1, 'b': 'z'} AS st, [1, NULL, 3] AS li, MAP {'k': 1} AS m "
      "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
      "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL");
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  std::string reason;
  ASSERT_TRUE(batch->Validate(&reason)) << reason;
  ASSERT_EQ(batch->num_rows, 2);
  std::vector<std::string> types;
  for (const Field& field : batch->fields) types.push_back(field.type.ToString());
  EXPECT_THAT(types, ElementsAre("boolean", "int", "int", "long", "float", "double",
                                 "decimal(4, 2)", "decimal(20, 3)", "date", "time", "timestamp",
                                 "timestamp", "timestamptz", "string", "binary", "uuid", "string",
                                 "struct<a: int, b: string>", "list<int>", "map<string, int>"));
  const Value row = batch->RowAt(0);
  EXPECT_TRUE(row.Find("b")->as_bool());
  EXPECT_EQ(row.Find("t")->as_int(), 7);
  EXPECT_EQ(row.Find("l")->as_int(), 9);
  EXPECT_EQ(row.Find("d")->as_double(), 2.25);
  EXPECT_EQ(row.Find("d4")->decimal_unscaled(), 1234);
  EXPECT_EQ(batch->columns[7].Decimal128At(0).first, 123456789012345u);
  EXPECT_EQ(row.Find("dt")->as_int(), 19724);
  EXPECT_EQ(row.Find("tm")->as_int(), 3723000000);
  EXPECT_EQ(row.Find("ts")->as_int(), 1704164645000000);
  EXPECT_EQ(row.Find("tms")->as_int(), 1704164645000000);
  EXPECT_EQ(row.Find("tz")->as_int(), 1704164645000000);
  EXPECT_EQ(row.Find("bl")->as_string(), std::string("\x01\x02"));
  EXPECT_EQ(row.Find("u")->as_string(),
            std::string("\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff", 16));
  EXPECT_TRUE(row.Find("n")->is_null());
  EXPECT_EQ(row.Find("st")->ToJson(), R"({"a":1,"b":"z"})");
  EXPECT_EQ(row.Find("li")->ToJson(), "[1,null,3]");
  EXPECT_EQ(row.Find("m")->ToJson(), R"({"k":1})");
  const Value nulls = batch->RowAt(1);
  for (const Field& field : batch->fields)
    EXPECT_TRUE(nulls.Find(field.name)->is_null()) << field.name;
}

// DuckDB itself types a bare NULL as INTEGER in a result; `derive: {x: "NULL::VARCHAR"}` says more.
TEST(RunToBatch, AnUntypedNullIsAnIntColumnOfNulls) {
  Result<std::unique_ptr<query::Engine>> engine = query::Engine::Open();
  ASSERT_TRUE(engine.ok());
  Result<Batch> batch = (*engine)->RunToBatch("SELECT NULL AS n");
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ASSERT_EQ(batch->num_rows, 1);
  EXPECT_EQ(batch->fields[0].type, LogicalType::Int());
  EXPECT_TRUE(batch->RowAt(0).Find("n")->is_null());
}

TEST(RunToBatch, ATypeItCannotStoreNamesTheColumn) {
  Result<std::unique_ptr<query::Engine>> engine = query::Engine::Open();
  ASSERT_TRUE(engine.ok());
  Result<Batch> batch = (*engine)->RunToBatch("SELECT INTERVAL 1 DAY AS gap");
  ASSERT_FALSE(batch.ok());
  EXPECT_THAT(batch.status().message(), HasSubstr("column 'gap' has DuckDB type INTERVAL"));
}

}  // namespace
}  // namespace skippr::transform
