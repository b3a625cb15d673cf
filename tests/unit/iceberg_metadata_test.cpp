// iceberg/: table metadata (model, v2 JSON, edits), metadata files, and the catalog over SQLite
// and a real PostgreSQL.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "iceberg/catalog.hpp"
#include "iceberg/table_metadata.hpp"
#include "support/aws_servers.hpp"
#include "support/loopback.hpp"
#include "support/postgres_server.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::iceberg {
namespace {

namespace fs = std::filesystem;
using skippr::testing::DynamoServer;
using skippr::testing::FreeLoopbackPort;
using skippr::testing::PostgresServer;
using skippr::testing::ServerSuite;
using skippr::testing::RunShell;
using skippr::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using Json = nlohmann::json;

constexpr int64_t kT0Ms = 1'700'000'000'000;
constexpr const char* kLandingIdKey = "skippr.landing-id";

using skippr::testing::ExpectOk;
using skippr::testing::ValueOrDie;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every kind of field the schema module writes, nested ones included (ids 1..12).
std::vector<Field> SampleFields() {
  return {
      Field{1, "id", LogicalType::Long(), false},
      Field{2, "name", LogicalType::String(), true},
      Field{3, "address",
            LogicalType::Struct({Field{4, "city", LogicalType::String(), true},
                                 Field{5, "zip", LogicalType::Int(), true}}),
            true},
      Field{6, "scores", LogicalType::List(Field{7, "element", LogicalType::Double(), true}), true},
      Field{8, "seen_at",
            LogicalType::Map(Field{9, "key", LogicalType::String(), false},
                             Field{10, "value", LogicalType::TimestampTz(), true}),
            true},
      Field{11, "amount", ValueOrDie(LogicalType::Decimal(10, 2)), true},
      Field{12, "trace", LogicalType::Uuid(), true},
  };
}

TableMetadata NewTable(const std::string& location = "file:///warehouse/rides/trips") {
  return ValueOrDie(NewTableMetadata(location, SampleFields(), kT0Ms));
}

NewSnapshot Landing(int64_t snapshot_id, int64_t timestamp_ms, const std::string& landing_id) {
  return NewSnapshot{
      snapshot_id,
      timestamp_ms,
      fmt::format("file:///warehouse/rides/trips/metadata/snap-{}.avro", snapshot_id),
      SnapshotOperation::kAppend,
      {{kLandingIdKey, landing_id}, {"added-records", "10"}}};
}

Json ToJson(const TableMetadata& metadata) {
  return Json::parse(ValueOrDie(TableMetadataToJson(metadata)));
}

std::set<std::string> KeysOf(const Json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

// ----- JSON shape --------------------------------------------------------------------------------

TEST(TableMetadataJson, NewTableHasEveryRequiredV2FieldAndNoV1OnlyField) {
  const Json json = ToJson(NewTable());
  EXPECT_EQ(
      KeysOf(json),
      (std::set<std::string>{
          "format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
          "last-column-id", "current-schema-id", "schemas", "default-spec-id", "partition-specs",
          "last-partition-id", "default-sort-order-id", "sort-orders", "properties",
          "current-snapshot-id", "refs", "snapshots", "snapshot-log", "metadata-log"}));
  EXPECT_EQ(json["format-version"], 2);
  EXPECT_THAT(json["table-uuid"].get<std::string>(),
              MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
  EXPECT_EQ(json["location"], "file:///warehouse/rides/trips");
  EXPECT_EQ(json["last-sequence-number"], 0);
  EXPECT_EQ(json["last-updated-ms"], kT0Ms);
  EXPECT_EQ(json["last-column-id"], 12);
  EXPECT_EQ(json["current-schema-id"], 0);
  EXPECT_EQ(json["default-spec-id"], 0);
  EXPECT_EQ(json["partition-specs"], Json::parse(R"([{"spec-id": 0, "fields": []}])"));
  EXPECT_EQ(json["last-partition-id"], 999);
  EXPECT_EQ(json["default-sort-order-id"], 0);
  EXPECT_EQ(json["sort-orders"], Json::parse(R"([{"order-id": 0, "fields": []}])"));
  EXPECT_EQ(json["properties"], Json::object());
  EXPECT_EQ(json["current-snapshot-id"], -1);  // what v2 writers write for "none"
  EXPECT_EQ(json["refs"], Json::object());
  EXPECT_EQ(json["snapshots"], Json::array());
  EXPECT_EQ(json["snapshot-log"], Json::array());
  EXPECT_EQ(json["metadata-log"], Json::array());
}

TEST(TableMetadataJson, SchemasAreTheSchemaModulesIcebergJson) {
  const Json schema = ToJson(NewTable())["schemas"][0];
  EXPECT_EQ(schema["type"], "struct");
  EXPECT_EQ(schema["schema-id"], 0);
  EXPECT_FALSE(schema.contains("identifier-field-ids"));
  const Json& fields = schema["fields"];
  ASSERT_EQ(fields.size(), 7u);
  EXPECT_EQ(fields[0], Json::parse(R"({"id": 1, "name": "id", "required": true, "type": "long"})"));
  EXPECT_EQ(fields[2]["type"], Json::parse(R"({"type": "struct", "fields": [
      {"id": 4, "name": "city", "required": false, "type": "string"},
      {"id": 5, "name": "zip", "required": false, "type": "int"}]})"));
  EXPECT_EQ(fields[3]["type"], Json::parse(R"({"type": "list", "element-id": 7,
      "element": "double", "element-required": false})"));
  EXPECT_EQ(fields[4]["type"], Json::parse(R"({"type": "map", "key-id": 9, "key": "string",
      "value-id": 10, "value": "timestamptz", "value-required": false})"));
  EXPECT_EQ(fields[5]["type"], "decimal(10,2)");
  EXPECT_EQ(fields[6]["type"], "uuid");
}

TEST(TableMetadataJson, SnapshotsRefsAndLogsHaveTheSpecShape) {
  TableMetadata metadata = NewTable();
  ExpectOk(AddSnapshot(metadata, Landing(101, kT0Ms + 10, "landing-a")));
  ExpectOk(AddSnapshot(metadata, Landing(102, kT0Ms + 20, "landing-b")));
  const Json json = ToJson(metadata);

  EXPECT_EQ(json["last-sequence-number"], 2);
  EXPECT_EQ(json["last-updated-ms"], kT0Ms + 20);
  EXPECT_EQ(json["current-snapshot-id"], 102);
  EXPECT_EQ(json["refs"], Json::parse(R"({"main": {"snapshot-id": 102, "type": "branch"}})"));
  EXPECT_EQ(json["snapshots"][0], Json::parse(R"({
      "snapshot-id": 101, "sequence-number": 1, "timestamp-ms": 1700000000010,
      "manifest-list": "file:///warehouse/rides/trips/metadata/snap-101.avro",
      "summary": {"operation": "append", "skippr.landing-id": "landing-a", "added-records": "10"},
      "schema-id": 0})"));
  EXPECT_EQ(json["snapshots"][1]["parent-snapshot-id"], 101);
  EXPECT_EQ(json["snapshots"][1]["sequence-number"], 2);
  EXPECT_EQ(json["snapshot-log"], Json::parse(R"([
      {"timestamp-ms": 1700000000010, "snapshot-id": 101},
      {"timestamp-ms": 1700000000020, "snapshot-id": 102}])"));
  // "operation" comes first in the summary, as people expect to read it.
  EXPECT_THAT(ValueOrDie(TableMetadataToJson(metadata)),
              HasSubstr(R"("summary":{"operation":"append",)"));
}

// Everything the model holds, with values in every optional place.
TableMetadata RichMetadata() {
  TableMetadata metadata = NewTable();
  metadata.properties = {{"write.format.default", "parquet"}, {"owner", "skipprd"}};
  std::vector<Field> evolved = SampleFields();
  evolved.push_back(Field{13, "tip", LogicalType::Double(), true});
  ValueOrDie(AddSchema(metadata, evolved, /*last_column_id=*/20));
  metadata.schemas.back().identifier_field_ids = {1};
  metadata.partition_specs.push_back(
      PartitionSpec{1, {PartitionField{1, 1000, "id_bucket", "bucket[16]"}}});
  metadata.last_partition_id = 1000;
  metadata.sort_orders.push_back(SortOrder{1, {SortField{"identity", 2, "asc", "nulls-first"}}});
  for (int i = 1; i <= 3; ++i) {
    ExpectOk(AddSnapshot(metadata, Landing(200 + i, kT0Ms + i, fmt::format("landing-{}", i))));
  }
  metadata.refs["audit"] = SnapshotRef{201, "tag", std::nullopt, std::nullopt, 86'400'000};
  metadata.refs["main"].min_snapshots_to_keep = 2;
  metadata.refs["main"].max_snapshot_age_ms = 3'600'000;
  metadata.metadata_log.push_back(
      MetadataLogEntry{kT0Ms - 5, "file:///w/r/t/metadata/v1.metadata.json"});
  return metadata;
}

TEST(TableMetadataJson, RoundTripKeepsEveryFieldAndTheBytes) {
  const TableMetadata metadata = RichMetadata();
  const std::string json = ValueOrDie(TableMetadataToJson(metadata));
  const TableMetadata parsed = ValueOrDie(ParseTableMetadata(json, "v4.metadata.json"));
  EXPECT_EQ(parsed, metadata);
  EXPECT_EQ(ValueOrDie(TableMetadataToJson(parsed)), json);
  const Json written = Json::parse(json);
  EXPECT_EQ(written["schemas"][1]["identifier-field-ids"], Json::parse("[1]"));
  EXPECT_EQ(written["refs"]["audit"],
            Json::parse(R"({"snapshot-id": 201, "type": "tag", "max-ref-age-ms": 86400000})"));
  EXPECT_EQ(written["partition-specs"][1]["fields"][0],
            Json::parse(R"({"name": "id_bucket", "transform": "bucket[16]", "source-id": 1,
                            "field-id": 1000})"));
}

// The shape the reference (Java) writer produces, including fields we read past.
constexpr std::string_view kForeignMetadata = R"json({
  "format-version" : 2,
  "table-uuid" : "9C12D441-03FE-4693-9A96-A0705DDF69C1",
  "location" : "file:/tmp/wh/db/t",
  "last-sequence-number" : 1,
  "last-updated-ms" : 1602638573590,
  "last-column-id" : 3,
  "current-schema-id" : 1,
  "schemas" : [ {"type" : "struct", "schema-id" : 0, "fields" : [
      {"id" : 1, "name" : "x", "required" : true, "type" : "long"} ]},
    {"type" : "struct", "schema-id" : 1, "identifier-field-ids" : [ 1, 2 ], "fields" : [
      {"id" : 1, "name" : "x", "required" : true, "type" : "long"},
      {"id" : 2, "name" : "y", "required" : true, "type" : "long", "doc" : "comment"},
      {"id" : 3, "name" : "z", "required" : true, "type" : "decimal(9, 2)"} ]} ],
  "default-spec-id" : 0,
  "partition-specs" : [ {"spec-id" : 0, "fields" : [
      {"name" : "x", "transform" : "identity", "source-id" : 1, "field-id" : 1000} ]} ],
  "last-partition-id" : 1000,
  "default-sort-order-id" : 3,
  "sort-orders" : [ {"order-id" : 3, "fields" : [
      {"transform" : "bucket[4]", "source-id" : 3, "direction" : "desc", "null-order" : "nulls-last"} ]} ],
  "properties" : { },
  "current-snapshot-id" : 3055729675574597004,
  "snapshots" : [ {"sequence-number" : 1, "snapshot-id" : 3055729675574597004,
      "timestamp-ms" : 1555100955770, "summary" : {"operation" : "append"},
      "manifest-list" : "s3://a/b/2.avro", "schema-id" : 1} ],
  "statistics" : [ ],
  "partition-statistics" : [ ],
  "snapshot-log" : [ ],
  "metadata-log" : [ ]
})json";

TEST(TableMetadataJson, ReadsTheReferenceWritersOutput) {
  const TableMetadata metadata = ValueOrDie(ParseTableMetadata(kForeignMetadata, "foreign.json"));
  EXPECT_EQ(metadata.CurrentSchema().identifier_field_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(metadata.CurrentSchema().fields[2].type.decimal_precision(), 9);
  ASSERT_NE(metadata.CurrentSnapshot(), nullptr);
  EXPECT_EQ(metadata.CurrentSnapshot()->snapshot_id, 3055729675574597004);
  // "There is always a main branch reference pointing to the current-snapshot-id."
  EXPECT_EQ(metadata.refs.at("main"), (SnapshotRef{3055729675574597004, "branch"}));
}

TEST(TableMetadataJson, NoCurrentSnapshotMayBeMinusOneNullOrAbsent) {
  const Json base = ToJson(NewTable());
  for (const Json& current : {Json(-1), Json(nullptr)}) {
    Json json = base;
    json["current-snapshot-id"] = current;
    EXPECT_FALSE(ValueOrDie(ParseTableMetadata(json.dump(), "t")).current_snapshot_id);
  }
  Json json = base;
  json.erase("current-snapshot-id");
  EXPECT_FALSE(ValueOrDie(ParseTableMetadata(json.dump(), "t")).current_snapshot_id);
}

TEST(TableMetadataJson, WritingBrokenMetadataIsRefusedAsABug) {
  TableMetadata metadata = NewTable();
  metadata.current_schema_id = 7;
  const Status status = TableMetadataToJson(metadata).status();
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("$.current-schema-id"));

  metadata = NewTable();
  metadata.properties["bad"] = "\xff\xfe";
  EXPECT_EQ(TableMetadataToJson(metadata).status().code(), StatusCode::kInvalidArgument);
}

// ----- Malformed metadata ------------------------------------------------------------------------

struct Damage {
  std::string description;
  std::function<void(Json&)> apply;
  std::string json_path;  // what the error must name
  std::string problem;
};

TEST(TableMetadataParse, MalformedMetadataNamesTheFileAndTheJsonPath) {
  TableMetadata metadata = NewTable();
  ExpectOk(AddSnapshot(metadata, Landing(101, kT0Ms + 10, "landing-a")));
  const Json valid = ToJson(metadata);
  const std::vector<Damage> damages = {
      {"missing field", [](Json& j) { j.erase("last-sequence-number"); }, "$.last-sequence-number",
       "missing required field"},
      {"wrong type", [](Json& j) { j["last-column-id"] = "12"; }, "$.last-column-id",
       "expected a 32-bit integer, found string"},
      {"too big for int", [](Json& j) { j["last-column-id"] = 1LL << 40; }, "$.last-column-id",
       "expected a 32-bit integer"},
      {"unknown operation", [](Json& j) { j["snapshots"][0]["summary"]["operation"] = "upsert"; },
       "$.snapshots[0].summary.operation", "unknown operation 'upsert'"},
      {"summary value not a string",
       [](Json& j) { j["snapshots"][0]["summary"]["skippr.landing-id"] = 5; },
       "$.snapshots[0].summary[\"skippr.landing-id\"]", "expected a string"},
      {"snapshot without manifest list", [](Json& j) { j["snapshots"][0].erase("manifest-list"); },
       "$.snapshots[0].manifest-list", "missing required field"},
      {"schema field without type", [](Json& j) { j["schemas"][0]["fields"][1].erase("type"); },
       "$.schemas[0]", "needs id, name and type"},
      {"unknown current schema", [](Json& j) { j["current-schema-id"] = 5; }, "$.current-schema-id",
       "schema 5 is not in $.schemas"},
      {"current snapshot not main", [](Json& j) { j["refs"]["main"]["snapshot-id"] = 999; },
       "$.refs.main.snapshot-id", "snapshot 999 is not in $.snapshots"},
      {"ref type", [](Json& j) { j["refs"]["main"]["type"] = "leaf"; }, "$.refs.main.type",
       "neither branch nor tag"},
      {"not a uuid", [](Json& j) { j["table-uuid"] = "table-1"; }, "$.table-uuid", "is not a UUID"},
      {"sequence number from the future", [](Json& j) { j["snapshots"][0]["sequence-number"] = 9; },
       "$.snapshots[0].sequence-number", "above last-sequence-number 1"},
      {"field id above last-column-id", [](Json& j) { j["last-column-id"] = 3; }, "$.schemas[0]",
       "above last-column-id 3"},
      {"schemas not a list", [](Json& j) { j["schemas"] = Json::object(); }, "$.schemas",
       "expected an array"},
      {"not an object", [](Json& j) { j = Json::array(); }, "$", "expected a JSON object"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.description);
    Json damaged = valid;
    damage.apply(damaged);
    const Status status =
        ParseTableMetadata(damaged.dump(), "file:///w/t/metadata/v3.metadata.json").status();
    EXPECT_EQ(status.code(), StatusCode::kCorruption) << status.ToString();
    EXPECT_THAT(status.message(), HasSubstr("file:///w/t/metadata/v3.metadata.json"));
    EXPECT_THAT(status.message(), HasSubstr(" at " + damage.json_path + ": "));
    EXPECT_THAT(status.message(), HasSubstr(damage.problem));
  }
}

TEST(TableMetadataParse, TextThatIsNotJsonIsCorruptionNamingTheFile) {
  for (std::string_view text : {"", "{", R"({"format-version": 2,)", "not json"}) {
    const Status status = ParseTableMetadata(text, "v9.metadata.json").status();
    EXPECT_EQ(status.code(), StatusCode::kCorruption);
    EXPECT_THAT(status.message(), HasSubstr("v9.metadata.json"));
    EXPECT_THAT(status.message(), HasSubstr("not valid JSON"));
  }
}

TEST(TableMetadataParse, OtherFormatVersionsAreNotSupported) {
  for (int version : {1, 3}) {
    Json json = ToJson(NewTable());
    json["format-version"] = version;
    const Status status = ParseTableMetadata(json.dump(), "v1.metadata.json").status();
    EXPECT_EQ(status.code(), StatusCode::kNotSupported);
    EXPECT_THAT(status.message(), HasSubstr("v1.metadata.json"));
    EXPECT_THAT(status.message(),
                HasSubstr(fmt::format("format version {} is not supported", version)));
  }
}

// ----- Edits -------------------------------------------------------------------------------------

TEST(TableMetadataEdit, AddSchemaGivesANewIdAndGrowsLastColumnId) {
  TableMetadata metadata = NewTable();
  std::vector<Field> evolved = SampleFields();
  evolved.push_back(Field{13, "tip", LogicalType::Double(), true});
  EXPECT_EQ(ValueOrDie(AddSchema(metadata, evolved)), 1);
  EXPECT_EQ(metadata.current_schema_id, 1);
  EXPECT_EQ(metadata.last_column_id, 13);
  EXPECT_EQ(metadata.schemas.size(), 2u);

  // A snapshot records the schema it was written with.
  ExpectOk(AddSnapshot(metadata, Landing(101, kT0Ms, "a")));
  EXPECT_EQ(metadata.CurrentSnapshot()->schema_id, 1);

  // Going back to an identical schema reuses its id; last-column-id never shrinks.
  EXPECT_EQ(ValueOrDie(AddSchema(metadata, SampleFields())), 0);
  EXPECT_EQ(metadata.schemas.size(), 2u);
  EXPECT_EQ(metadata.last_column_id, 13);
  EXPECT_EQ(ValueOrDie(AddSchema(metadata, {Field{1, "id", LogicalType::Long(), false}}, 40)), 2);
  EXPECT_EQ(metadata.last_column_id, 40);
}

TEST(TableMetadataEdit, SchemasWithBrokenFieldIdsAreRefused) {
  TableMetadata metadata = NewTable();
  const std::vector<Field> twice = {Field{1, "a", LogicalType::Long()},
                                    Field{1, "b", LogicalType::Long()}};
  EXPECT_EQ(AddSchema(metadata, twice).status().code(), StatusCode::kInvalidArgument);
  const std::vector<Field> zero = {Field{0, "a", LogicalType::Long()}};
  EXPECT_EQ(AddSchema(metadata, zero).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NewTableMetadata("file:///t", twice, kT0Ms).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(metadata.schemas.size(), 1u);
}

TEST(TableMetadataEdit, AddSnapshotRefusesReusedIdsAndMisplacedOperation) {
  TableMetadata metadata = NewTable();
  ExpectOk(AddSnapshot(metadata, Landing(101, kT0Ms, "a")));
  EXPECT_EQ(AddSnapshot(metadata, Landing(101, kT0Ms, "b")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AddSnapshot(metadata, Landing(0, kT0Ms, "b")).code(), StatusCode::kInvalidArgument);
  NewSnapshot with_operation = Landing(102, kT0Ms, "b");
  with_operation.summary["operation"] = "delete";
  EXPECT_EQ(AddSnapshot(metadata, with_operation).code(), StatusCode::kInvalidArgument);
  NewSnapshot without_list = Landing(103, kT0Ms, "b");
  without_list.manifest_list.clear();
  EXPECT_EQ(AddSnapshot(metadata, without_list).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(metadata.snapshots.size(), 1u);
  EXPECT_EQ(metadata.last_sequence_number, 1);
}

TEST(TableMetadataEdit, NewSnapshotIdsArePositiveAndUnused) {
  TableMetadata metadata = NewTable();
  std::set<int64_t> ids;
  for (int i = 0; i < 200; ++i) {
    const int64_t id = ValueOrDie(NewSnapshotId(metadata));
    EXPECT_GT(id, 0);
    EXPECT_TRUE(ids.insert(id).second);
    ExpectOk(AddSnapshot(metadata, Landing(id, kT0Ms + i, std::to_string(i))));
  }
}

TEST(TableMetadataEdit, NextVersionLogsItsBaseAndKeepsTheConfiguredNumber) {
  TableMetadata metadata = NewTable();
  metadata.properties["write.metadata.previous-versions-max"] = "2";
  for (int version = 1; version <= 4; ++version) {
    metadata = NextVersion(metadata, fmt::format("file:///t/metadata/v{}.metadata.json", version),
                           kT0Ms + version);
  }
  EXPECT_EQ(metadata.last_updated_ms, kT0Ms + 4);
  EXPECT_THAT(metadata.metadata_log,
              ElementsAre(MetadataLogEntry{kT0Ms + 2, "file:///t/metadata/v3.metadata.json"},
                          MetadataLogEntry{kT0Ms + 3, "file:///t/metadata/v4.metadata.json"}));
}

TEST(TableMetadataEdit, ALandingIdIsFoundOnlyInTheCurrentHistory) {
  TableMetadata metadata = NewTable();
  EXPECT_EQ(FindAncestorWithSummary(metadata, kLandingIdKey, "a"), nullptr);
  ExpectOk(AddSnapshot(metadata, Landing(101, kT0Ms + 1, "a")));
  ExpectOk(AddSnapshot(metadata, Landing(102, kT0Ms + 2, "b")));
  ASSERT_NE(FindAncestorWithSummary(metadata, kLandingIdKey, "a"), nullptr);
  EXPECT_EQ(FindAncestorWithSummary(metadata, kLandingIdKey, "a")->snapshot_id, 101);
  EXPECT_EQ(FindAncestorWithSummary(metadata, kLandingIdKey, "b")->snapshot_id, 102);
  EXPECT_EQ(FindAncestorWithSummary(metadata, kLandingIdKey, "c"), nullptr);
  EXPECT_EQ(FindAncestorWithSummary(metadata, "added-records", "10")->snapshot_id, 102);

  // A snapshot off the main history (rolled back, or another branch) did not land in the table.
  metadata.snapshots.push_back(Snapshot{103,
                                        101,
                                        3,
                                        kT0Ms + 3,
                                        "file:///x.avro",
                                        SnapshotOperation::kAppend,
                                        {{kLandingIdKey, "c"}},
                                        0});
  metadata.last_sequence_number = 3;
  EXPECT_EQ(FindAncestorWithSummary(metadata, kLandingIdKey, "c"), nullptr);
}

// ----- Expiry ------------------------------------------------------------------------------------

// Snapshots 1..count on main, snapshot i at kT0Ms + i * 1000.
TableMetadata TableWithSnapshots(int count) {
  TableMetadata metadata = NewTable();
  for (int i = 1; i <= count; ++i) {
    ExpectOk(AddSnapshot(metadata, Landing(i, kT0Ms + i * 1000, fmt::format("landing-{}", i))));
  }
  return metadata;
}

std::vector<int64_t> IdsOf(const std::vector<Snapshot>& snapshots) {
  std::vector<int64_t> ids;
  for (const Snapshot& snapshot : snapshots) ids.push_back(snapshot.snapshot_id);
  return ids;
}

std::vector<int64_t> LoggedIds(const TableMetadata& metadata) {
  std::vector<int64_t> ids;
  for (const SnapshotLogEntry& entry : metadata.snapshot_log) ids.push_back(entry.snapshot_id);
  return ids;
}

TEST(SnapshotExpiry, RemovesSnapshotsOlderThanTheCutoffAndTrimsTheLog) {
  TableMetadata metadata = TableWithSnapshots(5);
  const SnapshotRetention retention{kT0Ms + 5000, /*max_snapshot_age_ms=*/2500,
                                    /*min_snapshots_to_keep=*/1};
  const std::vector<Snapshot> removed = ExpireSnapshots(metadata, retention);
  EXPECT_THAT(IdsOf(removed), ElementsAre(1, 2));  // oldest first
  EXPECT_THAT(IdsOf(metadata.snapshots), ElementsAre(3, 4, 5));
  EXPECT_THAT(LoggedIds(metadata), ElementsAre(3, 4, 5));
  EXPECT_EQ(metadata.CurrentSnapshot()->snapshot_id, 5);
  // The survivors still serialise: parents that expired are allowed.
  ExpectOk(TableMetadataToJson(metadata).status());
}

TEST(SnapshotExpiry, KeepsTheNewestNWhateverTheirAge) {
  TableMetadata metadata = TableWithSnapshots(5);
  const SnapshotRetention retention{kT0Ms + 100'000, /*max_snapshot_age_ms=*/0,
                                    /*min_snapshots_to_keep=*/3};
  EXPECT_THAT(IdsOf(ExpireSnapshots(metadata, retention)), ElementsAre(1, 2));
  EXPECT_THAT(IdsOf(metadata.snapshots), ElementsAre(3, 4, 5));

  // The current snapshot survives even when everything is old and nothing is to be kept.
  const SnapshotRetention keep_nothing{kT0Ms + 100'000, 0, 0};
  EXPECT_THAT(IdsOf(ExpireSnapshots(metadata, keep_nothing)), ElementsAre(3, 4));
  EXPECT_THAT(IdsOf(metadata.snapshots), ElementsAre(5));
  EXPECT_THAT(LoggedIds(metadata), ElementsAre(5));
}

TEST(SnapshotExpiry, ARefsOwnRetentionWinsOverTheDefaults) {
  TableMetadata metadata = TableWithSnapshots(5);
  metadata.refs["main"].min_snapshots_to_keep = 4;
  const SnapshotRetention retention{kT0Ms + 100'000, 0, 1};
  EXPECT_THAT(IdsOf(ExpireSnapshots(metadata, retention)), ElementsAre(1));
}

TEST(SnapshotExpiry, TagsKeepTheirSnapshotUntilTheTagItselfExpires) {
  TableMetadata metadata = TableWithSnapshots(5);
  metadata.refs["audit"] = SnapshotRef{2, "tag"};
  metadata.refs["short-lived"] = SnapshotRef{1, "tag", std::nullopt, std::nullopt,
                                             /*max_ref_age_ms=*/10'000};
  const SnapshotRetention retention{kT0Ms + 20'000, /*max_snapshot_age_ms=*/0, 1};
  EXPECT_THAT(IdsOf(ExpireSnapshots(metadata, retention)), ElementsAre(1, 3, 4));
  EXPECT_THAT(IdsOf(metadata.snapshots), ElementsAre(2, 5));
  EXPECT_EQ(metadata.refs.count("short-lived"), 0u);
  EXPECT_EQ(metadata.refs.count("audit"), 1u);
  // s3 and s4 were between s2 and s5 in the log: everything before the last expired entry goes.
  EXPECT_THAT(LoggedIds(metadata), ElementsAre(5));
  ExpectOk(TableMetadataToJson(metadata).status());
}

TEST(SnapshotExpiry, UnreferencedSnapshotsGoOnlyOnceOld) {
  TableMetadata metadata = TableWithSnapshots(2);
  // Two snapshots no ref reaches (say, a rolled-back commit): one old, one young.
  metadata.snapshots.push_back(
      Snapshot{90, 1, 1, kT0Ms + 500, "file:///a.avro", SnapshotOperation::kAppend, {}, 0});
  metadata.snapshots.push_back(
      Snapshot{91, 1, 2, kT0Ms + 9000, "file:///b.avro", SnapshotOperation::kAppend, {}, 0});
  const SnapshotRetention retention{kT0Ms + 10'000, /*max_snapshot_age_ms=*/5000, 2};
  EXPECT_THAT(IdsOf(ExpireSnapshots(metadata, retention)), ElementsAre(90));
  EXPECT_THAT(IdsOf(metadata.snapshots), ElementsAre(1, 2, 91));
}

// ----- Metadata files ----------------------------------------------------------------------------

std::string FileUri(const std::string& path) { return "file://" + path; }

TableMetadata NewTableIn(const TempDir& dir) {
  const std::string location = ValueOrDie(TableLocation(FileUri(dir.path()), "rides", "trips"));
  return ValueOrDie(NewTableMetadata(location, SampleFields(), kT0Ms));
}

std::vector<std::string> FilesIn(const std::string& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(MetadataFiles, LocationsAreFileOrS3Uris) {
  EXPECT_EQ(ValueOrDie(EnvPathOfUri("file:///data/wh")), "/data/wh");
  EXPECT_EQ(ValueOrDie(EnvPathOfUri("file:/data/wh/")), "/data/wh");
  EXPECT_EQ(ValueOrDie(EnvPathOfUri("/data/wh")), "/data/wh");
  // An S3Env's paths are the URIs themselves.
  EXPECT_EQ(ValueOrDie(EnvPathOfUri("s3://bucket/wh/")), "s3://bucket/wh");
  EXPECT_EQ(EnvPathOfUri("s3:///wh").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValueOrDie(TableLocation("s3://bucket/wh/", "rides", "trips")),
            "s3://bucket/wh/rides/trips");
  EXPECT_EQ(EnvPathOfUri("gs://bucket/wh").status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(EnvPathOfUri("file://host/wh").status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(EnvPathOfUri("data/wh").status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(ValueOrDie(TableLocation("file:///data/wh/", "rides", "trips")),
            "file:///data/wh/rides/trips");
  for (const char* bad : {"", ".", "..", "a/b"}) {
    EXPECT_EQ(TableLocation("file:///wh", bad, "t").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(TableLocation("file:///wh", "ns", bad).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(MetadataFileLocation("file:///wh/ns/t", 12),
            "file:///wh/ns/t/metadata/v12.metadata.json");
  EXPECT_EQ(MetadataFileVersion("file:///wh/ns/t/metadata/v12.metadata.json"), 12);
  EXPECT_EQ(MetadataFileVersion("v1.metadata.json"), 1);
  for (const char* other : {"00001-6a1c.metadata.json", "v.metadata.json", "v-1.metadata.json",
                            "v1.metadata.json.gz", "v0.metadata.json", "x/v1x.metadata.json"}) {
    EXPECT_EQ(MetadataFileVersion(other), std::nullopt) << other;
  }
}

TEST(MetadataFiles, WrittenVersionsAreReadBackAndTheHintIsTheBareNumber) {
  TempDir dir;
  const TableMetadata v1 = NewTableIn(dir);
  const std::string v1_location = ValueOrDie(WriteMetadataFile(v1, 1));
  EXPECT_EQ(v1_location, FileUri(dir.path()) + "/rides/trips/metadata/v1.metadata.json");
  ExpectOk(WriteVersionHint(v1.location, 1));

  TableMetadata v2 = NextVersion(v1, v1_location, kT0Ms + 1);
  ExpectOk(AddSnapshot(v2, Landing(7, kT0Ms + 1, "a")));
  ValueOrDie(WriteMetadataFile(v2, 2));
  ExpectOk(WriteVersionHint(v2.location, 2));

  const std::string metadata_dir = dir.Sub("rides/trips/metadata");
  EXPECT_EQ(ReadFile(metadata_dir + "/version-hint.text"), "2");
  EXPECT_THAT(FilesIn(metadata_dir),
              ElementsAre("v1.metadata.json", "v2.metadata.json", "version-hint.text"));
  const VersionedMetadata current = ValueOrDie(ReadCurrentMetadata(v1.location));
  EXPECT_EQ(current.version, 2);
  EXPECT_EQ(current.location, MetadataFileLocation(v1.location, 2));
  EXPECT_EQ(current.metadata, v2);
  EXPECT_EQ(ValueOrDie(ReadMetadataFile(v1_location)), v1);
  EXPECT_EQ(ValueOrDie(HighestMetadataVersion(v1.location)), 2);
  // The file on disk is exactly the JSON form.
  EXPECT_EQ(ReadFile(metadata_dir + "/v2.metadata.json"), ValueOrDie(TableMetadataToJson(v2)));
}

TEST(MetadataFiles, ASecondWriterOfTheSameVersionFailsAndChangesNothing) {
  TempDir dir;
  const TableMetadata first = NewTableIn(dir);
  ValueOrDie(WriteMetadataFile(first, 1));
  const std::string path = dir.Sub("rides/trips/metadata/v1.metadata.json");
  const std::string before = ReadFile(path);

  TableMetadata second = first;
  second.properties["writer"] = "second";
  const Status status = WriteMetadataFile(second, 1).status();
  EXPECT_EQ(status.code(), StatusCode::kConflict);
  EXPECT_THAT(status.message(), HasSubstr("metadata version 1 of table"));
  EXPECT_THAT(status.message(), HasSubstr("already exists"));
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_THAT(FilesIn(dir.Sub("rides/trips/metadata")), ElementsAre("v1.metadata.json"));
}

TEST(MetadataFiles, ConcurrentWritersOfOneVersionHaveExactlyOneWinner) {
  TempDir dir;
  const TableMetadata metadata = NewTableIn(dir);
  constexpr int kWriters = 8;
  std::atomic<int> winners{0};
  std::atomic<int> conflicts{0};
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      TableMetadata mine = metadata;
      mine.properties["writer"] = std::to_string(i);
      const Status status = WriteMetadataFile(mine, 5).status();
      (status.ok() ? winners : conflicts) += 1;
      EXPECT_TRUE(status.ok() || status.code() == StatusCode::kConflict) << status.ToString();
    });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(conflicts, kWriters - 1);
  EXPECT_THAT(FilesIn(dir.Sub("rides/trips/metadata")), ElementsAre("v5.metadata.json"));
}

TEST(MetadataFiles, TheCurrentVersionSurvivesAStaleMissingOrGarbledHint) {
  TempDir dir;
  TableMetadata metadata = NewTableIn(dir);
  const std::string hint_path = dir.Sub("rides/trips/metadata/version-hint.text");
  EXPECT_EQ(ReadCurrentMetadata(metadata.location).status().code(), StatusCode::kNotFound);
  for (int version = 1; version <= 3; ++version) ValueOrDie(WriteMetadataFile(metadata, version));

  EXPECT_EQ(ValueOrDie(ReadCurrentMetadata(metadata.location)).version, 3);  // no hint: listed
  ExpectOk(WriteVersionHint(metadata.location, 1));
  EXPECT_EQ(ValueOrDie(ReadCurrentMetadata(metadata.location)).version, 3);  // stale: probed
  dir.Write("rides/trips/metadata/version-hint.text", "banana");
  EXPECT_EQ(ValueOrDie(ReadCurrentMetadata(metadata.location)).version, 3);  // garbled: listed
  dir.Write("rides/trips/metadata/version-hint.text", "3\n");  // a reference writer's newline
  EXPECT_EQ(ValueOrDie(ReadCurrentMetadata(metadata.location)).version, 3);
  dir.Write("rides/trips/metadata/version-hint.text", "9");  // points at nothing: listed
  EXPECT_EQ(ValueOrDie(ReadCurrentMetadata(metadata.location)).version, 3);
}

TEST(MetadataFiles, ADamagedFileIsCorruptionNamingIt) {
  TempDir dir;
  const TableMetadata metadata = NewTableIn(dir);
  const std::string path =
      dir.Write("rides/trips/metadata/v1.metadata.json", R"({"format-version": 2})");
  const Status status = ReadCurrentMetadata(metadata.location).status();
  EXPECT_EQ(status.code(), StatusCode::kCorruption);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("$.table-uuid"));
  EXPECT_EQ(ReadMetadataFile(FileUri(dir.Sub("nope.metadata.json"))).status().code(),
            StatusCode::kNotFound);
}

// ----- Catalog: SQLite ---------------------------------------------------------------------------

const TableIdentifier kTrips{"rides", "trips"};

std::unique_ptr<Catalog> OpenOrDie(const CatalogOptions& options) {
  return ValueOrDie(OpenCatalog(options));
}

CatalogOptions SqliteOptions(const TempDir& dir, const std::string& catalog_name = "skippr") {
  CatalogOptions options;
  options.catalog_name = catalog_name;
  options.warehouse = FileUri(dir.path());
  return options;
}

// Runs a shell command; returns its exit status and stdout + stderr.
bool HasProgram(const std::string& name) { return RunShell("command -v " + name).first == 0; }

TEST(SqliteCatalog, TablesAreCreatedLoadedListedAndSwapped) {
  TempDir dir;
  auto catalog = OpenOrDie(SqliteOptions(dir));
  EXPECT_TRUE(fs::exists(dir.Sub("skippr_catalog.db")));
  ExpectOk(catalog->CreateNamespace("rides"));
  ExpectOk(catalog->CreateNamespace("rides"));  // idempotent
  ExpectOk(catalog->CreateTable(kTrips, "file:///wh/rides/trips/metadata/v1.metadata.json"));
  ExpectOk(catalog->CreateTable({"rides", "stations"}, "file:///wh/s/v1.metadata.json"));
  EXPECT_EQ(ValueOrDie(catalog->LoadTable(kTrips)),
            "file:///wh/rides/trips/metadata/v1.metadata.json");
  EXPECT_THAT(ValueOrDie(catalog->ListTables("rides")), ElementsAre("stations", "trips"));
  EXPECT_TRUE(ValueOrDie(catalog->ListTables("nobody")).empty());

  ExpectOk(catalog->CompareAndSwap(kTrips, "file:///wh/rides/trips/metadata/v1.metadata.json",
                                   "file:///wh/rides/trips/metadata/v2.metadata.json"));
  EXPECT_EQ(ValueOrDie(catalog->LoadTable(kTrips)),
            "file:///wh/rides/trips/metadata/v2.metadata.json");

  // A reopened catalog sees the same rows.
  catalog.reset();
  EXPECT_EQ(ValueOrDie(OpenOrDie(SqliteOptions(dir))->LoadTable(kTrips)),
            "file:///wh/rides/trips/metadata/v2.metadata.json");
}

TEST(SqliteCatalog, TwoCatalogsOnOneFileExpectingTheSameLocationHaveOneWinner) {
  TempDir dir;
  auto first = OpenOrDie(SqliteOptions(dir));
  auto second = OpenOrDie(SqliteOptions(dir));
  ExpectOk(first->CreateNamespace("rides"));
  ExpectOk(first->CreateTable(kTrips, "file:///t/v1.metadata.json"));

  ExpectOk(first->CompareAndSwap(kTrips, "file:///t/v1.metadata.json", "file:///t/v2-first.json"));
  const Status lost =
      second->CompareAndSwap(kTrips, "file:///t/v1.metadata.json", "file:///t/v2-second.json");
  EXPECT_EQ(lost.code(), StatusCode::kConflict);
  EXPECT_THAT(lost.message(), HasSubstr("commit conflict on table rides.trips"));
  EXPECT_THAT(lost.message(), HasSubstr("points at file:///t/v2-first.json"));
  EXPECT_THAT(lost.message(), HasSubstr("not at file:///t/v1.metadata.json"));
  EXPECT_THAT(lost.message(), HasSubstr("Reload the table and retry"));
  EXPECT_EQ(ValueOrDie(second->LoadTable(kTrips)), "file:///t/v2-first.json");
}

// Two catalogs on one database race to swap the same table's pointer, round after round: exactly
// one wins each round, the other gets the conflict status, and the pointer is the winner's.
void ExpectOneWinnerPerRoundOfRacingSwaps(Catalog& first, Catalog& second) {
  ExpectOk(first.CreateNamespace("rides"));
  std::string current = "file:///t/v0.json";
  ExpectOk(first.CreateTable(kTrips, current));
  constexpr int kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> go{false};
    Status results[2];
    Catalog* catalogs[2] = {&first, &second};
    std::vector<std::thread> racers;
    for (int i = 0; i < 2; ++i) {
      racers.emplace_back([&, i] {
        while (!go) std::this_thread::yield();
        results[i] = catalogs[i]->CompareAndSwap(kTrips, current,
                                                 fmt::format("file:///t/r{}-by-{}.json", round, i));
      });
    }
    go = true;
    for (std::thread& racer : racers) racer.join();
    const int winner = results[0].ok() ? 0 : 1;
    ASSERT_TRUE(results[winner].ok()) << results[winner].ToString();
    ASSERT_EQ(results[1 - winner].code(), StatusCode::kConflict) << results[1 - winner].ToString();
    EXPECT_THAT(results[1 - winner].message(), HasSubstr("commit conflict on table rides.trips"));
    current = ValueOrDie(first.LoadTable(kTrips));
    ASSERT_EQ(current, fmt::format("file:///t/r{}-by-{}.json", round, winner));
  }
}

TEST(SqliteCatalog, RacingSwapsFromTwoConnectionsHaveExactlyOneWinnerEachRound) {
  TempDir dir;
  auto first = OpenOrDie(SqliteOptions(dir));
  auto second = OpenOrDie(SqliteOptions(dir));
  ExpectOneWinnerPerRoundOfRacingSwaps(*first, *second);
}

TEST(SqliteCatalog, MisusesHaveDistinctStatuses) {
  TempDir dir;
  auto catalog = OpenOrDie(SqliteOptions(dir));
  EXPECT_EQ(catalog->CreateTable(kTrips, "file:///a").code(), StatusCode::kNotFound);  // namespace
  ExpectOk(catalog->CreateNamespace("rides"));
  ExpectOk(catalog->CreateTable(kTrips, "file:///a"));
  const Status twice = catalog->CreateTable(kTrips, "file:///b");
  EXPECT_EQ(twice.code(), StatusCode::kConflict);
  EXPECT_THAT(twice.message(), HasSubstr("already exists"));
  EXPECT_EQ(catalog->LoadTable({"rides", "nope"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(catalog->CompareAndSwap({"rides", "nope"}, "file:///a", "file:///b").code(),
            StatusCode::kNotFound);
  EXPECT_EQ(catalog->CreateNamespace(std::string(256, 'n')).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      catalog->CompareAndSwap(kTrips, "file:///a", "file:///" + std::string(1000, 'x')).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(ValueOrDie(catalog->LoadTable(kTrips)), "file:///a");
}

TEST(SqliteCatalog, CatalogNamesShareADatabaseIndependently) {
  TempDir dir;
  auto ours = OpenOrDie(SqliteOptions(dir, "skippr"));
  auto theirs = OpenOrDie(SqliteOptions(dir, "analytics"));
  ExpectOk(ours->CreateNamespace("rides"));
  ExpectOk(theirs->CreateNamespace("rides"));
  ExpectOk(ours->CreateTable(kTrips, "file:///ours"));
  ExpectOk(theirs->CreateTable(kTrips, "file:///theirs"));
  EXPECT_EQ(ValueOrDie(ours->LoadTable(kTrips)), "file:///ours");
  EXPECT_EQ(ValueOrDie(theirs->LoadTable(kTrips)), "file:///theirs");
}

TEST(SqliteCatalog, TheFileIsReadableWithTheSqlite3CliInTheJdbcShape) {
  if (!HasProgram("sqlite3")) {
    GTEST_SKIP() << "the sqlite3 program (Debian package sqlite3) is missing";
  }
  TempDir dir;
  auto catalog = OpenOrDie(SqliteOptions(dir));
  ExpectOk(catalog->CreateNamespace("rides"));
  ExpectOk(catalog->CreateTable(kTrips, "file:///t/v1.metadata.json"));
  ExpectOk(
      catalog->CompareAndSwap(kTrips, "file:///t/v1.metadata.json", "file:///t/v2.metadata.json"));
  const std::string sqlite3 = "sqlite3 -readonly " + dir.Sub("skippr_catalog.db");

  auto [status, columns] =
      RunShell(sqlite3 +
               " \"SELECT name || ' ' || type || ' ' || \\\"notnull\\\" || ' ' || pk "
               "FROM pragma_table_info('iceberg_tables')\"");
  ASSERT_EQ(status, 0) << columns;
  EXPECT_EQ(columns,
            "catalog_name VARCHAR(255) 1 1\n"
            "table_namespace VARCHAR(255) 1 2\n"
            "table_name VARCHAR(255) 1 3\n"
            "metadata_location VARCHAR(1000) 0 0\n"
            "previous_metadata_location VARCHAR(1000) 0 0\n"
            "iceberg_type VARCHAR(5) 0 0\n");
  auto [properties_status, properties_columns] =
      RunShell(sqlite3 +
               " \"SELECT name || ' ' || type || ' ' || pk FROM "
               "pragma_table_info('iceberg_namespace_properties')\"");
  ASSERT_EQ(properties_status, 0) << properties_columns;
  EXPECT_EQ(properties_columns,
            "catalog_name VARCHAR(255) 1\n"
            "namespace VARCHAR(255) 2\n"
            "property_key VARCHAR(255) 3\n"
            "property_value VARCHAR(1000) 0\n");

  auto [rows_status, rows] = RunShell(sqlite3 + " \"SELECT * FROM iceberg_tables\"");
  ASSERT_EQ(rows_status, 0) << rows;
  EXPECT_EQ(rows,
            "skippr|rides|trips|file:///t/v2.metadata.json|file:///t/v1.metadata.json|TABLE\n");
  EXPECT_EQ(RunShell(sqlite3 + " \"SELECT * FROM iceberg_namespace_properties\"").second,
            "skippr|rides|exists|true\n");
  EXPECT_EQ(RunShell(sqlite3 + " \"PRAGMA journal_mode\"").second, "wal\n");
}

TEST(SqliteCatalog, ACatalogTheJdbcCatalogCreatedWithoutIcebergTypeIsUpgraded) {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.Sub("skippr_catalog.db").c_str(), &db), SQLITE_OK);
    // JdbcUtil.V0_CREATE_CATALOG_SQL, and a row it wrote.
    const char* v0 =
        "CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,table_namespace "
        "VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),"
        "previous_metadata_location VARCHAR(1000),PRIMARY KEY (catalog_name, table_namespace, "
        "table_name));"
        "INSERT INTO iceberg_tables VALUES ('skippr', 'rides', 'trips', 'file:///old', NULL);";
    ASSERT_EQ(sqlite3_exec(db, v0, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto catalog = OpenOrDie(SqliteOptions(dir));
  EXPECT_EQ(ValueOrDie(catalog->LoadTable(kTrips)), "file:///old");  // NULL iceberg_type: a table
  ExpectOk(catalog->CompareAndSwap(kTrips, "file:///old", "file:///new"));
  ExpectOk(catalog->CreateTable({"rides", "stations"}, "file:///s"));  // the namespace has tables
  EXPECT_THAT(ValueOrDie(catalog->ListTables("rides")), ElementsAre("stations", "trips"));
}

TEST(SqliteCatalog, UnusableOptionsAreRefused) {
  CatalogOptions options;
  EXPECT_EQ(OpenCatalog(options).status().code(), StatusCode::kInvalidArgument);  // no warehouse
  options.warehouse = "s3://bucket/wh";  // no SQLite file beside a warehouse on S3
  EXPECT_THAT(OpenCatalog(options).status().message(), HasSubstr("set catalog_table"));
  options.dynamodb_table = "catalog";
  options.uri = "postgresql://h/db";
  EXPECT_THAT(OpenCatalog(options).status().message(), HasSubstr("not both"));
  options.dynamodb_table.clear();
  options.uri.clear();
  options.warehouse = "file:///tmp";
  options.catalog_name = "";
  EXPECT_EQ(OpenCatalog(options).status().code(), StatusCode::kInvalidArgument);
}

// ----- Table commits -----------------------------------------------------------------------------

struct CommitFixture {
  TempDir dir;
  std::unique_ptr<Catalog> catalog = OpenOrDie(SqliteOptions(dir));

  TableMetadata Appended(const VersionedMetadata& base, int64_t snapshot_id,
                         const std::string& landing_id) const {
    TableMetadata next = NextVersion(base.metadata, base.location, kT0Ms + snapshot_id);
    ExpectOk(AddSnapshot(next, Landing(snapshot_id, kT0Ms + snapshot_id, landing_id)));
    return next;
  }
  std::string Hint() const { return ReadFile(dir.Sub("rides/trips/metadata/version-hint.text")); }
};

TEST(TableCommit, CreateCommitAndLoad) {
  CommitFixture f;
  const VersionedMetadata created =
      ValueOrDie(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)));
  EXPECT_EQ(created.version, 1);
  EXPECT_EQ(f.Hint(), "1");
  const VersionedMetadata base = ValueOrDie(LoadTableMetadata(*f.catalog, kTrips));
  EXPECT_EQ(base.metadata, created.metadata);

  const VersionedMetadata committed =
      ValueOrDie(CommitTableMetadata(*f.catalog, kTrips, base, f.Appended(base, 11, "landing-1")));
  EXPECT_EQ(committed.version, 2);
  EXPECT_EQ(f.Hint(), "2");
  EXPECT_EQ(ValueOrDie(f.catalog->LoadTable(kTrips)), committed.location);
  const VersionedMetadata loaded = ValueOrDie(LoadTableMetadata(*f.catalog, kTrips));
  EXPECT_EQ(loaded.version, 2);
  EXPECT_EQ(loaded.metadata.metadata_log.back().metadata_file, created.location);
  EXPECT_NE(FindAncestorWithSummary(loaded.metadata, kLandingIdKey, "landing-1"), nullptr);
  // Catalog-less readers agree.
  EXPECT_EQ(ValueOrDie(ReadCurrentMetadata(loaded.metadata.location)).metadata, loaded.metadata);
}

TEST(TableCommit, ACommitOnAStaleBaseConflicts) {
  CommitFixture f;
  ValueOrDie(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)));
  const VersionedMetadata base = ValueOrDie(LoadTableMetadata(*f.catalog, kTrips));
  ValueOrDie(CommitTableMetadata(*f.catalog, kTrips, base, f.Appended(base, 11, "landing-1")));
  const Status stale =
      CommitTableMetadata(*f.catalog, kTrips, base, f.Appended(base, 12, "landing-2")).status();
  EXPECT_EQ(stale.code(), StatusCode::kConflict);
  // Reload, re-apply, retry: it lands on top of the winner.
  const VersionedMetadata reloaded = ValueOrDie(LoadTableForCommit(*f.catalog, kTrips));
  const VersionedMetadata retried = ValueOrDie(
      CommitTableMetadata(*f.catalog, kTrips, reloaded, f.Appended(reloaded, 12, "landing-2")));
  EXPECT_EQ(retried.version, 3);
  EXPECT_EQ(retried.metadata.CurrentSnapshot()->parent_snapshot_id, 11);
}

TEST(TableCommit, TheWritersLoadCompletesACommitThatDiedBeforeTheSwap) {
  CommitFixture f;
  ValueOrDie(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)));
  const VersionedMetadata base = ValueOrDie(LoadTableMetadata(*f.catalog, kTrips));
  // The writer wrote v2 and died: the catalog still points at v1.
  ValueOrDie(WriteMetadataFile(f.Appended(base, 11, "landing-1"), 2));
  EXPECT_EQ(ValueOrDie(LoadTableMetadata(*f.catalog, kTrips)).version,
            1);  // readers change nothing

  const VersionedMetadata completed = ValueOrDie(LoadTableForCommit(*f.catalog, kTrips));
  EXPECT_EQ(completed.version, 2);
  EXPECT_EQ(ValueOrDie(f.catalog->LoadTable(kTrips)), completed.location);
  EXPECT_EQ(f.Hint(), "2");
  // The replayed landing finds its id and does nothing.
  EXPECT_NE(FindAncestorWithSummary(completed.metadata, kLandingIdKey, "landing-1"), nullptr);
}

TEST(TableCommit, AFileThatDoesNotContinueTheCurrentVersionIsNotAdopted) {
  CommitFixture f;
  ValueOrDie(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)));
  const VersionedMetadata base = ValueOrDie(LoadTableMetadata(*f.catalog, kTrips));
  TableMetadata unrelated = f.Appended(base, 11, "landing-1");
  unrelated.metadata_log.back().metadata_file = "file:///elsewhere/v1.metadata.json";
  ValueOrDie(WriteMetadataFile(unrelated, 2));
  EXPECT_EQ(ValueOrDie(LoadTableForCommit(*f.catalog, kTrips)).version, 1);
  const Status blocked =
      CommitTableMetadata(*f.catalog, kTrips, base, f.Appended(base, 12, "landing-2")).status();
  EXPECT_EQ(blocked.code(), StatusCode::kConflict);
  EXPECT_THAT(blocked.message(), HasSubstr("v2.metadata.json"));
}

TEST(TableCommit, CreateRegistersAFirstVersionLeftByADeadCreate) {
  CommitFixture f;
  const TableMetadata first = NewTableIn(f.dir);
  ValueOrDie(WriteMetadataFile(first, 1));  // ... and died before registering the table
  const VersionedMetadata created =
      ValueOrDie(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)));
  EXPECT_EQ(created.metadata.table_uuid, first.table_uuid);
  EXPECT_EQ(ValueOrDie(f.catalog->LoadTable(kTrips)), created.location);
  EXPECT_EQ(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)).status().code(),
            StatusCode::kConflict);
}

TEST(TableCommit, ASwapLostToAnotherToolRemovesOurFile) {
  CommitFixture f;
  const VersionedMetadata created =
      ValueOrDie(CreateTableWithMetadata(*f.catalog, kTrips, NewTableIn(f.dir)));
  // Another Iceberg tool commits with its own file naming.
  TableMetadata theirs = f.Appended(created, 21, "theirs");
  const std::string their_path = f.dir.Write("rides/trips/metadata/00002-c0ffee.metadata.json",
                                             ValueOrDie(TableMetadataToJson(theirs)));
  ExpectOk(f.catalog->CompareAndSwap(kTrips, created.location, FileUri(their_path)));

  const Status lost =
      CommitTableMetadata(*f.catalog, kTrips, created, f.Appended(created, 11, "ours")).status();
  EXPECT_EQ(lost.code(), StatusCode::kConflict);
  EXPECT_FALSE(fs::exists(f.dir.Sub("rides/trips/metadata/v2.metadata.json")));

  // From their base (not named v{N}) the next version continues after the highest v{N}.
  const VersionedMetadata base = ValueOrDie(LoadTableForCommit(*f.catalog, kTrips));
  EXPECT_EQ(base.version, 0);
  EXPECT_EQ(ValueOrDie(CommitTableMetadata(*f.catalog, kTrips, base, f.Appended(base, 11, "ours")))
                .version,
            2);
}

// ----- Catalog: PostgreSQL -----------------------------------------------------------------------

class PostgresCatalog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = PostgresServer::Start({}, &why_not_).release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) FAIL() << why_not_;
  }

  // Each test its own catalog_name: the tests share one database.
  static CatalogOptions Options(const std::string& catalog_name) {
    CatalogOptions options;
    options.catalog_name = catalog_name;
    options.uri = server_->uri();
    return options;
  }

  static PostgresServer* server_;
  static std::string why_not_;
};
PostgresServer* PostgresCatalog::server_ = nullptr;
std::string PostgresCatalog::why_not_;

TEST_F(PostgresCatalog, TablesAreCreatedLoadedListedAndSwapped) {
  auto catalog = OpenOrDie(Options("basic"));
  EXPECT_THAT(catalog->description(), HasSubstr("PostgreSQL catalog skippr@127.0.0.1:"));
  ExpectOk(catalog->CreateNamespace("rides"));
  ExpectOk(catalog->CreateNamespace("rides"));
  EXPECT_EQ(catalog->CreateTable({"nobody", "t"}, "file:///a").code(), StatusCode::kNotFound);
  ExpectOk(catalog->CreateTable(kTrips, "file:///t/v1.metadata.json"));
  EXPECT_EQ(catalog->CreateTable(kTrips, "file:///t/v1.metadata.json").code(),
            StatusCode::kConflict);
  ExpectOk(catalog->CreateTable({"rides", "stations"}, "file:///s/v1.metadata.json"));
  EXPECT_THAT(ValueOrDie(catalog->ListTables("rides")), ElementsAre("stations", "trips"));
  ExpectOk(
      catalog->CompareAndSwap(kTrips, "file:///t/v1.metadata.json", "file:///t/v2.metadata.json"));
  EXPECT_EQ(ValueOrDie(catalog->LoadTable(kTrips)), "file:///t/v2.metadata.json");
  EXPECT_EQ(catalog->CompareAndSwap({"rides", "nope"}, "file:///a", "file:///b").code(),
            StatusCode::kNotFound);
  // A second open finds the tables there and changes nothing.
  EXPECT_EQ(ValueOrDie(OpenOrDie(Options("basic"))->LoadTable(kTrips)),
            "file:///t/v2.metadata.json");
}

TEST_F(PostgresCatalog, RacingSwapsFromTwoConnectionsHaveExactlyOneWinnerEachRound) {
  auto first = OpenOrDie(Options("race"));
  auto second = OpenOrDie(Options("race"));
  ExpectOneWinnerPerRoundOfRacingSwaps(*first, *second);
}

// ----- Catalog: DynamoDB -------------------------------------------------------------------------

class DynamoCatalog : public ServerSuite<DynamoCatalog, DynamoServer> {
 public:
  static std::unique_ptr<DynamoServer> StartServer(std::string* why_not) {
    return DynamoServer::Start(why_not);
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    environment_ = MapEnvironment(server_->ClientEnvironment());
  }

  // Each test its own table; `warehouse` tells catalogs sharing one apart.
  CatalogOptions Options(const std::string& table, const std::string& warehouse = "s3://b/wh") {
    CatalogOptions options;
    options.warehouse = warehouse;
    options.dynamodb_table = table;
    options.environment = &environment_;
    return options;
  }

  MapEnvironment environment_;
};

TEST_F(DynamoCatalog, TablesAreCreatedLoadedListedAndSwapped) {
  auto catalog = OpenOrDie(Options("basic"));
  EXPECT_THAT(catalog->description(), HasSubstr("DynamoDB catalog table 'basic'"));
  ExpectOk(catalog->CreateNamespace("rides"));
  ExpectOk(catalog->CreateNamespace("rides"));
  EXPECT_EQ(catalog->CreateTable({"nobody", "t"}, "s3://b/a").code(), StatusCode::kNotFound);
  ExpectOk(catalog->CreateTable(kTrips, "s3://b/t/v1.metadata.json"));
  const Status twice = catalog->CreateTable(kTrips, "s3://b/t/v1.metadata.json");
  EXPECT_EQ(twice.code(), StatusCode::kConflict);
  EXPECT_THAT(twice.message(), HasSubstr("already exists"));
  ExpectOk(catalog->CreateTable({"rides", "stations"}, "s3://b/s/v1.metadata.json"));
  EXPECT_THAT(ValueOrDie(catalog->ListTables("rides")), ElementsAre("stations", "trips"));
  EXPECT_TRUE(ValueOrDie(catalog->ListTables("ride")).empty()) << "no prefix match";
  ExpectOk(catalog->CompareAndSwap(kTrips, "s3://b/t/v1.metadata.json",
                                   "s3://b/t/v2.metadata.json"));
  EXPECT_EQ(ValueOrDie(catalog->LoadTable(kTrips)), "s3://b/t/v2.metadata.json");
  EXPECT_EQ(catalog->LoadTable({"rides", "nope"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(catalog->CompareAndSwap({"rides", "nope"}, "s3://b/a", "s3://b/b").code(),
            StatusCode::kNotFound);
  EXPECT_EQ(catalog->CreateNamespace(std::string(256, 'n')).code(), StatusCode::kInvalidArgument);
  // A second open finds the tables there and changes nothing; another warehouse's catalog in the
  // same table sees none of them.
  EXPECT_EQ(ValueOrDie(OpenOrDie(Options("basic"))->LoadTable(kTrips)),
            "s3://b/t/v2.metadata.json");
  EXPECT_EQ(ValueOrDie(OpenOrDie(Options("basic", "s3://b/wh/"))->LoadTable(kTrips)),
            "s3://b/t/v2.metadata.json")
      << "a trailing slash names the same warehouse";
  auto other = OpenOrDie(Options("basic", "s3://other/wh"));
  EXPECT_EQ(other->LoadTable(kTrips).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ValueOrDie(other->ListTables("rides")).empty());
}

TEST_F(DynamoCatalog, AStaleSwapConflictsNamingBothLocations) {
  auto first = OpenOrDie(Options("stale"));
  auto second = OpenOrDie(Options("stale"));
  ExpectOk(first->CreateNamespace("rides"));
  ExpectOk(first->CreateTable(kTrips, "s3://t/v1.metadata.json"));
  ExpectOk(first->CompareAndSwap(kTrips, "s3://t/v1.metadata.json", "s3://t/v2-first.json"));
  const Status lost =
      second->CompareAndSwap(kTrips, "s3://t/v1.metadata.json", "s3://t/v2-second.json");
  EXPECT_EQ(lost.code(), StatusCode::kConflict);
  EXPECT_THAT(lost.message(), HasSubstr("commit conflict on table rides.trips"));
  EXPECT_THAT(lost.message(), HasSubstr("points at s3://t/v2-first.json"));
  EXPECT_THAT(lost.message(), HasSubstr("not at s3://t/v1.metadata.json"));
  EXPECT_EQ(ValueOrDie(second->LoadTable(kTrips)), "s3://t/v2-first.json");
}

TEST_F(DynamoCatalog, RacingSwapsFromTwoClientsHaveExactlyOneWinnerEachRound) {
  auto first = OpenOrDie(Options("race"));
  auto second = OpenOrDie(Options("race"));
  ExpectOneWinnerPerRoundOfRacingSwaps(*first, *second);
}

TEST_F(DynamoCatalog, AnUnreachableServerIsAnErrorNamingIt) {
  environment_.Set("AWS_ENDPOINT_URL_DYNAMODB",
                   fmt::format("http://127.0.0.1:{}", FreeLoopbackPort()));
  CatalogOptions options = Options("unreachable");
  options.dynamodb.retry.max_attempts = 1;
  Result<std::unique_ptr<Catalog>> opened = OpenCatalog(options);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(),
              HasSubstr("cannot open the DynamoDB catalog table 'unreachable'"));
  EXPECT_THAT(opened.status().message(), HasSubstr(*environment_.Get("AWS_ENDPOINT_URL_DYNAMODB")));
}

TEST_F(PostgresCatalog, TheTablesHaveTheJdbcShape) {
  if (!HasProgram("psql")) GTEST_SKIP() << "psql is missing";
  auto catalog = OpenOrDie(Options("shape"));
  ExpectOk(catalog->CreateNamespace("rides"));
  ExpectOk(catalog->CreateTable(kTrips, "file:///t/v1.metadata.json"));
  const std::string psql = fmt::format("psql -At '{}' -c ", server_->uri());
  auto [status, columns] =
      RunShell(psql +
               "\"SELECT column_name || ' ' || data_type || ' ' || "
               "coalesce(character_maximum_length, 0) || ' ' "
               "|| is_nullable FROM information_schema.columns WHERE table_name = 'iceberg_tables' "
               "ORDER BY ordinal_position\"");
  ASSERT_EQ(status, 0) << columns;
  EXPECT_EQ(columns,
            "catalog_name character varying 255 NO\n"
            "table_namespace character varying 255 NO\n"
            "table_name character varying 255 NO\n"
            "metadata_location character varying 1000 YES\n"
            "previous_metadata_location character varying 1000 YES\n"
            "iceberg_type character varying 5 YES\n");
  auto [key_status, key] =
      RunShell(psql +
               "\"SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM pg_index i "
               "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
               "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
               "WHERE i.indrelid = 'iceberg_namespace_properties'::regclass AND i.indisprimary\"");
  ASSERT_EQ(key_status, 0) << key;
  EXPECT_EQ(key, "catalog_name,namespace,property_key\n");
  EXPECT_EQ(RunShell(psql + "\"SELECT * FROM iceberg_tables WHERE catalog_name = 'shape'\"").second,
            "shape|rides|trips|file:///t/v1.metadata.json||TABLE\n");
}

}  // namespace
}  // namespace skippr::iceberg
