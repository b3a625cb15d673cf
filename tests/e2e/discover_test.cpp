// `skipprd discover`, `schema` and `metadata` end to end: the real binary over the sample source, a
// directory mixing JSON lines, CSV, Parquet and compressed files, and a directory of bad input.
#include <duckdb.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e/process.hpp"
#include "store/store.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

ProcessResult Skipprd(const TempDir& dir, const std::vector<std::string>& args) {
  ProcessOptions options;
  options.working_dir = dir.path();
  options.unset_env = {"SKIPPR_CONFIG_FILE", "PIPELINE_NAME", "TRANSFORM_NAMESPACE_FIELDS",
                       "TRANSFORM_FLATTEN_EVENTS"};
  options.set_env = {{"DATA_DIR", dir.path() + "/data"}};
  return RunProcess(SKIPPRD_BINARY, args, options);
}

std::vector<Json> Events(const std::string& output) {
  std::vector<Json> events;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty()) events.push_back(Json::parse(line));
  }
  return events;
}

std::vector<Json> EventsNamed(const std::vector<Json>& events, const std::string& name) {
  std::vector<Json> matching;
  for (const Json& event : events) {
    if (event["event"] == name) matching.push_back(event);
  }
  return matching;
}

// name → "type" for a namespace's top-level fields in `skipprd schema --output json`.
std::map<std::string, std::string> TopLevelTypes(const Json& ns) {
  std::map<std::string, std::string> types;
  for (const Json& field : ns["schema"]["fields"]) {
    types[field["name"]] = field["type"].is_string() ? field["type"].get<std::string>()
                                                     : field["type"]["type"].get<std::string>();
  }
  return types;
}

Json SchemaJson(const TempDir& dir, const std::string& pipeline) {
  ProcessResult result = Skipprd(dir, {"schema", "-p", pipeline, "--output", "json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return Json::parse(result.out);
}

const Json& NamespaceOf(const Json& schema, const std::string& name) {
  for (const Json& ns : schema["namespaces"]) {
    if (ns["namespace"] == name) return ns;
  }
  static const Json kMissing;
  ADD_FAILURE() << "namespace " << name << " missing in " << schema.dump();
  return kMissing;
}

// ----- the sample source ----------------------------------------------------------------------

const char* kSampleConfig = R"(data_sources:
  sample:
    Sample: {rows: 5000, seed: 7}
pipelines:
  bikehire:
    data_source: data_sources.sample
)";

TEST(DiscoverSample, GoldenSchemaAndEvents) {
  TempDir dir;
  dir.Write("skippr.yml", kSampleConfig);
  ProcessResult result = Skipprd(dir, {"discover", "--pipeline", "bikehire", "--output", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<Json> events = Events(result.out);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front()["event"], "discover_start");
  EXPECT_EQ(events.front()["pipeline"], "bikehire");
  for (const Json& event : events) {
    EXPECT_TRUE(event.contains("run_id") && event.contains("timestamp")) << event.dump();
    EXPECT_EQ(event["phase"], "discover");
  }
  const auto discovered = EventsNamed(events, "namespace_discovered");
  ASSERT_EQ(discovered.size(), 1u);
  EXPECT_EQ(discovered[0]["namespace"], "bikehire");
  EXPECT_EQ(discovered[0]["field_count"], 20);
  ASSERT_EQ(EventsNamed(events, "schema_evolved").size(), 1u);
  const Json complete = events.back();
  EXPECT_EQ(complete["event"], "discover_complete");
  EXPECT_EQ(complete["ok"], true);
  EXPECT_EQ(complete["records"], 5000);
  EXPECT_EQ(complete["deadletters"], 0);
  EXPECT_EQ(complete["total_fields"], 20);

  const Json schema = SchemaJson(dir, "bikehire");
  const Json& ns = NamespaceOf(schema, "bikehire");
  EXPECT_EQ(ns["table"], "bikehire.bikehire");
  EXPECT_EQ(ns["schema_id"], 1);
  EXPECT_EQ(TopLevelTypes(ns),
            (std::map<std::string, std::string>{{"ride_id", "long"},
                                                {"bike_id", "int"},
                                                {"rider_type", "string"},
                                                {"is_electric", "boolean"},
                                                {"start_station", "struct"},
                                                {"end_station", "struct"},
                                                {"started_at", "timestamp"},
                                                {"ended_at", "timestamp"},
                                                {"duration_seconds", "int"},
                                                {"distance_km", "double"},
                                                {"amount", "decimal(10,2)"},
                                                {"rating", "int"}}));
  const Json& station = ns["schema"]["fields"][4];
  EXPECT_EQ(station["name"], "start_station");
  EXPECT_EQ(station["id"], 5);
  EXPECT_EQ(station["type"]["fields"].size(), 4u);
  EXPECT_EQ(station["type"]["fields"][1]["name"], "name");
  EXPECT_EQ(station["type"]["fields"][1]["id"], 7);
  EXPECT_EQ(station["type"]["fields"][1]["type"], "string");

  // Re-running finds nothing new: no evolution, the same ids.
  ProcessResult again = Skipprd(dir, {"discover", "-p", "bikehire", "--output", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(EventsNamed(Events(again.out), "schema_evolved").empty());
  EXPECT_EQ(SchemaJson(dir, "bikehire"), schema);
}

TEST(DiscoverSample, TextOutputFollowsTheReference) {
  TempDir dir;
  dir.Write("skippr.yml", kSampleConfig);
  ProcessResult result = Skipprd(dir, {"discover", "-p", "bikehire", "--output", "text"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("Discover started: pipeline=bikehire\n[start] Discovering\n"
                                    "[done]  Discovering\nNamespace discovered: bikehire (20 fields)\n"
                                    "Schema evolved: bikehire\n  added ride_id (long)\n"));
  EXPECT_THAT(result.out, HasSubstr("Discover complete: pipeline=bikehire namespaces=1 fields=20 elapsed="));
  ProcessResult schema = Skipprd(dir, {"schema", "-p", "bikehire"});
  EXPECT_EQ(schema.exit_code, 0);
  EXPECT_THAT(schema.out, HasSubstr("Namespace bikehire → table bikehire.bikehire (schema 1, 20 fields)\n"
                                    "  ride_id: long (id 1)\n"));
  EXPECT_THAT(schema.out, HasSubstr("  start_station: struct (id 5)\n    id: int (id 6)\n"));
}

TEST(DiscoverSample, WithoutPipelineDoesNothing) {
  TempDir dir;
  dir.Write("skippr.yml", kSampleConfig);
  ProcessResult result = Skipprd(dir, {"discover"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.err, HasSubstr("nothing to discover"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/data/bikehire"));
}

TEST(DiscoverSample, UnknownPipelineAndMissingSchemaAreExplained) {
  TempDir dir;
  dir.Write("skippr.yml", kSampleConfig);
  ProcessResult unknown = Skipprd(dir, {"discover", "-p", "nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("pipeline 'nope' is not defined in skippr.yml (defined: bikehire)"));
  ProcessResult no_schema = Skipprd(dir, {"schema", "-p", "bikehire"});
  EXPECT_EQ(no_schema.exit_code, 1);
  EXPECT_THAT(no_schema.err, HasSubstr("run `skipprd discover --pipeline bikehire`"));
  EXPECT_EQ(Skipprd(dir, {"schema"}).exit_code, 2);  // --pipeline is required
}

TEST(DiscoverSample, SecondWriterIsRefused) {
  TempDir dir;
  dir.Write("skippr.yml", kSampleConfig);
  Result<store::WriterLease> held = store::WriterLease::Acquire(dir.path() + "/data/bikehire", "bikehire");
  ASSERT_TRUE(held.ok()) << held.status().message();
  ProcessResult result = Skipprd(dir, {"discover", "-p", "bikehire"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("discover failed: pipeline writer lease unavailable"));
}

// ----- a directory of mixed formats -----------------------------------------------------------

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(file);
}

void WriteParquet(const std::string& path, const std::string& select_sql) {
  duckdb_database database;
  duckdb_connection connection;
  ASSERT_EQ(duckdb_open(nullptr, &database), DuckDBSuccess);
  ASSERT_EQ(duckdb_connect(database, &connection), DuckDBSuccess);
  duckdb_result result;
  const std::string sql = "COPY (" + select_sql + ") TO '" + path + "' (FORMAT parquet)";
  EXPECT_EQ(duckdb_query(connection, sql.c_str(), &result), DuckDBSuccess) << duckdb_result_error(&result);
  duckdb_destroy_result(&result);
  duckdb_disconnect(&connection);
  duckdb_close(&database);
}

TEST(DiscoverFiles, MixedDirectoryGoldenSchema) {
  TempDir dir;
  dir.Write("skippr.yml", R"(data_sources:
  files:
    File: {path: input}
pipelines:
  shop:
    data_source: data_sources.files
    transform:
      namespace_fields: [kind]
)");
  // JSON lines: `code` is an integer for the first half of the file and text after it.
  std::string jsonl;
  for (int i = 1; i <= 100; ++i) {
    const std::string code = i <= 50 ? std::to_string(i) : "\"X" + std::to_string(i) + "\"";
    jsonl += "{\"kind\":\"order\",\"order_id\":" + std::to_string(i) + ",\"code\":" + code +
             ",\"customer\":{\"id\":" + std::to_string(i % 7) + ",\"tier\":\"gold\"},\"tags\":[\"a\",\"b\"]}\n";
  }
  dir.Write("input/a_orders.jsonl", jsonl);
  // CSV: the same kind, with a date and a decimal amount.
  std::string csv = "kind,order_id,ordered_on,amount\n";
  for (int i = 101; i <= 150; ++i) csv += "order," + std::to_string(i) + ",2024-03-0" + std::to_string(1 + i % 9) + ",12.5\n";
  dir.Write("input/b_orders.csv", csv);
  // Parquet: another kind, with declared types.
  std::filesystem::create_directories(dir.path() + "/input/c");
  WriteParquet(dir.path() + "/input/c/payments.parquet",
               "SELECT 'payment' AS kind, i::BIGINT AS payment_id, (i * 1.25)::DECIMAL(10,2) AS paid, "
               "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (i) MINUTE AS paid_at FROM range(1, 41) t(i)");
  // gzip'd JSON lines, where `coupon` appears only in the last record.
  std::string late;
  for (int i = 1; i <= 30; ++i) {
    late += "{\"kind\":\"payment\",\"payment_id\":" + std::to_string(1000 + i) +
            (i == 30 ? ",\"coupon\":\"SPRING\"" : "") + "}\n";
  }
  WriteGzip(dir.path() + "/input/d_late.jsonl.gz", late);

  ProcessResult result = Skipprd(dir, {"discover", "-p", "shop", "--output", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  const Json complete = Events(result.out).back();
  EXPECT_EQ(complete["records"], 220);
  EXPECT_EQ(complete["deadletters"], 0);
  EXPECT_EQ(complete["namespaces_discovered"], 2);

  const Json schema = SchemaJson(dir, "shop");
  EXPECT_EQ(TopLevelTypes(NamespaceOf(schema, "order")),
            (std::map<std::string, std::string>{{"kind", "string"},
                                                {"order_id", "int"},
                                                {"code", "int"},
                                                {"code_string", "string"},
                                                {"customer", "struct"},
                                                {"tags", "list"},
                                                {"ordered_on", "date"},
                                                {"amount", "double"}}));
  EXPECT_EQ(TopLevelTypes(NamespaceOf(schema, "payment")),
            (std::map<std::string, std::string>{{"kind", "string"},
                                                {"payment_id", "long"},
                                                {"paid", "decimal(10,2)"},
                                                {"paid_at", "timestamp"},
                                                {"coupon", "string"}}));
  // Field ids follow first appearance and are never shared within a table.
  const Json& order_fields = NamespaceOf(schema, "order")["schema"]["fields"];
  EXPECT_EQ(order_fields[0]["name"], "kind");
  EXPECT_EQ(order_fields[0]["id"], 1);
  EXPECT_EQ(order_fields[2]["name"], "code");
  EXPECT_EQ(order_fields[2]["id"], 3);
  EXPECT_EQ(NamespaceOf(schema, "payment")["schema"]["fields"].back()["name"], "coupon");
}

// ----- bad input ------------------------------------------------------------------------------

TEST(DiscoverFiles, BadInputBecomesDeadlettersNamingFileLineAndReason) {
  TempDir dir;
  dir.Write("skippr.yml", R"(data_sources:
  files:
    File: {path: input}
pipelines:
  messy:
    data_source: data_sources.files
)");
  dir.Write("input/broken.jsonl", "{\"a\":1}\n{\"a\":2,\n{\"a\":3}\n");
  dir.Write("input/ragged.csv", "a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n");
  dir.Write("input/bad_utf8.jsonl", "{\"a\":4}\n{\"a\":\"\xff\xfe\"}\n");
  dir.Write("input/bad_utf8.csv", "a,b,c\n13,\xc3\x28,14\n");
  dir.Write("input/empty.jsonl", "");
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 7919) % 256));
  dir.Write("input/garbage.bin", garbage);
  const std::string huge = "{\"blob\":\"" + std::string(50 << 20, 'x') + "\"}\n{\"a\":5}\n";
  dir.Write("input/huge.jsonl", huge);

  ProcessResult result = Skipprd(dir, {"discover", "-p", "messy", "--output", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<Json> events = Events(result.out);
  const Json complete = events.back();
  EXPECT_EQ(complete["ok"], true);
  std::map<std::string, std::vector<std::string>> reasons;  // "file:line" → reasons
  for (const Json& deadletter : EventsNamed(events, "deadletter")) {
    const std::string file = std::filesystem::path(deadletter["source"].get<std::string>()).filename();
    reasons[file + ":" + std::to_string(deadletter["line"].get<int>())].push_back(deadletter["reason"]);
  }
  const auto reason_at = [&](const std::string& place) {
    return reasons.count(place) ? reasons[place].front() : std::string("<none at " + place + ">");
  };
  EXPECT_THAT(reason_at("broken.jsonl:2"), HasSubstr("invalid JSON"));
  EXPECT_THAT(reason_at("ragged.csv:3"), HasSubstr("row has 2 fields, the header 3"));
  EXPECT_THAT(reason_at("ragged.csv:4"), HasSubstr("row has 4 fields, the header 3"));
  EXPECT_THAT(reason_at("bad_utf8.jsonl:2"), HasSubstr("invalid JSON"));
  EXPECT_THAT(reason_at("bad_utf8.jsonl:2"), HasSubstr("UTF-8"));
  EXPECT_THAT(reason_at("bad_utf8.csv:2"), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(reason_at("empty.jsonl:0"), HasSubstr("empty file"));
  EXPECT_THAT(reason_at("garbage.bin:0"), HasSubstr("binary content"));
  EXPECT_THAT(reason_at("huge.jsonl:1"), HasSubstr("exceeds the 16 MiB limit"));
  EXPECT_EQ(complete["deadletters"], 8);
  // Everything else was read: broken 2 + ragged 2 + bad_utf8.jsonl 1 + huge 1.
  EXPECT_EQ(complete["records"], 6);
  const Json schema = SchemaJson(dir, "messy");
  EXPECT_EQ(TopLevelTypes(NamespaceOf(schema, "messy")),
            (std::map<std::string, std::string>{{"a", "int"}, {"b", "int"}, {"c", "int"}}));
}

// Hostile input seen through the binary: nothing aborts, each bad record costs only itself, and
// numbers keep every digit from the file to `query`. Before: the invalid UTF-8 header name aborted
// discover (an uncaught JSON exception), the CR-only CSV was 0 rows, the unbalanced quote and the
// bad array element each swallowed their whole file, and 9223372036854775807 came back as ...808.
TEST(DiscoverFiles, HostileFilesLoseOnlyTheirBadRecordsAndNumbersKeepEveryDigit) {
  TempDir dir;
  dir.Write("skippr.yml", R"(data_sources:
  files:
    File: {path: input}
pipelines:
  hostile:
    data_source: data_sources.files
)");
  dir.Write("input/a_header.csv", "id,na\xffme\n1,x\n");
  dir.Write("input/b_mac.csv", "id,name\r2,y\r3,z\r");
  dir.Write("input/c_quote.csv", "id,name\n4,\"open\n5,v\n6,w\n");
  std::string array = "[\n";
  for (int id = 7; id <= 16; ++id) {
    array += id == 10 ? "  {\"id\": 10, \"name\": nope},\n" : "  {\"id\": " + std::to_string(id) + "},\n";
  }
  array += "  {\"id\": 17}\n]\n";
  dir.Write("input/d_array.json", array);
  dir.Write("input/e_numbers.jsonl",
            "{\"id\": 18, \"big\": 9223372036854775807}\n"
            "{\"id\": 19, \"big\": 9223372036854775808, \"exact\": 0.1234567890123456789}\n"
            "{\"id\": 20, \"big\": 123456789012345678901234567890123456789012}\n");
  dir.Write("input/f_bad\xfe.jsonl", "{\"id\": 21}\n{broken\n");  // a file name that is not UTF-8
  WriteParquet(dir.path() + "/input/g_wide.parquet",
               "SELECT 22 AS id, 0.12345678901234567890::DECIMAL(38,20) AS amount, "
               "18446744073709551615::UBIGINT AS unsigned_big");

  ProcessResult discover = Skipprd(dir, {"discover", "-p", "hostile", "--output", "json"});
  ASSERT_EQ(discover.exit_code, 0) << discover.err << discover.out;
  const std::vector<Json> events = Events(discover.out);
  std::vector<std::string> deadletters;
  for (const Json& event : EventsNamed(events, "deadletter")) {
    deadletters.push_back(std::filesystem::path(event["source"].get<std::string>()).filename().string() +
                          ":" + std::to_string(event["line"].get<int>()));
  }
  std::sort(deadletters.begin(), deadletters.end());
  EXPECT_THAT(deadletters, ::testing::ElementsAre("c_quote.csv:2", "d_array.json:5",
                                                  "f_bad\xEF\xBF\xBD.jsonl:2"));
  EXPECT_EQ(events.back()["records"], 20);
  EXPECT_EQ(events.back()["deadletters"], 3);

  ProcessResult sync = Skipprd(dir, {"sync", "-p", "hostile", "--once", "--output", "json"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  const std::map<std::string, std::string> types = TopLevelTypes(NamespaceOf(SchemaJson(dir, "hostile"), "hostile"));
  EXPECT_EQ(types.at("na\xEF\xBF\xBDme"), "string");
  EXPECT_EQ(types.at("big"), "long");
  EXPECT_EQ(types.at("big_decimal"), "decimal(38,0)");
  EXPECT_EQ(types.at("big_string"), "string");
  EXPECT_EQ(types.at("exact"), "decimal(38,19)");
  EXPECT_EQ(types.at("amount"), "decimal(38,20)");
  EXPECT_EQ(types.at("unsigned_big"), "decimal(20,0)");

  ProcessResult query = Skipprd(
      dir, {"query", "--plain", "--sql",
            "SELECT count(*), count(DISTINCT id), max(big)::VARCHAR, max(big_decimal)::VARCHAR, "
            "max(big_string), max(exact)::VARCHAR, max(amount)::VARCHAR, "
            "max(unsigned_big)::VARCHAR FROM hostile.hostile"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  const Json row = Json::parse(query.out)["rows"][0];
  EXPECT_EQ(row[0], "20");
  EXPECT_EQ(row[1], "20");
  EXPECT_EQ(row[2], "9223372036854775807");
  EXPECT_EQ(row[3], "9223372036854775808");
  EXPECT_EQ(row[4], "123456789012345678901234567890123456789012");
  EXPECT_EQ(row[5], "0.1234567890123456789");
  EXPECT_EQ(row[6], "0.12345678901234567890");
  EXPECT_EQ(row[7], "18446744073709551615");
}

// ----- metadata show / apply ------------------------------------------------------------------

TEST(Metadata, ShowAndApply) {
  TempDir dir;
  dir.Write("skippr.yml", kSampleConfig);
  ProcessResult empty = Skipprd(dir, {"metadata", "show", "-p", "bikehire"});
  EXPECT_EQ(empty.exit_code, 0) << empty.out;
  EXPECT_EQ(Json::parse(empty.out), Json::parse(R"({"ok":true,"pipeline":"bikehire","namespaces":[]})"));

  ASSERT_EQ(Skipprd(dir, {"discover", "-p", "bikehire"}).exit_code, 0);
  const Json shown = Json::parse(Skipprd(dir, {"metadata", "show", "-p", "bikehire"}).out);
  const Json& fields = shown["namespaces"][0]["fields"];
  EXPECT_EQ(fields[0], Json::parse(R"j({"field_type":"decimal(10, 2)","name":"amount","nullable":true})j"));
  EXPECT_EQ(fields.size(), 12u);

  ProcessResult applied = Skipprd(dir, {"metadata", "apply", "-p", "bikehire", "--namespace", "extra",
                                        "--schema-json", R"({"fields":[{"name":"id","field_type":"bigint","nullable":false},{"name":"note","type":"string"}]})"});
  EXPECT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_EQ(Json::parse(applied.out),
            Json::parse(R"({"ok":true,"namespace":"extra","fields_written":2,"evolved":true})"));
  const Json schema = SchemaJson(dir, "bikehire");
  EXPECT_EQ(TopLevelTypes(NamespaceOf(schema, "extra")),
            (std::map<std::string, std::string>{{"id", "long"}, {"note", "string"}}));

  const auto apply_error = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"metadata", "apply", "-p", "bikehire", "--namespace", "extra"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult failed = Skipprd(dir, args);
    EXPECT_EQ(failed.exit_code, 1);
    const Json json = Json::parse(failed.out);
    EXPECT_EQ(json["ok"], false);
    return json["error"].get<std::string>();
  };
  EXPECT_EQ(apply_error({}), "one of --schema or --schema-json is required");
  EXPECT_EQ(apply_error({"--schema-json", R"([{"name":"x","field_type":"money"}])"}),
            "unknown field type 'money' for field 'x'");
  EXPECT_EQ(apply_error({"--schema-json", R"([{"name":"x"}])"}), "field 'x' must have \"field_type\"");
  EXPECT_EQ(apply_error({"--schema-json", R"({"columns":[]})"}), "schema JSON must contain a \"fields\" array");
  EXPECT_THAT(apply_error({"--schema-json", "{nope"}), HasSubstr("invalid schema JSON: "));
  EXPECT_EQ(apply_error({"--schema", "missing.json"}), "failed to read schema file 'missing.json'");
}

}  // namespace
}  // namespace skippr::testing
