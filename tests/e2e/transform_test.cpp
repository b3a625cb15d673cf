// transform.ops end to end: the real binary on real files. Discover and schema show the transformed
// shape, query returns transformed rows, and a failing op fails the sync with nothing committed.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/hash.hpp"
#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"

namespace skippr::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* kShopConfig = R"y(data_sources:
  files: {File: {path: input}}
pipelines:
  shop:
    data_source: data_sources.files
    transform:
      ops:
        - rename: {name: customer}
        - drop: internal
        - cast: {amount: "decimal(10, 2)"}
        - filter: "amount > 1"
        - derive: {amount_pence: "CAST(amount * 100 AS BIGINT)"}
        - hash: [email]
        - default: {country: GB}
)y";

std::string ShopRecord(int id, const std::string& amount, const std::string& country) {
  return fmt::format(
      R"({{"id":{0},"name":"n{0}","email":"u{0}@example.com","amount":"{1}","country":{2},"internal":"secret{0}"}})"
      "\n",
      id, amount, country);
}

std::vector<std::string> SchemaFieldNames(const TempDir& dir, const std::string& pipeline) {
  ProcessResult schema = Skipprd(dir, {"schema", "-p", pipeline, "--output", "json"});
  EXPECT_EQ(schema.exit_code, 0) << schema.err;
  std::vector<std::string> names;
  if (schema.exit_code != 0) return names;
  const nlohmann::json json = nlohmann::json::parse(schema.out);
  for (const auto& field : json["namespaces"][0]["schema"]["fields"]) {
    names.push_back(field["name"].get<std::string>());
  }
  return names;
}

TEST(TransformOpsE2e, DiscoverSchemaAndQuerySeeTheTransformedRecords) {
  TempDir dir;
  dir.Write("skippr.yml", kShopConfig);
  std::string input;
  for (int id = 1; id <= 40; ++id) {
    // Every 4th record is filtered out (amount 0.50); every 5th has no country.
    input += ShopRecord(id, id % 4 == 0 ? "0.50" : fmt::format("{}.25", id),
                        id % 5 == 0 ? "null" : "\"FR\"");
  }
  dir.Write("input/orders.jsonl", input);

  ProcessResult discover = Skipprd(dir, {"discover", "-p", "shop", "--output", "text"});
  ASSERT_EQ(discover.exit_code, 0) << discover.err << discover.out;
  const std::vector<std::string> expected_fields = {"id",     "customer", "email",
                                                    "amount", "country",  "amount_pence"};
  EXPECT_EQ(SchemaFieldNames(dir, "shop"), expected_fields);

  ProcessResult sync = Skipprd(dir, {"sync", "-p", "shop", "--once", "--output", "json"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_EQ(SchemaFieldNames(dir, "shop"), expected_fields);  // sync kept the ids and the shape

  ProcessResult query =
      Skipprd(dir, {"query", "--plain", "--sql",
                    "SELECT id, customer, email, amount, amount_pence, country, typeof(amount) "
                    "FROM shop.shop ORDER BY id"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  const auto rows = nlohmann::json::parse(query.out)["rows"];
  ASSERT_EQ(rows.size(), 30u);  // 40 minus every 4th
  for (const auto& row : rows) {
    const int id = std::stoi(row[0].get<std::string>());
    EXPECT_NE(id % 4, 0);
    EXPECT_EQ(row[1], fmt::format("n{}", id));
    EXPECT_EQ(row[2], Sha256Hex(fmt::format("u{}@example.com", id)));
    EXPECT_EQ(row[3], fmt::format("{}.25", id));
    EXPECT_EQ(row[4], std::to_string(id * 100 + 25));
    EXPECT_EQ(row[5], id % 5 == 0 ? "GB" : "FR");
    EXPECT_EQ(row[6], "DECIMAL(10,2)");
  }
}

// A pipeline `shop` over the files in input/ with `op` as its only transform op.
std::string ShopWithOneOp(const std::string& op) {
  return fmt::format(R"y(data_sources:
  files: {{File: {{path: input}}}}
pipelines:
  shop:
    data_source: data_sources.files
    transform:
      ops:
        - {}
)y",
                     op);
}

// Acceptance (issue #6): a transform error fails the sync (exit 1), names the op and the record,
// and leaves the source positions and the committed rows where they were; after the config is
// fixed, the next sync resumes without loss or duplicates.
TEST(TransformOpsE2e, ABadCastFailsTheSyncAndLeavesOffsetsWhereTheyWere) {
  TempDir dir;
  dir.Write("skippr.yml", ShopWithOneOp("cast: {code: int}"));
  std::string first;
  for (int id = 1; id <= 100; ++id) first += fmt::format("{{\"id\":{0},\"code\":\"{0}\"}}\n", id);
  dir.Write("input/a.jsonl", first);
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "shop", "--once"}).exit_code, 0);
  ASSERT_THAT(QueryRow(dir, "SELECT count(*), sum(code) FROM shop.shop"),
              ElementsAre("100", "5050"));

  const auto positions = [&] {
    ProcessResult status = Skipprd(dir, {"status", "-p", "shop", "--output", "json"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    return nlohmann::json::parse(status.out)["pipelines"][0]["source_positions"];
  };
  const nlohmann::json before = positions();

  std::string second;
  for (int id = 101; id <= 150; ++id) {
    second +=
        fmt::format("{{\"id\":{},\"code\":\"{}\"}}\n", id, id == 120 ? "abc" : std::to_string(id));
  }
  dir.Write("input/b.jsonl", second);
  ProcessResult failed = Skipprd(dir, {"sync", "-p", "shop", "--once"});
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_THAT(failed.err, HasSubstr("pipelines.shop.transform.ops[0] (cast, "));
  EXPECT_THAT(failed.err, HasSubstr("b.jsonl:20 (row 20)"));
  EXPECT_THAT(failed.err, HasSubstr("'abc'"));
  EXPECT_EQ(positions(), before);
  EXPECT_THAT(QueryRow(dir, "SELECT count(*), sum(code) FROM shop.shop"),
              ElementsAre("100", "5050"));

  // Fixed: unreadable codes become NULL. The rerun reads b.jsonl from where the failure left it.
  dir.Write("skippr.yml", ShopWithOneOp("derive: {code: \"TRY_CAST(code AS INTEGER)\"}"));
  ProcessResult rerun = Skipprd(dir, {"sync", "-p", "shop", "--once"});
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_THAT(
      QueryRow(dir, "SELECT count(*), count(DISTINCT id), count(code), sum(code) FROM shop.shop"),
      ElementsAre("150", "150", "149", std::to_string(150 * 151 / 2 - 120)));
}

// The same within one pass: with a tiny buffer threshold the pass commits several batches before
// the bad one. What was committed and the positions stored agree (every committed row is counted
// in the positions, nothing beyond), and the fixed rerun ends with every row exactly once.
TEST(TransformOpsE2e, AFailureMidPassKeepsCommittedRowsAndPositionsInStep) {
  TempDir dir;
  dir.Write("skippr.yml", ShopWithOneOp("cast: {code: long}"));
  constexpr int kFiles = 6;
  constexpr int kRowsPerFile = 400;
  for (int file = 0; file < kFiles; ++file) {
    std::string text;
    for (int row = 0; row < kRowsPerFile; ++row) {
      const int id = file * kRowsPerFile + row + 1;
      const bool is_bad = file == 4 && row == 250;
      text +=
          fmt::format("{{\"id\":{},\"code\":\"{}\"}}\n", id, is_bad ? "x1" : std::to_string(id));
    }
    dir.Write(fmt::format("input/part{}.jsonl", file), text);
  }
  const std::map<std::string, std::string> small_batches = {{"BUFFER_THRESHOLD_BYTES", "4000"}};
  ProcessResult failed = Skipprd(dir, {"sync", "-p", "shop", "--once"}, small_batches);
  ASSERT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_THAT(failed.err, HasSubstr("pipelines.shop.transform.ops[0] (cast, "));
  EXPECT_THAT(failed.err, HasSubstr("part4.jsonl:251 (row 251)"));

  ProcessResult status = Skipprd(dir, {"status", "-p", "shop", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json json = nlohmann::json::parse(status.out);
  int64_t consumed = 0;
  for (const auto& [partition, position] : json["pipelines"][0]["source_positions"].items()) {
    EXPECT_THAT(partition, ::testing::Not(HasSubstr("part5")));  // never reached past the failure
    consumed += position["records_consumed"].get<int64_t>();
  }
  EXPECT_LT(consumed, 4 * kRowsPerFile + 251);
  // Submit blocks while a commit waits, so at most two commits (a few hundred rows) are lost.
  EXPECT_GT(consumed, 3 * kRowsPerFile) << "commits before the failing batch";
  const std::vector<std::string> committed =
      QueryRow(dir, "SELECT count(*), count(DISTINCT id), coalesce(max(id), 0) FROM shop.shop");
  EXPECT_EQ(committed[0], std::to_string(consumed));
  EXPECT_EQ(committed[1], std::to_string(consumed));
  EXPECT_EQ(committed[2], std::to_string(consumed));  // a prefix of the input, in file order

  dir.Write("skippr.yml", ShopWithOneOp("derive: {code: \"TRY_CAST(code AS BIGINT)\"}"));
  ProcessResult rerun = Skipprd(dir, {"sync", "-p", "shop", "--once"}, small_batches);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  const int total = kFiles * kRowsPerFile;
  EXPECT_THAT(QueryRow(dir, "SELECT count(*), count(DISTINCT id), count(code) FROM shop.shop"),
              ElementsAre(std::to_string(total), std::to_string(total), std::to_string(total - 1)));
}

// Landed to SkipprLake: the Iceberg table's schema is the ops' output, and query over the landed
// rows returns transformed values.
// An op may name a column only as the shaper would (docs/schema.md, "Names"): a derived `V`
// beside `v` used to be committed, and every query of the namespace then failed.
TEST(TransformOpsE2e, AnOpColumnThatBreaksTheNameRulesFailsTheSyncWithNothingCommitted) {
  TempDir dir;
  dir.Write("input/a.jsonl", "{\"id\":1,\"v\":2}\n");
  for (const auto& [op, message] : std::vector<std::pair<std::string, std::string>>{
           {"derive: {V: \"v + 1\"}",
            "pipelines.shop.transform.ops (namespace 'shop'): field 'V' breaks the name rules "
            "('v' is already a field (names are compared ignoring case)); name it 'V_2' or "
            "another that does not (docs/schema.md, \"Names\"); change the op in skippr.yml"},
           {"rename: {v: __skippr_file}",
            "field '__skippr_file' breaks the name rules (names starting with '__skippr_' are "
            "reserved); name it 'skippr_file'"}}) {
    dir.Write("skippr.yml", ShopWithOneOp(op));
    ProcessResult sync = Skipprd(dir, {"sync", "-p", "shop", "--once"});
    EXPECT_EQ(sync.exit_code, 1) << op;
    EXPECT_THAT(sync.err, HasSubstr(message)) << op;
    ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql", "SELECT 1"});
    EXPECT_EQ(query.exit_code, 0) << "no table was committed that query could not define\n"
                                  << query.err;
  }
}

TEST(TransformOpsE2e, TheLakeLandsTheTransformedShape) {
  TempDir dir;
  dir.Write("skippr.yml", fmt::format(R"y(data_sources:
  sample: {{Sample: {{rows: 20000, seed: 7}}}}
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{}/warehouse
pipelines:
  rides:
    data_source: data_sources.sample
    data_sink: data_sinks.lake
    transform:
      ops:
        - derive: {{amount_x2: "amount * 2"}}
        - drop: [rider_type]
        - hash: [ride_id]
)y",
                                      dir.path()));
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "rides", "--once"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  ProcessResult status = Skipprd(dir, {"status", "-p", "rides", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(nlohmann::json::parse(status.out)["pipelines"][0]["live_rows"], 0);  // all landed
  EXPECT_THAT(QueryRow(dir,
                       "SELECT count(*), sum(amount_x2) = 2 * sum(amount), "
                       "min(length(ride_id)), max(length(ride_id)) FROM rides.rides"),
              ElementsAre("20000", "true", "64", "64"));
  const std::vector<std::string> fields = SchemaFieldNames(dir, "rides");
  EXPECT_EQ(std::count(fields.begin(), fields.end(), "rider_type"), 0);
  EXPECT_EQ(fields.back(), "amount_x2");
}

}  // namespace
}  // namespace skippr::testing
