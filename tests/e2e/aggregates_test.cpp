// transform.aggregates end to end: the real binary syncs the seed's `invoices` example (a File
// source) and the Sample source into SkipprLake; `aggregates show` equals a SQL GROUP BY over
// `query`, `aggregates verify` exits 0, and a changed measure rebuilds the aggregate.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e/skipprd_runner.hpp"

namespace skippr::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Config(const TempDir& dir, const std::string& source_yaml, const std::string& pipeline,
                   const std::string& aggregates_yaml, const std::string& sink_settings = "") {
  return fmt::format(R"(data_sources:
  source: {}
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{}/warehouse
      table_namespace: landed{}
pipelines:
  {}:
    data_source: data_sources.source
    data_sink: data_sinks.lake
    transform:
      aggregates:
{}
)",
                     source_yaml, dir.path(), sink_settings, pipeline, aggregates_yaml);
}

constexpr const char* kInvoiceAggregate = R"(        - id: customer_invoice_totals
          key_fields: [customer_id]
          measures:
            invoice_total: { sum: amount }
            invoice_count: { count: "*" })";

void WriteInvoices(const TempDir& dir, int64_t rows) {
  std::string text;
  for (int64_t i = 0; i < rows; ++i) {
    // amount in cents as an integer: the sum is exact.
    text += fmt::format(R"({{"invoice_id": {}, "customer_id": {}, "amount": {}}})", i, i % 13,
                        (i * 7919) % 100000) +
            "\n";
  }
  dir.Write("input/invoices.jsonl", text);
}

// `query --plain` rows as arrays of text.
nlohmann::json QueryPlain(const TempDir& dir, const std::string& sql) {
  ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql", sql});
  EXPECT_EQ(query.exit_code, 0) << query.err;
  return nlohmann::json::parse(query.out)["rows"];
}

// `aggregates show` of customer_invoice_totals beside the same GROUP BY over `query`, group by
// group; returns the number of groups.
size_t ExpectInvoiceTotalsEqualAGroupBy(const TempDir& dir) {
  ProcessResult show = Skipprd(dir, {"aggregates", "show", "-p", "invoices", "--id",
                                     "customer_invoice_totals", "--output", "json"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  if (show.exit_code != 0) return 0;
  const nlohmann::json groups = nlohmann::json::parse(show.out);
  const nlohmann::json sql = QueryPlain(
      dir,
      "SELECT CAST(customer_id AS VARCHAR), CAST(count(*) AS VARCHAR), CAST(sum(amount) AS "
      "VARCHAR) FROM invoices.invoices GROUP BY customer_id ORDER BY customer_id");
  EXPECT_EQ(groups.size(), sql.size());
  for (size_t i = 0; i < sql.size() && i < groups.size(); ++i) {
    EXPECT_EQ(groups[i]["customer_id"].get<std::string>(), sql[i][0].get<std::string>());
    EXPECT_EQ(groups[i]["invoice_count"].dump(), sql[i][1].get<std::string>());
    EXPECT_EQ(groups[i]["invoice_total"].get<std::string>(), sql[i][2].get<std::string>());
  }
  return groups.size();
}

TEST(AggregatesE2e, InvoicesFromAFileEqualAGroupByOverQuery) {
  TempDir dir;
  WriteInvoices(dir, 20'000);
  dir.Write("skippr.yml", Config(dir, fmt::format("\n    File:\n      path: {}/input", dir.path()),
                                 "invoices", kInvoiceAggregate));
  // Small segments: several commits, landings and reclaims while the processor runs.
  ProcessResult sync =
      Skipprd(dir, {"sync", "-p", "invoices", "--once"}, {{"BUFFER_THRESHOLD_BYTES", "65536"}});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;

  EXPECT_EQ(ExpectInvoiceTotalsEqualAGroupBy(dir), 13u);
  ProcessResult verify = Skipprd(dir, {"aggregates", "verify", "-p", "invoices"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_THAT(verify.out, HasSubstr("every measure equals the SQL recompute"));

  // The WAL was reclaimed behind the processor; status shows no lag.
  ProcessResult status = Skipprd(dir, {"status", "-p", "invoices", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json pipeline = nlohmann::json::parse(status.out)["pipelines"][0];
  EXPECT_EQ(pipeline["live_segments"], 0);
  EXPECT_EQ(pipeline["aggregates"][0]["lag_rows"], 0);

  ProcessResult filtered = Skipprd(
      dir, {"aggregates", "show", "-p", "invoices", "--key", "customer_id=3", "--output", "csv"});
  ASSERT_EQ(filtered.exit_code, 0) << filtered.err;
  EXPECT_THAT(filtered.out, HasSubstr("customer_id,invoice_count,invoice_total\n3,"));

  ProcessResult list = Skipprd(dir, {"aggregates", "list", "--output", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("customer_invoice_totals"));
}

// verify tells every group the stored aggregate and the data disagree on. The landed files are
// rewritten behind the aggregate's back: customer 3 becomes 99 (a stored group without rows, and
// a group the store lacks), and each of customer 5's amounts grows by 1 (a measure that differs).
TEST(AggregatesE2e, VerifyReportsEveryGroupTheStoreAndTheDataDisagreeOn) {
  TempDir dir;
  WriteInvoices(dir, 2'000);
  dir.Write("skippr.yml", Config(dir, fmt::format("\n    File:\n      path: {}/input", dir.path()),
                                 "invoices", kInvoiceAggregate));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "invoices", "--once"}).exit_code, 0);
  const nlohmann::json before =
      QueryPlain(dir,
                 "SELECT CAST(count(*) AS VARCHAR), CAST(sum(amount) + count(*) AS VARCHAR) FROM "
                 "invoices.invoices WHERE customer_id = 5");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.Sub("warehouse/landed/invoices/data"))) {
    const std::string file = entry.path().string();
    ProcessResult rewrite = Skipprd(
        dir, {"query", "--allow-file-access", "--sql",
              fmt::format("COPY (SELECT invoice_id, CASE customer_id WHEN 3 THEN 99 ELSE "
                          "customer_id END AS customer_id, amount + CASE customer_id WHEN 5 THEN 1 "
                          "ELSE 0 END AS amount FROM read_parquet('{0}')) TO '{0}.new' (FORMAT "
                          "parquet)",
                          file)});
    ASSERT_EQ(rewrite.exit_code, 0) << rewrite.err;
    fs::rename(file + ".new", file);
    ++files;
  }
  ASSERT_GT(files, 0);

  ProcessResult verify = Skipprd(dir, {"aggregates", "verify", "-p", "invoices"});
  EXPECT_EQ(verify.exit_code, 1) << verify.out << verify.err;
  EXPECT_THAT(verify.out, HasSubstr("invoices.customer_invoice_totals: group (3) is stored but SQL "
                                    "has no rows for it"));
  EXPECT_THAT(verify.out,
              HasSubstr("invoices.customer_invoice_totals: group (99) is missing (SQL: "));
  EXPECT_THAT(verify.out,
              HasSubstr(fmt::format("group (5) measure invoice_total: stored {}, SQL {}",
                                    std::stoll(before[0][1].get<std::string>()) -
                                        std::stoll(before[0][0].get<std::string>()),
                                    before[0][1].get<std::string>())));
  EXPECT_THAT(verify.out, HasSubstr("invoices.customer_invoice_totals: 3 difference(s)"));
}

TEST(AggregatesE2e, SampleRidesEqualAGroupByOverQuery) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, "\n    Sample:\n      rows: 30000", "bikehire",
                                 R"(        - id: rides_by_bike
          key_fields: [bike_id]
          measures:
            revenue: { sum: amount }
            distance: { sum: distance_km }
            rides: { count: "*" }
            rated: { count: rating }
        - id: rides_by_type
          key_fields: [rider_type, is_electric]
          measures:
            revenue: { sum: amount }
            seconds: { sum: duration_seconds })"));
  ProcessResult sync =
      Skipprd(dir, {"sync", "-p", "bikehire", "--once"}, {{"BUFFER_THRESHOLD_BYTES", "262144"}});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  ProcessResult verify = Skipprd(dir, {"aggregates", "verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_THAT(verify.out, HasSubstr("bikehire.rides_by_bike"));
  EXPECT_THAT(verify.out, HasSubstr("bikehire.rides_by_type: 4 group(s)"));

  const nlohmann::json sql = QueryPlain(
      dir,
      "SELECT CAST(sum(amount) AS VARCHAR) FROM bikehire.bikehire WHERE rider_type = 'member' AND "
      "is_electric");
  ProcessResult show =
      Skipprd(dir, {"aggregates", "show", "-p", "bikehire", "--id", "rides_by_type", "--key",
                    "rider_type=member", "--key", "is_electric=true", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const nlohmann::json groups = nlohmann::json::parse(show.out);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["revenue"].get<std::string>(), sql[0][0].get<std::string>());
}

// The seed's example verbatim (pipeline `invoices`, aggregate `customer_invoice_totals`) over the
// Sample source: a transform.ops rename gives the rides a `customer_id`, and the aggregate over the
// transformed rows equals a GROUP BY over `query`.
TEST(AggregatesE2e, TheSeedExampleOverTheSampleSourceEqualsAGroupByOverQuery) {
  TempDir dir;
  dir.Write("skippr.yml", fmt::format(R"(data_sources:
  sample:
    Sample: {{rows: 20000}}
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{}/warehouse
pipelines:
  invoices:
    data_source: data_sources.sample
    data_sink: data_sinks.lake
    transform:
      ops:
        - rename: {{bike_id: customer_id}}
      aggregates:
{}
)",
                                      dir.path(), kInvoiceAggregate));
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "invoices", "--once"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_GT(ExpectInvoiceTotalsEqualAGroupBy(dir), 1u);
  ProcessResult verify = Skipprd(dir, {"aggregates", "verify", "-p", "invoices"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST(AggregatesE2e, ChangingAMeasureRebuildsAndVerifyStillHolds) {
  TempDir dir;
  WriteInvoices(dir, 5'000);
  const std::string source = fmt::format("\n    File:\n      path: {}/input", dir.path());
  // Without a sink the WAL is the dataset and is never reclaimed: the rebuild replays it all.
  const auto config = [&](const std::string& aggregates) {
    std::string text = Config(dir, source, "invoices", aggregates);
    const size_t sink = text.find("    data_sink: data_sinks.lake\n");
    return text.erase(sink, std::string("    data_sink: data_sinks.lake\n").size());
  };
  dir.Write("skippr.yml", config(kInvoiceAggregate));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "invoices", "--once"}).exit_code, 0);
  dir.Write("skippr.yml", config(std::string(kInvoiceAggregate) +
                                 "\n            largest_count: { count: amount }"));
  ProcessResult stale = Skipprd(dir, {"aggregates", "verify"});
  EXPECT_EQ(stale.exit_code, 1);
  EXPECT_THAT(stale.out, HasSubstr("the next sync rebuilds it"));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "invoices", "--once"}).exit_code, 0);
  ProcessResult verify = Skipprd(dir, {"aggregates", "verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// With a SkipprLake sink the WAL is reclaimed behind the landing: a changed measure rebuilds from
// the landed table plus the live WAL, and still equals the SQL recompute — also when more rows
// arrive in the same pass and when the rebuild is killed before its baseline commits.
TEST(AggregatesE2e, ChangingAMeasureAfterReclaimRebuildsFromTheLandedTable) {
  TempDir dir;
  WriteInvoices(dir, 5'000);
  const std::string source = fmt::format("\n    File:\n      path: {}/input", dir.path());
  // Landings of about 1 MiB, so the second pass lands while it is still reading.
  const std::string small_landings = "\n      target_file_size_bytes: 1048576";
  dir.Write("skippr.yml", Config(dir, source, "invoices", kInvoiceAggregate, small_landings));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "invoices", "--once"}).exit_code, 0);
  ProcessResult status = Skipprd(dir, {"status", "-p", "invoices", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(nlohmann::json::parse(status.out)["pipelines"][0]["live_segments"], 0)
      << "the landing reclaimed the WAL, so the rebuild cannot replay it";

  constexpr int64_t kMoreRows = 40'000;
  std::string more;
  for (int64_t i = 5'000; i < 5'000 + kMoreRows; ++i) {
    more += fmt::format(R"({{"invoice_id": {}, "customer_id": {}, "amount": {}, "note": "{}"}})",
                        i, i % 17, i % 1000, std::string(40, 'n')) +
            "\n";
  }
  dir.Write("input/more.jsonl", more);
  // The processor is held, so a landing during this pass cannot reclaim its segments: their
  // slices are in the table and still in the live WAL when the run dies just after recording it.
  dir.Write("hold", "");
  ProcessResult landed = Skipprd(dir, {"sync", "-p", "invoices", "--once"},
                                 {{"SKIPPR_AGGREGATE_HOLD_FILE", dir.path() + "/hold"},
                                  {"BUFFER_THRESHOLD_BYTES", "65536"},
                                  {"SKIPPR_CRASH_POINT", "landing.after_store_commit"}});
  EXPECT_NE(landed.exit_code, 0);
  fs::remove(dir.path() + "/hold");
  status = Skipprd(dir, {"status", "-p", "invoices", "--output", "json"});
  EXPECT_GT(nlohmann::json::parse(status.out)["pipelines"][0]["live_segments"], 0);

  dir.Write("skippr.yml", Config(dir, source, "invoices",
                                 std::string(kInvoiceAggregate) +
                                     "\n            largest_count: { count: amount }",
                                 small_landings));
  // Killed after the reset, before the baseline commits: the next run starts the rebuild over.
  ProcessResult killed = Skipprd(dir, {"sync", "-p", "invoices", "--once"},
                                 {{"SKIPPR_CRASH_POINT", "aggregates.before_baseline_commit"}});
  EXPECT_NE(killed.exit_code, 0);
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "invoices", "--once"}).exit_code, 0);
  ProcessResult verify = Skipprd(dir, {"aggregates", "verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const nlohmann::json sql =
      QueryPlain(dir, "SELECT CAST(count(*) AS VARCHAR) FROM invoices.invoices");
  EXPECT_EQ(sql[0][0].get<std::string>(), std::to_string(5'000 + kMoreRows));
  ProcessResult show = Skipprd(dir, {"aggregates", "show", "-p", "invoices", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  int64_t invoices = 0;
  for (const nlohmann::json& group : nlohmann::json::parse(show.out)) {
    invoices += group["invoice_count"].get<int64_t>();
  }
  EXPECT_EQ(invoices, 5'000 + kMoreRows);
}

TEST(AggregatesE2e, ASyncKilledAtEachProcessorCrashPointResumesAndVerifies) {
  for (const std::string point :
       {"aggregates.before_commit", "aggregates.after_commit", "landing.before_reclaim_commit"}) {
    SCOPED_TRACE(point);
    TempDir dir;
    WriteInvoices(dir, 60'000);
    // 1 MiB landings while ingest runs, and a processor held back by a delay: the lake lands
    // segments it has not passed, which a later round reclaims.
    dir.Write("skippr.yml",
              Config(dir, fmt::format("\n    File:\n      path: {}/input", dir.path()), "invoices",
                     kInvoiceAggregate, "\n      target_file_size_bytes: 1048576"));
    ProcessResult killed = Skipprd(dir, {"sync", "-p", "invoices", "--once"},
                                   {{"BUFFER_THRESHOLD_BYTES", "65536"},
                                    {"SKIPPR_AGGREGATE_DELAY_MS", "20"},
                                    {"SKIPPR_CRASH_POINT", point}});
    // The reclaim point is reached only when a landing round overtook the processor (likely, not
    // certain); the processor's points always are.
    if (point.starts_with("aggregates.") || killed.exit_code != 0) {
      EXPECT_EQ(killed.exit_code, 128 + 9) << killed.err;
    }
    ProcessResult sync = Skipprd(dir, {"sync", "-p", "invoices", "--once"});
    ASSERT_EQ(sync.exit_code, 0) << sync.err;
    ProcessResult verify = Skipprd(dir, {"aggregates", "verify"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
    ProcessResult status = Skipprd(dir, {"status", "-p", "invoices", "--output", "json"});
    const nlohmann::json pipeline = nlohmann::json::parse(status.out)["pipelines"][0];
    EXPECT_EQ(pipeline["live_segments"], 0);
  }
}

}  // namespace
}  // namespace skippr::testing
