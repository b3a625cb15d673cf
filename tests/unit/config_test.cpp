// skippr.yml loader: every rule, with the message and the position it reports.
#include "config/config.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/redact.hpp"

namespace skippr::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Raw strings start with a newline so that the YAML's first line is line 1 of the literal below it.
std::string Yaml(const char* text) {
  return text[0] == '\n' ? std::string(text + 1) : std::string(text);
}

Result<Config> Parse(const std::string& yaml, std::map<std::string, std::string> env = {}) {
  MapEnvironment environment(std::move(env));
  return ParseConfig(yaml, "skippr.yml", environment);
}

// The error message of a configuration that must fail.
std::string ErrorOf(const std::string& yaml, std::map<std::string, std::string> env = {}) {
  Result<Config> result = Parse(yaml, std::move(env));
  EXPECT_FALSE(result.ok()) << "expected a configuration error";
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidConfig);
  return result.status().message();
}

Config ParseOk(const std::string& yaml, std::map<std::string, std::string> env = {}) {
  Result<Config> result = Parse(yaml, std::move(env));
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : Config{};
}

const char* kMinimal = R"(
data_sources:
  sample:
    Sample: {rows: 10}
pipelines:
  rides:
    data_source: data_sources.sample
)";

// ----- the seed's example ---------------------------------------------------------------------

// seeds/materialised-views.txt, verbatim, with the two entries it references defined.
const char* kSeedExample = R"(
data_sources:
  pg:
    Postgres:
      host: localhost
      database: shop
      password: ${PG_PASSWORD}
data_sinks:
  lake:
    SkipprLake:
      warehouse: file:///var/lib/skippr/warehouse
pipelines:
  invoices:
    data_source: data_sources.pg
    data_sink: data_sinks.lake
    transform:
      aggregates:
        - id: customer_invoice_totals
          key_fields: [customer_id]
          measures:
            invoice_total: { sum: amount }
            invoice_count: { count: "*" }
)";

TEST(ConfigSeed, MaterialisedViewsExampleLoads) {
  Config config = ParseOk(Yaml(kSeedExample), {{"PG_PASSWORD", "s3cret"}});
  const PipelineConfig* invoices = config.FindPipeline("invoices");
  ASSERT_NE(invoices, nullptr);
  EXPECT_EQ(invoices->data_source, "pg");
  EXPECT_EQ(invoices->data_sink, "lake");
  EXPECT_EQ(invoices->sync_frequency_seconds, 900);
  ASSERT_EQ(invoices->transform.aggregates.size(), 1u);
  const AggregateConfig& aggregate = invoices->transform.aggregates[0];
  EXPECT_EQ(aggregate.id, "customer_invoice_totals");
  EXPECT_EQ(aggregate.key_fields, std::vector<std::string>{"customer_id"});
  ASSERT_EQ(aggregate.measures.size(), 2u);  // sorted by name
  EXPECT_EQ(aggregate.measures[0].name, "invoice_count");
  EXPECT_EQ(aggregate.measures[0].kind, MeasureKind::kCount);
  EXPECT_EQ(aggregate.measures[0].field, "*");
  EXPECT_EQ(aggregate.measures[1].name, "invoice_total");
  EXPECT_EQ(aggregate.measures[1].kind, MeasureKind::kSum);
  EXPECT_EQ(aggregate.measures[1].field, "amount");
  const ConnectorConfig& pg = config.data_sources.at("pg").connector;
  EXPECT_EQ(pg.kind, "Postgres");
  EXPECT_EQ(pg.GetString("password"), "s3cret");
  EXPECT_EQ(pg.GetInteger("port"), 5432);  // default filled in
  EXPECT_EQ(config.data_sinks.at("lake").connector.GetString("table_namespace"), "default");
  EXPECT_TRUE(CheckWholeConfig(config).empty());
}

TEST(ConfigSeed, BundledExampleLoads) {
  MapEnvironment shell;
  Result<Config> config =
      LoadConfigFile(std::string(SKIPPRD_SOURCE_DIR) + "/examples/bikehire/skippr.yml", shell);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->pipelines.size(), 1u);
}

// ----- structure and unknown keys -------------------------------------------------------------

TEST(ConfigStructure, EmptyFileIsAnEmptyConfiguration) {
  Config config = ParseOk("");
  EXPECT_TRUE(config.pipelines.empty());
  EXPECT_TRUE(config.data_sources.empty());
}

TEST(ConfigStructure, UnknownRootKeyIsRefusedWithPositionAndAllowedKeys) {
  const std::string message = ErrorOf(Yaml(R"(
data_sources: {}
pipeline:
  rides: {}
)"));
  EXPECT_EQ(message,
            "skippr.yml:2:1: pipeline: unknown key 'pipeline'; allowed here: skippr, pipelines, "
            "data_sources, data_sinks, deadletter_sinks");
}

TEST(ConfigStructure, UnknownPipelineKeyIsRefused) {
  const std::string message = ErrorOf(Yaml(R"(
data_sources:
  sample:
    Sample: {}
pipelines:
  rides:
    data_source: data_sources.sample
    reset_offsets: true
)"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:7:5: pipelines.rides.reset_offsets: unknown key "
                                 "'reset_offsets'; allowed here: data_source, data_sink, "
                                 "deadletter_sink, transform, sync_frequency_seconds, data_dir, "
                                 "buffer_threshold_bytes, buffer_threshold_seconds, disk_min_free_bytes, disk_pause_at_percent, disk_resume_at_percent, disk_wait_seconds, chaos_mode"));
}

TEST(ConfigStructure, UnknownKeysAreRefusedAtEveryLevel) {
  const std::string message = ErrorOf(Yaml(R"(
skippr:
  workspace: w
  colour: blue
data_sources:
  sample:
    Sample: {rows: 5, colour: red}
pipelines:
  rides:
    data_source: data_sources.sample
    transform:
      colour: green
      aggregates:
        - id: a
          key_fields: [k]
          colour: pink
          measures:
            n: {count: "*", colour: grey}
)"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:3:3: skippr.colour: unknown key 'colour'"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:6:23: data_sources.sample.Sample.colour: unknown key "
                                 "'colour'; allowed here: version, rows, seed, batch_size_rows"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:11:7: pipelines.rides.transform.colour: unknown key"));
  EXPECT_THAT(
      message,
      HasSubstr("skippr.yml:15:11: pipelines.rides.transform.aggregates[0].colour: unknown key "
                "'colour'; allowed here: id, key_fields, measures"));
  EXPECT_THAT(message,
              HasSubstr("skippr.yml:17:29: pipelines.rides.transform.aggregates[0].measures."
                        "n.colour: unknown key 'colour'; allowed here: sum, count"));
}

TEST(ConfigStructure, DuplicateKeyIsRefused) {
  const std::string message = ErrorOf(Yaml(R"(
data_sources:
  sample:
    Sample: {}
  sample:
    Sample: {}
)"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:4:3: data_sources.sample: appears twice"));
}

TEST(ConfigStructure, YamlSyntaxErrorNamesThePosition) {
  const std::string message = ErrorOf("pipelines:\n  rides: [unclosed\n");
  EXPECT_THAT(message, HasSubstr("skippr.yml:3:1: YAML syntax error"));
}

// Keys and YAML's own messages may carry control characters (a quoted "a\nb" key, an escape of a
// raw byte): messages show them escaped, so each error stays one line that starts with its place
// (found by tests/fuzz/config_fuzzer.cpp; inputs in tests/fuzz/config/regressions/).
TEST(ConfigStructure, ControlCharactersInMessagesAreEscaped) {
  const std::string unknown_key = ErrorOf("\"bad\\nkey\": 1\n\"tab\\tkey\": 2\n");
  EXPECT_THAT(unknown_key, HasSubstr("skippr.yml:1:1: bad\\nkey: unknown key 'bad\\nkey'"));
  EXPECT_THAT(unknown_key, HasSubstr("\nskippr.yml:2:1: tab\\tkey: unknown key 'tab\\tkey'"));
  EXPECT_EQ(std::count(unknown_key.begin(), unknown_key.end(), '\n'), 1);
  const std::string syntax = ErrorOf("a: \"\\\x01\"\n");
  EXPECT_THAT(syntax, HasSubstr("YAML syntax error: unknown escape character: \\x01 (quote"));
  EXPECT_EQ(syntax.find('\x01'), std::string::npos);
}

TEST(ConfigStructure, EveryErrorIsReportedNotOnlyTheFirst) {
  const std::string message = ErrorOf(Yaml(R"(
bogus: 1
data_sources:
  s:
    Nope: {}
)"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:1:1: bogus: unknown key"));
  EXPECT_THAT(message,
              HasSubstr("skippr.yml:4:5: data_sources.s.Nope: unknown data source kind 'Nope'"));
}

TEST(ConfigStructure, SectionOfTheWrongShapeIsRefused) {
  EXPECT_EQ(ErrorOf("pipelines: [a, b]\n"),
            "skippr.yml:1:1: pipelines: expected a mapping, found a list");
}

// ----- connector entries ----------------------------------------------------------------------

TEST(ConfigConnectors, UnknownKindListsTheKnownOnes) {
  EXPECT_EQ(ErrorOf("data_sources:\n  s:\n    Kafka: {brokers: x}\n"),
            "skippr.yml:3:5: data_sources.s.Kafka: unknown data source kind 'Kafka'; data source "
            "kinds: File, Postgres, S3, Sample");
  EXPECT_THAT(ErrorOf("data_sinks:\n  s:\n    Sample: {}\n"),
              HasSubstr("unknown sink kind 'Sample'; sink kinds: Duckdb, Postgres, SkipprLake"));
}

TEST(ConfigConnectors, EntryHoldsExactlyOneBlock) {
  EXPECT_EQ(
      ErrorOf("data_sources:\n  s:\n    Sample: {}\n    File: {path: x}\n"),
      "skippr.yml:4:5: data_sources.s.File: 's' has two connector blocks (Sample and File); an "
      "entry holds exactly one");
  EXPECT_EQ(ErrorOf("data_sources:\n  s:\n"),
            "skippr.yml:2:3: data_sources.s: needs one connector block, for example 'File: {...}'; "
            "data source kinds: File, Postgres, S3, Sample");
}

TEST(ConfigConnectors, RequiredSettingIsNamed) {
  EXPECT_EQ(ErrorOf("data_sources:\n  files:\n    File: {format: csv}\n"),
            "skippr.yml:3:5: data_sources.files.File: File needs 'path'");
}

TEST(ConfigConnectors, SettingTypesAndChoicesAreChecked) {
  EXPECT_EQ(ErrorOf("data_sources:\n  s:\n    Sample: {rows: many}\n"),
            "skippr.yml:3:20: data_sources.s.Sample.rows: expected a whole number, found 'many'");
  EXPECT_EQ(
      ErrorOf("data_sources:\n  s:\n    File: {path: x, format: xml}\n"),
      "skippr.yml:3:29: data_sources.s.File.format: 'xml' is not allowed; choose one of: json, "
      "csv, parquet");
  EXPECT_EQ(ErrorOf("data_sources:\n  pg:\n    Postgres: {database: d, port: 70000}\n"),
            "skippr.yml:3:35: data_sources.pg.Postgres.port: 70000 is out of range; allowed: 1 to "
            "65535");
}

TEST(ConfigConnectors, DescribeSettingsIsTheRegistry) {
  for (const ConnectorRole role : {ConnectorRole::kSource, ConnectorRole::kSink}) {
    for (const std::string& kind : ConnectorKinds(role)) {
      EXPECT_FALSE(DescribeSettings(role, kind).empty()) << kind;
    }
  }
  const auto find = [](ConnectorRole role, const std::string& kind, const std::string& name) {
    const std::vector<SettingDescription> settings = DescribeSettings(role, kind);
    const auto it = std::find_if(settings.begin(), settings.end(),
                                 [&](const SettingDescription& s) { return s.name == name; });
    return it == settings.end() ? std::optional<SettingDescription>() : *it;
  };
  const std::optional<SettingDescription> path = find(ConnectorRole::kSource, "File", "path");
  ASSERT_TRUE(path.has_value());
  EXPECT_TRUE(path->required);
  EXPECT_EQ(path->type, "string");
  const std::optional<SettingDescription> password =
      find(ConnectorRole::kSource, "Postgres", "password");
  ASSERT_TRUE(password.has_value());
  EXPECT_TRUE(password->secret);
  EXPECT_FALSE(password->required);
  const std::optional<SettingDescription> host = find(ConnectorRole::kSource, "Postgres", "host");
  ASSERT_TRUE(host.has_value());
  EXPECT_FALSE(host->secret);
  const std::optional<SettingDescription> policy =
      find(ConnectorRole::kSink, "SkipprLake", "write_policy");
  ASSERT_TRUE(policy.has_value());
  EXPECT_EQ(policy->type, "choice");
  EXPECT_EQ(policy->choices, (std::vector<std::string>{"append", "merge_by_key", "replace_table"}));
  ASSERT_TRUE(policy->default_value.has_value());
  EXPECT_EQ(std::get<std::string>(*policy->default_value), "append");
  EXPECT_TRUE(DescribeSettings(ConnectorRole::kSource, "Kafka").empty());
  EXPECT_TRUE(DescribeSettings(ConnectorRole::kSink, "Sample").empty()) << "a kind of the other role";
}

TEST(ConfigConnectors, VersionPinIsRecordedAndChecked) {
  Config config = ParseOk("data_sources:\n  s:\n    Sample: {version: 1.2.3}\n");
  EXPECT_EQ(config.data_sources.at("s").connector.version, "1.2.3");
  EXPECT_EQ(
      ErrorOf("data_sources:\n  s:\n    Sample: {version: latest}\n"),
      "skippr.yml:3:23: data_sources.s.Sample.version: 'latest' is not a version; write x.y.z, "
      "for example 1.2.3");
}

TEST(ConfigConnectors, SecretsRefusePlaintext) {
  const std::string message = ErrorOf(Yaml(R"(
data_sources:
  pg:
    Postgres:
      database: shop
      password: hunter2
)"));
  EXPECT_EQ(
      message,
      "skippr.yml:5:17: data_sources.pg.Postgres.password: is a secret and refuses plaintext; "
      "write it as a ${NAME} reference (for example '${PG_PASSWORD}') and set that variable in "
      "the environment or in .env beside skippr.yml");
  EXPECT_THAT(ErrorOf(Yaml(R"(
data_sources:
  pg:
    Postgres: {connection_string: "postgresql://u:p@h/db"}
)")),
              HasSubstr("data_sources.pg.Postgres.connection_string: is a secret"));
  EXPECT_THAT(ErrorOf(Yaml(R"(
data_sinks:
  lake:
    SkipprLake: {warehouse: "file:///w", catalog_uri: "postgresql://u:p@h/db"}
)")),
              HasSubstr("data_sinks.lake.SkipprLake.catalog_uri: is a secret"));
}

TEST(ConfigConnectors, LakeWarehouseMustBeAnAbsoluteUri) {
  EXPECT_EQ(ErrorOf("data_sinks:\n  lake:\n    SkipprLake: {warehouse: ./wh}\n"),
            "skippr.yml:3:5: data_sinks.lake.SkipprLake: warehouse './wh' must be an absolute "
            "file:///path");
}

TEST(ConfigEngine, AStoreInDynamoDbNeedsItsTableAndKeysEachPipeline) {
  EXPECT_THAT(ErrorOf("skippr:\n  store: {type: dynamodb}\n"),
              HasSubstr("store type 'dynamodb' needs the table"));
  EXPECT_THAT(ErrorOf("skippr:\n  store: {type: cloud-tables, name: t}\n"),
              HasSubstr("store type 'cloud-tables' is not available in this build"));
  EXPECT_THAT(ErrorOf("skippr:\n  store: {type: dynamodb, name: t}\n",
                      {{"SKIPPR_STORE_LEASE_SECONDS", "0"}}),
              HasSubstr("'0' is not a lease period"));
  const std::string pipelines = "data_sources:\n  s:\n    Sample: {}\n"
                                "pipelines:\n  p: {data_source: data_sources.s}\n";
  Config config = ParseOk("skippr:\n  tenant: acme\n  store: {type: dynamodb, table: state}\n" +
                          pipelines);
  EXPECT_EQ(config.pipelines["p"].store_table, "state");
  EXPECT_EQ(config.pipelines["p"].store_key, "acme#default#p");
  EXPECT_EQ(config.pipelines["p"].store_lease_seconds, 30);
  config = ParseOk(pipelines, {{"SKIPPR_STORE_TYPE", "dynamodb"},
                               {"SKIPPR_STORE_NAME", "from-env"},
                               {"SKIPPR_STORE_LEASE_SECONDS", "2"}});
  EXPECT_EQ(config.pipelines["p"].store_table, "from-env");
  EXPECT_EQ(config.pipelines["p"].store_lease_seconds, 2);
  EXPECT_TRUE(ParseOk(pipelines).pipelines["p"].store_table.empty()) << "LMDB by default";
}

TEST(ConfigConnectors, LakeOnS3NeedsABucketAndACatalogBesideIt) {
  EXPECT_THAT(ErrorOf("data_sinks:\n  lake:\n    SkipprLake: {warehouse: \"s3://b/wh\"}\n"),
              HasSubstr("skippr.yml:3:5: data_sinks.lake.SkipprLake: warehouse 's3://b/wh' is on "
                        "S3, so the catalog cannot be the default SQLite file beside it: set "
                        "catalog_table"));
  EXPECT_THAT(ErrorOf("data_sinks:\n  lake:\n    SkipprLake: {warehouse: \"s3:///wh\", "
                      "catalog_table: t}\n"),
              HasSubstr("warehouse 's3:///wh' names no bucket"));
  EXPECT_THAT(ErrorOf("data_sinks:\n  lake:\n    SkipprLake: {warehouse: \"s3://b/wh\", "
                      "catalog_table: t, catalog_uri: \"${PG}\"}\n",
                      {{"PG", "postgresql://h/db"}}),
              HasSubstr("set one of catalog_table (DynamoDB) and catalog_uri"));
  EXPECT_THAT(ErrorOf("data_sinks:\n  duck:\n    Duckdb: {warehouse: \"s3://b/wh\", "
                      "table_namespace: n}\n"),
              HasSubstr("a Duckdb warehouse must be an absolute file:///path"));
  const std::string config = "data_sources:\n  s:\n    Sample: {}\n"
                             "data_sinks:\n  lake:\n    SkipprLake: {warehouse: \"s3://b/wh/\", "
                             "catalog_table: skippr_catalog, region: eu-west-1}\n"
                             "pipelines:\n  p: {data_source: data_sources.s, "
                             "data_sink: data_sinks.lake}\n";
  ParseOk(config);
}

TEST(ConfigConnectors, PostgresSourceNeedsADatabase) {
  EXPECT_EQ(ErrorOf("data_sources:\n  pg:\n    Postgres: {host: h}\n"),
            "skippr.yml:3:5: data_sources.pg.Postgres: Postgres needs 'database' (with host, port, "
            "user, password) or 'connection_string'");
}

TEST(ConfigConnectors, EntryNamesCannotContainDots) {
  EXPECT_EQ(ErrorOf("data_sources:\n  my.src:\n    Sample: {}\n"),
            "skippr.yml:2:3: data_sources.my.src: entry name 'my.src' contains '.'; references are "
            "written <section>.<name>, so names cannot contain dots — use '_' instead");
}

// ----- ${NAME} references ---------------------------------------------------------------------

const char* kEnvPath = R"(
data_sources:
  files:
    File: {path: "${INPUT_PATH}"}
)";

TEST(ConfigEnvironment, SetReferenceResolves) {
  Config config = ParseOk(Yaml(kEnvPath), {{"INPUT_PATH", "/data/in"}});
  EXPECT_EQ(config.data_sources.at("files").connector.GetString("path"), "/data/in");
}

TEST(ConfigEnvironment, UnsetReferenceIsAnError) {
  EXPECT_EQ(ErrorOf(Yaml(kEnvPath)),
            "skippr.yml:3:18: skippr.yml references ${INPUT_PATH} at data_sources.files.File.path, "
            "but that environment variable is not set; set it in the shell or in .env beside "
            "skippr.yml");
}

TEST(ConfigEnvironment, EmptyReferenceIsAnError) {
  EXPECT_THAT(ErrorOf(Yaml(kEnvPath), {{"INPUT_PATH", ""}}),
              HasSubstr("skippr.yml:3:18: skippr.yml references ${INPUT_PATH} at "
                        "data_sources.files.File.path, but that environment variable is empty"));
}

TEST(ConfigEnvironment, OnlyWholeValuesAreReferences) {
  Config config = ParseOk("data_sources:\n  f:\n    File: {path: \"s3://${B}/x\"}\n");
  EXPECT_EQ(config.data_sources.at("f").connector.GetString("path"), "s3://${B}/x");
}

TEST(ConfigEnvironment, ReferencesFillNumbersToo) {
  Config config =
      ParseOk("data_sources:\n  s:\n    Sample: {rows: \"${ROWS}\"}\n", {{"ROWS", "77"}});
  EXPECT_EQ(config.data_sources.at("s").connector.GetInteger("rows"), 77);
}

// ----- ReferenceMode::kKeep: a file checked before it is saved ---------------------------------

Result<Config> ParseKeeping(const std::string& yaml, std::map<std::string, std::string> env = {}) {
  MapEnvironment environment(std::move(env));
  return ParseConfig(yaml, "skippr.yml", environment, ReferenceMode::kKeep);
}

std::string KeepingErrorOf(const std::string& yaml) {
  Result<Config> result = ParseKeeping(yaml);
  EXPECT_FALSE(result.ok()) << "expected a configuration error";
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidConfig);
  return result.status().message();
}

const char* kEveryKindOfReference = R"(
data_sources:
  pg:
    Postgres:
      host: ${PG_HOST}
      port: ${PG_PORT}
      database: shop
      password: ${PG_PASSWORD}
      cdc_mode: ${CDC_MODE}
data_sinks:
  lake:
    SkipprLake:
      warehouse: ${LAKE}
      write_policy: ${WRITE_POLICY}
      catalog_uri: ${CATALOG_URI}
pipelines:
  p:
    data_source: data_sources.pg
    data_sink: data_sinks.lake
    sync_frequency_seconds: ${FREQUENCY}
    chaos_mode: ${CHAOS}
)";

TEST(ConfigKeptReferences, ReferencesStayAsWrittenAndTypedSettingsReadAPlaceholder) {
  // Not one variable is set, and one that is set is not read either.
  Result<Config> result = ParseKeeping(Yaml(kEveryKindOfReference), {{"PG_HOST", "db.example"}});
  ASSERT_TRUE(result.ok()) << result.status().message();
  const ConnectorConfig& pg = result->data_sources.at("pg").connector;
  EXPECT_EQ(pg.GetString("host"), "${PG_HOST}");
  EXPECT_EQ(pg.GetString("password"), "${PG_PASSWORD}") << "a secret as a reference is accepted";
  EXPECT_EQ(pg.GetInteger("port"), 1) << "a number reads its least allowed value";
  EXPECT_EQ(pg.GetString("cdc_mode"), "snapshot") << "a choice reads its first";
  const ConnectorConfig& lake = result->data_sinks.at("lake").connector;
  EXPECT_EQ(lake.GetString("warehouse"), "${LAKE}") << "no scheme check on a kept reference";
  EXPECT_EQ(lake.GetString("write_policy"), "append");
  EXPECT_EQ(lake.GetString("catalog_uri"), "${CATALOG_URI}");
  const PipelineConfig* pipeline = result->FindPipeline("p");
  ASSERT_NE(pipeline, nullptr);
  EXPECT_EQ(pipeline->sync_frequency_seconds, 1);
  EXPECT_FALSE(pipeline->chaos_mode) << "a flag reads false";

  // kResolve, the default, still needs every variable: the first unset one is named.
  MapEnvironment empty;
  Result<Config> resolved =
      ParseConfig(Yaml(kEveryKindOfReference), "skippr.yml", empty, ReferenceMode::kResolve);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), StatusCode::kInvalidConfig);
  EXPECT_THAT(resolved.status().message(),
              HasSubstr("skippr.yml:4:13: skippr.yml references ${PG_HOST} at "
                        "data_sources.pg.Postgres.host, but that environment variable is not set"));
  EXPECT_THAT(resolved.status().message(), HasSubstr("${LAKE}"));
  EXPECT_EQ(ErrorOf(Yaml(kEnvPath)),
            "skippr.yml:3:18: skippr.yml references ${INPUT_PATH} at data_sources.files.File.path, "
            "but that environment variable is not set; set it in the shell or in .env beside "
            "skippr.yml");
}

TEST(ConfigKeptReferences, OnlyThePipelinesKeyPathsResolve) {
  // A second pipeline, q, reads the same source and has no sink.
  const std::string yaml = Yaml(kEveryKindOfReference) + "  q:\n    data_source: data_sources.pg\n";
  MapEnvironment environment({{"PG_HOST", "db"}, {"PG_PORT", "6543"}, {"PG_PASSWORD", "pw"},
                              {"CDC_MODE", "cdc_only"}, {"FREQUENCY", "30"}, {"CHAOS", "no"}});
  Result<Config> shape = ParseKeeping(yaml);
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  EXPECT_EQ(PipelineKeyPaths(*shape, "q"),
            (std::vector<std::string>{"skippr", "pipelines.q", "data_sources.pg"}));
  EXPECT_TRUE(PipelineKeyPaths(*shape, "absent").empty());
  // Pipeline q runs without the lake: its unset ${LAKE}, ${WRITE_POLICY} and ${CATALOG_URI} are
  // kept, and p's ${FREQUENCY} is not q's business either.
  Result<Config> scoped = ParseConfig(yaml, "skippr.yml", environment, ReferenceMode::kResolve,
                                      PipelineKeyPaths(*shape, "q"));
  ASSERT_TRUE(scoped.ok()) << scoped.status().message();
  const ConnectorConfig& pg = scoped->data_sources.at("pg").connector;
  EXPECT_EQ(pg.GetString("host"), "db");
  EXPECT_EQ(pg.GetInteger("port"), 6543);
  EXPECT_EQ(pg.GetString("cdc_mode"), "cdc_only");
  EXPECT_EQ(scoped->data_sinks.at("lake").connector.GetString("warehouse"), "${LAKE}");
  // Pipeline p needs the lake, so its unset variables are named, at their places.
  Result<Config> p = ParseConfig(yaml, "skippr.yml", environment, ReferenceMode::kResolve,
                                 PipelineKeyPaths(*shape, "p"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("skippr.yml:12:18: skippr.yml references ${LAKE} at "
                        "data_sinks.lake.SkipprLake.warehouse, but that environment variable is "
                        "not set"));
}

TEST(ConfigKeptReferences, APlaintextOrMalformedSecretIsStillRefused) {
  EXPECT_EQ(KeepingErrorOf(Yaml(R"(
data_sources:
  pg:
    Postgres:
      database: shop
      password: hunter2
)")),
            "skippr.yml:5:17: data_sources.pg.Postgres.password: is a secret and refuses "
            "plaintext; write it as a ${NAME} reference (for example '${PG_PASSWORD}') and set "
            "that variable in the environment or in .env beside skippr.yml");
  // Not a reference by the grammar (a name starts with a letter or '_'), so plaintext.
  EXPECT_THAT(KeepingErrorOf(Yaml(R"(
data_sources:
  pg:
    Postgres:
      database: shop
      password: ${1BAD}
)")),
              HasSubstr("skippr.yml:5:17: data_sources.pg.Postgres.password: is a secret and "
                        "refuses plaintext"));
}

TEST(ConfigKeptReferences, EveryOtherMistakeIsStillReportedWithItsPlace) {
  const std::string message = KeepingErrorOf(Yaml(R"(
data_sources:
  pg:
    Postgres: {database: "${DB}", port: 70000, sslmode: sometimes, colour: blue}
data_sinks:
  lake:
    SkipprLake: {warehouse: ./wh}
pipelines:
  p:
    data_source: data_sources.pg
    sync_frequency_seconds: 0
)"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:3:68: data_sources.pg.Postgres.colour: unknown key "
                                 "'colour'"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:3:41: data_sources.pg.Postgres.port: 70000 is out of "
                                 "range; allowed: 1 to 65535"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:3:57: data_sources.pg.Postgres.sslmode: 'sometimes' "
                                 "is not allowed; choose one of: disable, prefer, require, "
                                 "verify-ca, verify-full"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:6:5: data_sinks.lake.SkipprLake: warehouse './wh' "
                                 "must be an absolute file:///path"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:10:29: pipelines.p.sync_frequency_seconds: 0 is out "
                                 "of range; allowed: 1 to 9223372036854775807"));
}

// A fresh directory per test, named after it, removed afterwards.
class ConfigDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("skippr-config-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// .env beside the file fills what the shell leaves unset or empty; the shell wins over .env;
// .env.local wins over both.
class ConfigDotenvFiles : public ConfigDirectoryTest {
 protected:
  void SetUp() override {
    ConfigDirectoryTest::SetUp();
    Write("skippr.yml", Yaml(R"(
data_sources:
  a:
    File: {path: "${PATH_A}"}
  b:
    File: {path: "${PATH_B}"}
  c:
    File: {path: "${PATH_C}"}
)"));
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  Result<Config> Load(std::map<std::string, std::string> shell) {
    MapEnvironment environment(std::move(shell));
    return LoadConfigFile((dir_ / "skippr.yml").string(), environment);
  }
};

TEST_F(ConfigDotenvFiles, ShellWinsOverDotenvWhichFillsUnsetAndEmpty) {
  Write(".env",
        "PATH_A=from-dotenv-a\nPATH_B=from-dotenv-b\nexport PATH_C='from dotenv c' # note\n");
  Result<Config> config = Load({{"PATH_A", "from-shell-a"}, {"PATH_B", ""}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->data_sources.at("a").connector.GetString("path"), "from-shell-a");
  EXPECT_EQ(config->data_sources.at("b").connector.GetString("path"), "from-dotenv-b");
  EXPECT_EQ(config->data_sources.at("c").connector.GetString("path"), "from dotenv c");
  // What the CLI exports: only what .env changes.
  EXPECT_EQ(config->dotenv_overrides,
            (std::map<std::string, std::string>{{"PATH_B", "from-dotenv-b"},
                                                {"PATH_C", "from dotenv c"}}));
}

TEST_F(ConfigDotenvFiles, DotenvLocalWinsOverShellAndDotenv) {
  Write(".env", "PATH_A=dotenv\nPATH_B=dotenv\nPATH_C=dotenv\n");
  Write(".env.local", "PATH_A=local\n");
  Result<Config> config = Load({{"PATH_A", "shell"}, {"PATH_B", "shell"}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->data_sources.at("a").connector.GetString("path"), "local");
  EXPECT_EQ(config->data_sources.at("b").connector.GetString("path"), "shell");
  EXPECT_EQ(config->data_sources.at("c").connector.GetString("path"), "dotenv");
}

TEST_F(ConfigDotenvFiles, UnsetEverywhereNamesTheVariable) {
  Write(".env", "PATH_A=a\nPATH_B=b\n");
  Result<Config> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("skippr.yml:7:18: skippr.yml references ${PATH_C} at "
                        "data_sources.c.File.path, but that environment variable is not set"));
}

// By file and line, never by its text: a malformed line may be a pasted secret.
TEST_F(ConfigDotenvFiles, BrokenDotenvLineIsNamedButNotShown) {
  Write(".env", "# fine\nPATH_A=a\nthis is not an assignment\n");
  Result<Config> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidConfig);
  EXPECT_THAT(config.status().message(),
              HasSubstr("/.env:3:1: expected NAME=value, found a line without '=' (not shown: it "
                        "may hold a secret)"));
  EXPECT_THAT(config.status().message(), Not(HasSubstr("assignment")));

  Write(".env", "GOOD=1\n2BAD=hunter2-secret\n");
  Result<Config> bad_name = Load({});
  ASSERT_FALSE(bad_name.ok());
  EXPECT_THAT(bad_name.status().message(), HasSubstr("/.env:2:1: '2BAD' is not a variable name"));
  EXPECT_THAT(bad_name.status().message(), Not(HasSubstr("hunter2")));
}

TEST(ConfigDotenv, ParsesQuotesEscapesExportsAndComments) {
  Result<std::map<std::string, std::string>> values = ParseDotenv(
      "# comment\n\nA=plain\nexport B = spaced \nC=\"two\\nlines\"\nD='single # kept'\nE=x # "
      "cut\nF=\n",
      ".env");
  ASSERT_TRUE(values.ok()) << values.status().message();
  EXPECT_EQ(*values, (std::map<std::string, std::string>{{"A", "plain"},
                                                         {"B", "spaced"},
                                                         {"C", "two\nlines"},
                                                         {"D", "single # kept"},
                                                         {"E", "x"},
                                                         {"F", ""}}));
  EXPECT_EQ(ParseDotenv("A=\"open\n", ".env").status().message(),
            ".env:1:3: the quoted value of A is not closed");
}

// docs/config.md promises \" inside double quotes: the escaped quote is part of the value, not its
// end (found by tests/fuzz/dotenv_fuzzer.cpp; the input is tests/fuzz/dotenv/regressions/).
TEST(ConfigDotenv, EscapedDoubleQuoteStaysInsideTheValue) {
  Result<std::map<std::string, std::string>> values =
      ParseDotenv("A=\"say \\\"hi\\\" twice\"\nB=\"ends in a backslash \\\\\"\n", ".env");
  ASSERT_TRUE(values.ok()) << values.status().message();
  EXPECT_EQ(*values, (std::map<std::string, std::string>{{"A", "say \"hi\" twice"},
                                                         {"B", "ends in a backslash \\"}}));
  EXPECT_EQ(ParseDotenv("A=\"open \\\"\n", ".env").status().message(),
            ".env:1:3: the quoted value of A is not closed");
}

// ----- references and names -------------------------------------------------------------------

TEST(ConfigReferences, MissingEntryIsNamedWithWhatIsDefined) {
  const std::string message = ErrorOf(Yaml(R"(
data_sources:
  sample:
    Sample: {}
pipelines:
  rides:
    data_source: data_sources.pg
)"));
  EXPECT_EQ(
      message,
      "skippr.yml:6:18: pipelines.rides.data_source: references 'data_sources.pg', but 'pg' is "
      "not defined (defined: sample)");
}

TEST(ConfigReferences, SinkReferenceMustResolve) {
  const std::string message =
      ErrorOf(std::string(Yaml(kMinimal)) + "    data_sink: data_sinks.lake\n");
  EXPECT_EQ(
      message,
      "skippr.yml:7:16: pipelines.rides.data_sink: references 'data_sinks.lake', but 'lake' is "
      "not defined (no data_sinks are defined)");
}

TEST(ConfigReferences, ReferenceIntoTheWrongSectionIsRefused) {
  const std::string message =
      ErrorOf(std::string(Yaml(kMinimal)) + "    data_sink: deadletter_sinks.lake\n");
  EXPECT_EQ(
      message,
      "skippr.yml:7:16: pipelines.rides.data_sink: 'deadletter_sinks.lake' is not a reference "
      "into data_sinks; write data_sinks.<name>");
}

// ----- deadletter_sink ------------------------------------------------------------------------

const char* kWithSinks = R"(
data_sources:
  sample:
    Sample: {rows: 10}
data_sinks:
  lake:
    SkipprLake: {warehouse: "file:///srv/wh", table_namespace: data}
deadletter_sinks:
  dl:
    SkipprLake: {warehouse: "file:///srv/wh", table_namespace: errors}
  duck:
    Duckdb: {warehouse: "file:///srv/duck"}
pipelines:
  rides:
    data_source: data_sources.sample
    data_sink: data_sinks.lake
)";

TEST(ConfigDeadletterSink, ASkipprLakeEntryOfDeadletterSinksIsAccepted) {
  const Config config = ParseOk(std::string(Yaml(kWithSinks)) + "    deadletter_sink: deadletter_sinks.dl\n");
  EXPECT_EQ(config.pipelines.at("rides").deadletter_sink, "dl");
  EXPECT_EQ(config.pipelines.at("rides").deadletter_sink_mark.line, 16);
  EXPECT_TRUE(CheckWholeConfig(config).empty());
}

TEST(ConfigDeadletterSink, TheDataSinkIsRefused) {
  EXPECT_EQ(ErrorOf(std::string(Yaml(kWithSinks)) + "    deadletter_sink: data_sinks.lake\n"),
            "skippr.yml:16:22: pipelines.rides.deadletter_sink: 'data_sinks.lake' is a data sink; "
            "deadletters need a sink of their own: declare one under deadletter_sinks (a "
            "SkipprLake with its own table_namespace) and write deadletter_sinks.<name>");
}

TEST(ConfigDeadletterSink, AMissingEntryIsRefused) {
  EXPECT_EQ(ErrorOf(std::string(Yaml(kWithSinks)) + "    deadletter_sink: deadletter_sinks.gone\n"),
            "skippr.yml:16:22: pipelines.rides.deadletter_sink: references "
            "'deadletter_sinks.gone', but 'gone' is not defined (defined: dl, duck)");
}

TEST(ConfigDeadletterSink, AnotherKindThanSkipprLakeIsRefused) {
  EXPECT_EQ(ErrorOf(std::string(Yaml(kWithSinks)) + "    deadletter_sink: deadletter_sinks.duck\n"),
            "skippr.yml:16:22: pipelines.rides.deadletter_sink: deadletter_sinks.duck is a Duckdb "
            "sink; deadletters land in a SkipprLake sink only (other kinds as they are built): "
            "make it SkipprLake");
}

TEST(ConfigDeadletterSink, TwoPipelinesOnOneDeadletterSinkAreAProblem) {
  const Config config = ParseOk(std::string(Yaml(kWithSinks)) +
                                "    deadletter_sink: deadletter_sinks.dl\n"
                                "  walks:\n"
                                "    data_source: data_sources.sample\n"
                                "    deadletter_sink: deadletter_sinks.dl\n");
  const std::vector<ConfigProblem> problems = CheckWholeConfig(config);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message,
            "skippr.yml:19:22: pipelines.walks.deadletter_sink: deadletter_sinks.dl is already "
            "the deadletter sink of pipeline rides, and both would land in its one table "
            "errors.deadletters — give each pipeline a deadletter sink of its own (its own "
            "table_namespace)");
}

TEST(ConfigReferences, DataSourceIsRequired) {
  EXPECT_EQ(ErrorOf("data_sources:\n  s:\n    Sample: {}\npipelines:\n  rides: {chaos_mode: no}\n"),
            "skippr.yml:5:3: pipelines.rides: needs data_source: data_sources.<name>");
}

TEST(ConfigReferences, ReservedPipelineNamesAreRefusedAfterCleaning) {
  for (const char* name : {"wal", "WAL", "Metadata", "_skippr", "skippr", "deadletters"}) {
    const std::string message =
        ErrorOf(std::string("pipelines:\n  ") + name + ":\n    data_source: data_sources.s\n");
    EXPECT_THAT(message, HasSubstr(std::string("skippr.yml:2:3: pipelines.") + name +
                                   ": Invalid pipeline name '" + name + "': reserved"))
        << name;
  }
  EXPECT_EQ(CleanName("My-Pipe.1"), "my_pipe_1");
}

TEST(ConfigReferences, PipelineNamesThatCleanAlikeAreRefused) {
  const std::string message = ErrorOf(Yaml(R"(
data_sources:
  s: {Sample: {}}
pipelines:
  Rides: {data_source: data_sources.s}
  rides: {data_source: data_sources.s}
)"));
  EXPECT_THAT(message, HasSubstr("skippr.yml:5:3: pipelines.rides: pipeline names 'Rides' and "
                                 "'rides' both become 'rides' on disk and in SQL; rename one"));
}

// A pipeline name is a directory under DATA_DIR and a SQL schema: anything that could be a path
// (or nest one pipeline inside another, "p" and "p/wal") is refused where it is written.
TEST(ConfigReferences, PipelineNamesThatArePathsAreRefusedWithTheirPosition) {
  for (const char* name : {"/tmp/x", "../../up", "a/../../b", "p/wal", "..", "-rides", "my rides",
                           "caf\xc3\xa9", "a b/c"}) {
    const std::string message = ErrorOf(std::string("data_sources:\n  s: {Sample: {}}\npipelines:\n  \"") +
                                         name + "\": {data_source: data_sources.s}\n");
    EXPECT_THAT(message, HasSubstr(std::string("skippr.yml:4:3: pipelines.") + name +
                                   ": Invalid pipeline name '"))
        << name;
    EXPECT_THAT(message, HasSubstr("1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'")) << name;
  }
  const std::string too_long(65, 'a');
  EXPECT_THAT(ErrorOf("data_sources:\n  s: {Sample: {}}\npipelines:\n  " + too_long +
                      ": {data_source: data_sources.s}\n"),
              HasSubstr("Invalid pipeline name '" + too_long + "'"));
  const Config config = ParseOk(std::string("data_sources:\n  s: {Sample: {}}\npipelines:\n  ") +
                                std::string(64, 'b') + ": {data_source: data_sources.s}\n  " +
                                "Rides_2024-eu: {data_source: data_sources.s}\n  _x: {data_source: data_sources.s}\n");
  EXPECT_EQ(config.pipelines.size(), 3u);
  EXPECT_TRUE(CheckPipelineName("rides").ok());
  EXPECT_EQ(CheckPipelineName("../up").code(), StatusCode::kInvalidConfig);
  EXPECT_FALSE(CheckPipelineName("").ok());
  EXPECT_FALSE(CheckPipelineName(std::string("a\0b", 3)).ok());
}

// '-' and '_' clean alike, and DuckDB schemas ignore case: such pairs would share one directory's
// SQL schema.
TEST(ConfigReferences, PipelineNamesDifferingOnlyInCaseOrDashAreRefused) {
  EXPECT_THAT(ErrorOf(Yaml(R"(
data_sources:
  s: {Sample: {}}
pipelines:
  rides-eu: {data_source: data_sources.s}
  RIDES_eu: {data_source: data_sources.s}
)")),
              HasSubstr("pipelines.RIDES_eu: pipeline names 'rides-eu' and 'RIDES_eu' both become "
                        "'rides_eu'"));
}

// Every secret setting's resolved value is learned by the process-wide redactor as it is read.
TEST(ConfigSecrets, ResolvedSecretValuesAreMaskedFromThenOn) {
  ForgetSecretsForTesting();
  ParseOk(Yaml(R"(
data_sources:
  pg:
    Postgres:
      database: shop
      password: ${PG_PASSWORD}
pipelines:
  p: {data_source: data_sources.pg}
)"),
          {{"PG_PASSWORD", "pg-pass-1234"}});
  EXPECT_EQ(Redact("auth failed with pg-pass-1234"), "auth failed with ***");
  EXPECT_EQ(Redact("shop"), "shop") << "only secrets are learned";
  ForgetSecretsForTesting();
}

// ----- pipeline settings ----------------------------------------------------------------------

TEST(ConfigPipeline, DefaultsApply) {
  Config config = ParseOk(Yaml(kMinimal));
  const PipelineConfig& rides = config.pipelines.at("rides");
  EXPECT_EQ(rides.sync_frequency_seconds, 900);
  EXPECT_EQ(rides.data_dir, "./data");
  EXPECT_EQ(rides.data_dir_origin, ValueOrigin::kDefault);
  EXPECT_EQ(rides.StateDir(), "./data/rides");
  EXPECT_FALSE(rides.chaos_mode);
  EXPECT_FALSE(rides.data_sink.has_value());
  EXPECT_FALSE(rides.buffer_threshold_bytes.has_value());
  EXPECT_EQ(rides.transform.type, TransformType::kDefault);
  EXPECT_EQ(config.skippr.store_type, "lmdb");
  EXPECT_EQ(config.skippr.workspace, "default");
}

TEST(ConfigPipeline, DataDirComesFromTheFileThenDataDirThenDefault) {
  Config from_env = ParseOk(Yaml(kMinimal), {{"DATA_DIR", "/srv/skippr"}});
  EXPECT_EQ(from_env.pipelines.at("rides").data_dir, "/srv/skippr");
  EXPECT_EQ(from_env.pipelines.at("rides").data_dir_origin, ValueOrigin::kEnvironment);
  Config from_file = ParseOk(std::string(Yaml(kMinimal)) + "    data_dir: /mnt/rides\n",
                             {{"DATA_DIR", "/srv/skippr"}});
  EXPECT_EQ(from_file.pipelines.at("rides").data_dir, "/mnt/rides");
  EXPECT_EQ(from_file.pipelines.at("rides").StateDir(), "/mnt/rides/rides");
}

TEST(ConfigPipeline, SettingsAreTyped) {
  Config config = ParseOk(std::string(Yaml(kMinimal)) +
                          "    sync_frequency_seconds: 60\n    buffer_threshold_bytes: 1048576\n"
                          "    buffer_threshold_seconds: 5\n    chaos_mode: YES\n");
  const PipelineConfig& rides = config.pipelines.at("rides");
  EXPECT_EQ(rides.sync_frequency_seconds, 60);
  EXPECT_EQ(rides.buffer_threshold_bytes, 1048576);
  EXPECT_EQ(rides.buffer_threshold_seconds, 5);
  EXPECT_TRUE(rides.chaos_mode);
  EXPECT_EQ(
      ErrorOf(std::string(Yaml(kMinimal)) + "    sync_frequency_seconds: 0\n"),
      "skippr.yml:7:29: pipelines.rides.sync_frequency_seconds: 0 is out of range; allowed: 1 "
      "to 9223372036854775807");
  EXPECT_EQ(
      ErrorOf(std::string(Yaml(kMinimal)) + "    chaos_mode: sometimes\n"),
      "skippr.yml:7:17: pipelines.rides.chaos_mode: expected true or false (also yes/no, 1/0), "
      "found 'sometimes'");
}

TEST(ConfigPipeline, FlagGrammarMatchesThePublicProduct) {
  for (const char* yes : {"true", "t", "yes", "1", "TRUE", "Yes"}) {
    EXPECT_TRUE(ParseOk(std::string(Yaml(kMinimal)) + "    chaos_mode: " + yes + "\n")
                    .pipelines.at("rides")
                    .chaos_mode)
        << yes;
  }
  for (const char* no : {"false", "f", "no", "0", "FALSE"}) {
    EXPECT_FALSE(ParseOk(std::string(Yaml(kMinimal)) + "    chaos_mode: " + no + "\n")
                     .pipelines.at("rides")
                     .chaos_mode)
        << no;
  }
}

TEST(ConfigEngine, SkipprBlockWithEnvironmentFallbacks) {
  Config config = ParseOk("skippr:\n  tenant: acme\n  store: {type: sled}\n",
                          {{"WORKSPACE_NAME", "analytics"}, {"TENANT", "ignored"}});
  EXPECT_EQ(config.skippr.workspace, "analytics");
  EXPECT_EQ(config.skippr.tenant, "acme");  // the file wins over TENANT
  EXPECT_EQ(config.skippr.store_type, "lmdb");
  EXPECT_THAT(ErrorOf("skippr:\n  store: {type: dynamodb}\n"),
              HasSubstr("skippr.yml:2:17: skippr.store.type: store type 'dynamodb' needs the "
                        "table"));
  EXPECT_THAT(
      ErrorOf("", {{"SKIPPR_STORE_TYPE", "cloud-tables"}}),
      HasSubstr("skippr.yml: SKIPPR_STORE_TYPE: store type 'cloud-tables' is not available"));
}

TEST(ConfigEngine, WalStorageIsDiskOrS3WithABucketAndAnythingElseFailsStartup) {
  EXPECT_EQ(ParseOk("", {{"WAL_STORAGE", "disk"}}).skippr.wal_storage, WalStorage::kDisk);
  EXPECT_EQ(ParseOk("", {{"WAL_STORAGE", ""}}).skippr.wal_storage, WalStorage::kDisk);
  EXPECT_THAT(ErrorOf("", {{"WAL_STORAGE", "s3"}}),
              HasSubstr("skippr.yml: WAL_STORAGE: 's3' needs a bucket for the segments: set "
                        "SKIPPR_WAL_S3_BUCKET"));
  EXPECT_THAT(ErrorOf("", {{"WAL_STORAGE", "clustered"}}),
              HasSubstr("WAL_STORAGE: 'clustered' is not available in this build"));
  EXPECT_THAT(ErrorOf("", {{"WAL_STORAGE", "tape"}}),
              HasSubstr("WAL_STORAGE: 'tape' is not a WAL storage: use disk (the default) or s3"));

  // Segments under <tenant>/<workspace>/<pipeline>/segments of the WAL bucket, which falls back
  // to skippr_s3_bucket.
  const std::string yaml = std::string(Yaml(kMinimal)) + "skippr:\n  tenant: acme\n";
  Config dedicated = ParseOk(yaml, {{"WAL_STORAGE", "s3"}, {"SKIPPR_WAL_S3_BUCKET", "wal"},
                                    {"SKIPPR_S3_BUCKET", "state"}});
  EXPECT_EQ(dedicated.skippr.wal_storage, WalStorage::kS3);
  EXPECT_EQ(dedicated.pipelines.at("rides").wal_s3_uri, "s3://wal/acme/default/rides/segments");
  Config shared = ParseOk(yaml, {{"WAL_STORAGE", "s3"}, {"SKIPPR_S3_BUCKET", "state"}});
  EXPECT_EQ(shared.pipelines.at("rides").wal_s3_uri, "s3://state/acme/default/rides/segments");
  EXPECT_EQ(ParseOk(yaml).pipelines.at("rides").wal_s3_uri, "");
}

// ----- transform ------------------------------------------------------------------------------

std::string WithTransform(const std::string& transform_yaml) {
  return std::string(Yaml(kMinimal)) + "    transform:\n" + transform_yaml;
}

TEST(ConfigTransform, OpsOfEveryKindAreRead) {
  Config config = ParseOk(WithTransform(R"yaml(      ops:
        - rename: {start_time: started_at}
        - drop: [internal_id, debug]
        - select: [id, amount, email, country]
        - cast: {amount: "decimal(12, 2)", id: long}
        - filter: "amount > 0"
        - derive: {amount_pence: "amount * 100"}
        - hash: email
        - default: {country: GB}
      namespace_fields: "country, city"
      flatten_events: true
)yaml"));
  const TransformConfig& transform = config.pipelines.at("rides").transform;
  ASSERT_EQ(transform.ops.size(), 8u);
  EXPECT_EQ(transform.ops[0].kind, TransformOpKind::kRename);
  EXPECT_EQ(transform.ops[0].pairs[0],
            (std::pair<std::string, std::string>{"start_time", "started_at"}));
  EXPECT_EQ(transform.ops[1].fields, (std::vector<std::string>{"internal_id", "debug"}));
  EXPECT_EQ(transform.ops[2].kind, TransformOpKind::kSelect);
  ASSERT_EQ(transform.ops[3].casts.size(), 2u);
  EXPECT_EQ(transform.ops[3].casts[0].second, LogicalType::Decimal(12, 2).value());
  EXPECT_EQ(transform.ops[3].casts[1].second, LogicalType::Long());
  EXPECT_EQ(transform.ops[4].predicate, "amount > 0");
  EXPECT_EQ(transform.ops[5].pairs[0].second, "amount * 100");
  EXPECT_EQ(transform.ops[6].fields, std::vector<std::string>{"email"});
  EXPECT_EQ(TransformOpName(transform.ops[7].kind), "default");
  EXPECT_EQ(transform.ops[7].pairs[0], (std::pair<std::string, std::string>{"country", "GB"}));
  EXPECT_EQ(transform.namespace_fields, (std::vector<std::string>{"country", "city"}));
  EXPECT_TRUE(transform.flatten_events);
}

TEST(ConfigTransform, OpMistakesAreNamed) {
  EXPECT_EQ(ErrorOf(WithTransform("      ops:\n        - explode: [a]\n")),
            "skippr.yml:9:11: pipelines.rides.transform.ops[0].explode: unknown key 'explode'; "
            "allowed here: rename, drop, select, cast, filter, derive, hash, default");
  EXPECT_EQ(ErrorOf(WithTransform("      ops:\n        - {drop: [a], hash: [b]}\n")),
            "skippr.yml:9:11: pipelines.rides.transform.ops[0]: holds 2 ops (drop and hash); write "
            "one op per list item");
  EXPECT_EQ(ErrorOf(WithTransform("      ops:\n        - cast: {amount: money}\n")),
            "skippr.yml:9:11: pipelines.rides.transform.ops[0].cast.amount: unknown type 'money'; "
            "types are: boolean, int, long, float, double, decimal(p,s), date, time, timestamp, "
            "timestamptz, string, binary, uuid");
  EXPECT_EQ(ErrorOf(WithTransform("      ops:\n        - drop: []\n")),
            "skippr.yml:9:11: pipelines.rides.transform.ops[0].drop: needs at least one field, for "
            "example drop: [email]");
  EXPECT_EQ(ErrorOf(WithTransform("      ops:\n        - filter: \"\"\n")),
            "skippr.yml:9:19: pipelines.rides.transform.ops[0].filter: must not be empty");
}

TEST(ConfigTransform, TypeIsCopyOrDefault) {
  EXPECT_EQ(ParseOk(WithTransform("      type: copy\n")).pipelines.at("rides").transform.type,
            TransformType::kCopy);
  EXPECT_EQ(
      ErrorOf(WithTransform("      type: magic\n")),
      "skippr.yml:8:13: pipelines.rides.transform.type: 'magic' is not allowed; choose one of: "
      "default, copy");
}

TEST(ConfigTransform, CopyCannotSetAggregatesOrOps) {
  EXPECT_EQ(
      ErrorOf(WithTransform(R"(      type: copy
      aggregates:
        - id: totals
          key_fields: [k]
          measures: {n: {count: "*"}}
)")),
      "skippr.yml:9:7: pipelines.rides.transform.aggregates: type: copy cannot set aggregates");
  EXPECT_EQ(ErrorOf(WithTransform("      type: copy\n      ops:\n        - drop: [a]\n")),
            "skippr.yml:9:7: pipelines.rides.transform.ops: type: copy cannot set ops");
}

TEST(ConfigTransform, EnvironmentFallbacksAndTheFileWins) {
  Config from_env = ParseOk(
      Yaml(kMinimal), {{"TRANSFORM_NAMESPACE_FIELDS", "a,b"}, {"TRANSFORM_FLATTEN_EVENTS", "yes"}});
  EXPECT_EQ(from_env.pipelines.at("rides").transform.namespace_fields,
            (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(from_env.pipelines.at("rides").transform.flatten_events);
  Config from_file =
      ParseOk(WithTransform("      namespace_fields: [c]\n      flatten_events: false\n"),
              {{"TRANSFORM_NAMESPACE_FIELDS", "a,b"}, {"TRANSFORM_FLATTEN_EVENTS", "yes"}});
  EXPECT_EQ(from_file.pipelines.at("rides").transform.namespace_fields,
            std::vector<std::string>{"c"});
  EXPECT_FALSE(from_file.pipelines.at("rides").transform.flatten_events);
}

// ----- aggregates -----------------------------------------------------------------------------

std::string WithAggregates(const std::string& aggregates_yaml) {
  return WithTransform("      aggregates:\n" + aggregates_yaml);
}

TEST(ConfigAggregates, NeedsAnId) {
  EXPECT_EQ(ErrorOf(WithAggregates(
                "        - key_fields: [k]\n          measures: {n: {count: \"*\"}}\n")),
            "skippr.yml:9:11: pipelines.rides.transform.aggregates[0]: needs an id: a stable name "
            "such as customer_invoice_totals");
  EXPECT_EQ(ErrorOf(WithAggregates("        - id: 9lives\n          key_fields: [k]\n          "
                                   "measures: {n: {count: \"*\"}}\n")),
            "skippr.yml:9:15: pipelines.rides.transform.aggregates[0].id: id '9lives' must be "
            "letters, digits and '_', not starting with a digit (it names stored state and must "
            "stay stable)");
}

TEST(ConfigAggregates, NeedsNonEmptyKeyFields) {
  EXPECT_EQ(
      ErrorOf(WithAggregates(
          "        - id: a\n          key_fields: []\n          measures: {n: {count: \"*\"}}\n")),
      "skippr.yml:10:11: pipelines.rides.transform.aggregates[0].key_fields: needs at least "
      "one field to group by, for example [customer_id]");
  EXPECT_EQ(
      ErrorOf(WithAggregates("        - id: a\n          measures: {n: {count: \"*\"}}\n")),
      "skippr.yml:9:11: pipelines.rides.transform.aggregates[0].key_fields: needs key_fields: "
      "at least one field to group by, for example [customer_id]");
  EXPECT_THAT(
      ErrorOf(WithAggregates("        - id: a\n          key_fields: [k, k]\n          measures: "
                             "{n: {count: \"*\"}}\n")),
      HasSubstr("skippr.yml:10:11: pipelines.rides.transform.aggregates[0].key_fields: names "
                "'k' twice; each key field once"));
}

TEST(ConfigAggregates, NeedsAtLeastOneMeasure) {
  EXPECT_EQ(
      ErrorOf(
          WithAggregates("        - id: a\n          key_fields: [k]\n          measures: {}\n")),
      "skippr.yml:11:11: pipelines.rides.transform.aggregates[0].measures: needs at least one "
      "measure, for example invoice_total: {sum: amount}");
  EXPECT_EQ(ErrorOf(WithAggregates("        - id: a\n          key_fields: [k]\n")),
            "skippr.yml:9:11: pipelines.rides.transform.aggregates[0].measures: needs at least one "
            "measure, for example invoice_total: {sum: amount}");
}

TEST(ConfigAggregates, EachMeasureIsExactlyOneOfSumOrCount) {
  const std::string both =
      ErrorOf(WithAggregates("        - id: a\n          key_fields: [k]\n          measures:\n    "
                             "        m: {sum: x, count: x}\n"));
  EXPECT_EQ(
      both,
      "skippr.yml:12:13: pipelines.rides.transform.aggregates[0].measures.m: sets both sum and "
      "count; a measure is exactly one of sum: <field> or count: \"*\" | <field>");
  const std::string neither = ErrorOf(WithAggregates(
      "        - id: a\n          key_fields: [k]\n          measures:\n            m: {}\n"));
  EXPECT_EQ(
      neither,
      "skippr.yml:12:13: pipelines.rides.transform.aggregates[0].measures.m: needs exactly one "
      "of sum: <field> or count: \"*\" | <field>");
  const std::string sum_star =
      ErrorOf(WithAggregates("        - id: a\n          key_fields: [k]\n          measures:\n    "
                             "        m: {sum: \"*\"}\n"));
  EXPECT_EQ(sum_star,
            "skippr.yml:12:22: pipelines.rides.transform.aggregates[0].measures.m.sum: sum needs a "
            "field name; '*' only counts rows (count: \"*\")");
  EXPECT_THAT(ErrorOf(WithAggregates("        - id: a\n          key_fields: [k]\n          "
                                     "measures:\n            k: {count: x}\n")),
              HasSubstr("measures.k: measure name 'k' is also a key field"));
}

TEST(ConfigAggregates, CountOfAFieldCountsNonNullValues) {
  Config config =
      ParseOk(WithAggregates("        - id: a\n          key_fields: [k]\n          measures:\n    "
                             "        with_email: {count: email}\n"));
  const AggregateMeasure& measure =
      config.pipelines.at("rides").transform.aggregates[0].measures[0];
  EXPECT_EQ(measure.kind, MeasureKind::kCount);
  EXPECT_EQ(measure.field, "email");
}

TEST(ConfigAggregates, IdsAreUnique) {
  const std::string message = ErrorOf(WithAggregates(R"(        - id: totals
          key_fields: [a]
          measures: {n: {count: "*"}}
        - id: totals
          key_fields: [b]
          measures: {n: {count: "*"}}
)"));
  EXPECT_EQ(
      message,
      "skippr.yml:12:11: pipelines.rides.transform.aggregates[1].id: aggregate id 'totals' is "
      "already used by pipelines.rides.transform.aggregates[0]; ids must be unique");
}

// ----- the canonical aggregate hash -----------------------------------------------------------

std::string HashOf(const std::string& aggregates_yaml) {
  Config config = ParseOk(WithAggregates(aggregates_yaml));
  if (config.pipelines.empty() || config.pipelines.at("rides").transform.aggregates.empty())
    return "";
  return config.pipelines.at("rides").transform.aggregates[0].ConfigHash();
}

TEST(ConfigAggregateHash, SameForReorderedAndReformattedYaml) {
  const std::string block = HashOf(R"(        - id: customer_invoice_totals
          key_fields: [customer_id]
          measures:
            invoice_total: { sum: amount }
            invoice_count: { count: "*" }
)");
  const std::string reordered = HashOf(R"(        - measures:
            invoice_count:
              count: '*'
            invoice_total:
              sum: amount
          key_fields:
            - customer_id
          id: customer_invoice_totals
)");
  const std::string flow = HashOf(
      "        - {measures: {invoice_total: {sum: amount}, invoice_count: {count: \"*\"}}, "
      "id: customer_invoice_totals, key_fields: [customer_id]}\n");
  ASSERT_EQ(block.size(), 64u);
  EXPECT_EQ(block, reordered);
  EXPECT_EQ(block, flow);
}

TEST(ConfigAggregateHash, DifferentWhenIdKeysOrAnyMeasureChanges) {
  const auto hash = [](const std::string& id, const std::string& keys,
                       const std::string& measures) {
    return HashOf("        - id: " + id + "\n          key_fields: " + keys +
                  "\n          measures: " + measures + "\n");
  };
  const std::string base = hash("t", "[customer_id]", "{total: {sum: amount}, n: {count: \"*\"}}");
  EXPECT_NE(base, hash("t", "[customer_id]", "{total: {sum: net_amount}, n: {count: \"*\"}}"));
  EXPECT_NE(base, hash("t", "[customer_id]", "{total: {count: amount}, n: {count: \"*\"}}"));
  EXPECT_NE(base, hash("t", "[customer_id]", "{grand_total: {sum: amount}, n: {count: \"*\"}}"));
  EXPECT_NE(base, hash("t", "[customer_id]", "{total: {sum: amount}, n: {count: id}}"));
  EXPECT_NE(base, hash("t", "[customer_id]", "{total: {sum: amount}}"));
  EXPECT_NE(base, hash("t", "[customer_id, region]", "{total: {sum: amount}, n: {count: \"*\"}}"));
  EXPECT_NE(base, hash("t2", "[customer_id]", "{total: {sum: amount}, n: {count: \"*\"}}"));
  EXPECT_EQ(base, hash("t", "[customer_id]", "{n: {count: \"*\"}, total: {sum: amount}}"));
}

// ----- whole-config rules ---------------------------------------------------------------------

TEST(ConfigWhole, TwoLakeSinksOnOneNamespaceAreAProblem) {
  Config config = ParseOk(Yaml(R"(
data_sinks:
  a:
    SkipprLake: {warehouse: "file:///srv/wh", table_namespace: sales}
  b:
    SkipprLake: {warehouse: "file:///srv/wh/ ", table_namespace: sales}
  c:
    SkipprLake: {warehouse: "file:///srv/wh", table_namespace: other}
deadletter_sinks:
  d:
    Duckdb: {warehouse: "file:///srv/wh", table_namespace: other}
)"));
  const std::vector<ConfigProblem> problems = CheckWholeConfig(config);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].message,
            "skippr.yml:4:3: data_sinks.b: uses warehouse 'file:///srv/wh' and table_namespace "
            "'sales' like data_sinks.a; two sinks on one namespace would overwrite each other's "
            "tables — give each its own table_namespace");
  EXPECT_THAT(problems[1].message,
              HasSubstr("deadletter_sinks.d: uses warehouse 'file:///srv/wh' and "
                        "table_namespace 'other' like data_sinks.c"));
}

// ----- finding the file -----------------------------------------------------------------------

// ----- hostile input: every case a clear error, never a crash or a hang ------------------------

// A reference 50,000 characters long used to overflow the stack in std::regex.
TEST(ConfigHostile, AVeryLongReferenceIsAnErrorNotACrash) {
  const std::string name(50000, 'A');
  const std::string message =
      ErrorOf("data_sources:\n  s:\n    Sample: {rows: \"${" + name + "}\"}\n");
  EXPECT_THAT(message, HasSubstr("skippr.yml:3:20: skippr.yml references ${" + name.substr(0, 80) +
                                 "… (50000 bytes)} at data_sources.s.Sample.rows, but that "
                                 "environment variable is not set"));
  Config config = ParseOk("data_sources:\n  s:\n    Sample: {rows: \"${" + name + "}\"}\n",
                          {{name, "7"}});
  EXPECT_EQ(config.data_sources.at("s").connector.GetInteger("rows"), 7);
}

TEST(ConfigHostile, AVeryLongDotenvLineIsReadOrNamed) {
  const std::string name(100000, 'B');
  Result<std::map<std::string, std::string>> values =
      ParseDotenv(name + "=" + std::string(1 << 20, 'v') + "\n", ".env");
  ASSERT_TRUE(values.ok()) << values.status().message();
  EXPECT_EQ(values->at(name).size(), 1u << 20);
  Result<std::map<std::string, std::string>> broken =
      ParseDotenv(std::string(100000, '-') + "=x\n", ".env");
  ASSERT_FALSE(broken.ok());
  // The name is shown cut to 80 bytes with its length; the value never.
  EXPECT_THAT(broken.status().message(),
              HasSubstr(".env:1:1: '" + std::string(80, '-') +
                        "… (100000 bytes)' is not a variable name; expected NAME=value"));
  EXPECT_LT(broken.status().message().size(), 300u);
}

TEST(ConfigHostile, DeeplyNestedYamlIsAnErrorWithItsPlace) {
  for (const std::string& yaml :
       {"data_sources: " + std::string(100000, '['), std::string(100000, '{'),
        [] {
          std::string text = "pipelines:\n";
          for (int depth = 1; depth < 5000; ++depth) text += std::string(depth, ' ') + "- \n";
          return text;
        }()}) {
    const std::string message = ErrorOf(yaml);
    EXPECT_THAT(message, HasSubstr("levels deep; a configuration nests a few levels"))
        << message.substr(0, 200);
    EXPECT_THAT(message, testing::StartsWith("skippr.yml:"));
  }
}

// "Billion laughs": nine levels of nine aliases would be 387 million nodes if copied.
TEST(ConfigHostile, AnAliasBombCostsNothing) {
  std::string yaml = "data_sources:\n  l0: &l0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 10; ++level) {
    yaml += fmt::format("  l{0}: &l{0} [", level);
    for (int i = 0; i < 9; ++i) yaml += fmt::format("{}*l{}", i ? ", " : "", level - 1);
    yaml += "]\n";
  }
  yaml += "pipelines:\n  p:\n    data_source: data_sources.l9\n    transform:\n"
          "      namespace_fields: *l9\n";
  const std::string message = ErrorOf(yaml);
  EXPECT_THAT(message, HasSubstr("skippr.yml:2:3: data_sources.l0: expected a connector block "
                                 "such as 'File: {path: ...}', found a list"));
  EXPECT_THAT(message, HasSubstr("pipelines.p.transform.namespace_fields[0]: expected a single "
                                 "value, found a list"));
}

TEST(ConfigHostile, OutOfRangeAndNotANumberAreNamed) {
  EXPECT_THAT(ErrorOf("data_sources:\n  s:\n    Sample: {rows: 99999999999999999999}\n"),
              HasSubstr("skippr.yml:3:20: data_sources.s.Sample.rows: 99999999999999999999 is "
                        "out of range; allowed: 0 to 9223372036854775807"));
  EXPECT_THAT(ErrorOf("data_sources:\n  s:\n    Sample: {rows: -99999999999999999999}\n"),
              HasSubstr("-99999999999999999999 is out of range"));
  for (const std::string text : {".nan", "NaN", ".inf", "1e3", "0x10", "12abc"}) {
    EXPECT_THAT(ErrorOf("data_sources:\n  s:\n    Sample: {rows: " + text + "}\n"),
                HasSubstr("data_sources.s.Sample.rows: expected a whole number, found '" + text +
                          "'"));
  }
}

TEST(ConfigHostile, InvalidUtf8KeysAndBinaryTextAreErrors) {
  EXPECT_THAT(ErrorOf("ab\xff" "c: 1\n"), HasSubstr("skippr.yml:1:1: ab\xff" "c: unknown key 'ab\xff" "c'"));
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>((i * 7919) % 256));
  const std::string message = ErrorOf(binary);
  EXPECT_THAT(message, testing::StartsWith("skippr.yml:"));
}

TEST(ConfigHostile, OneLoadListsAHundredProblemsAndCountsTheRest) {
  std::string yaml;
  for (int i = 0; i < 250; ++i) yaml += fmt::format("unknown_{}: 1\n", i);
  const std::string message = ErrorOf(yaml);
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 100);
  EXPECT_THAT(message, HasSubstr("skippr.yml: 150 more problems not listed; fix the ones above "
                                 "first"));
}

class ConfigFiles : public ConfigDirectoryTest {
 protected:
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string ErrorLoading(const std::string& name) {
    MapEnvironment environment;
    Result<Config> config = LoadConfigFile(Path(name), environment);
    EXPECT_FALSE(config.ok());
    return config.ok() ? "" : config.status().message();
  }
};

TEST_F(ConfigFiles, ADirectoryOrAFifoIsNotAConfigurationAndNothingBlocks) {
  std::filesystem::create_directories(Path("skippr.yml"));
  EXPECT_EQ(ErrorLoading("skippr.yml"),
            fmt::format("'{}' is a directory, not a configuration file; point to a YAML (or "
                        ".env) text file",
                        Path("skippr.yml")));
  ASSERT_EQ(::mkfifo(Path("fifo.yml").c_str(), 0600), 0);
  EXPECT_THAT(ErrorLoading("fifo.yml"), HasSubstr("fifo.yml' is a FIFO, not a configuration file"));
  // A .env that is a FIFO: refused too, not waited on.
  std::ofstream(Path("real.yml")) << "skippr: {}\n";
  ASSERT_EQ(::mkfifo(Path(".env").c_str(), 0600), 0);
  EXPECT_THAT(ErrorLoading("real.yml"), HasSubstr(".env' is a FIFO, not a configuration file"));
}

TEST_F(ConfigFiles, AHugeFileIsRefusedBeforeItIsRead) {
  {
    std::ofstream file(Path("skippr.yml"));
    file << "skippr: {}\n";
  }
  std::filesystem::resize_file(Path("skippr.yml"), (16 << 20) + 1);
  EXPECT_EQ(ErrorLoading("skippr.yml"),
            fmt::format("'{}' is 16777217 bytes; a configuration file is at most 16 MiB — is it "
                        "the right file?",
                        Path("skippr.yml")));
}

TEST_F(ConfigFiles, ABinaryFileIsAPositionedYamlError) {
  std::string binary = "\x7f" "ELF\x02\x01\x01";
  binary += std::string(64, '\0');
  for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>((i * 31) % 256));
  std::ofstream(Path("skippr.yml"), std::ios::binary) << binary;
  EXPECT_THAT(ErrorLoading("skippr.yml"), testing::StartsWith(Path("skippr.yml") + ":"));
}

TEST(ConfigFind, SearchOrder) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("skippr-find-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto touch = [&](const std::string& name) { std::ofstream(dir / name) << ""; };
  MapEnvironment shell;
  EXPECT_FALSE(FindConfigFile(std::nullopt, shell, dir.string()).path.has_value());
  touch("skippr.yaml");
  EXPECT_EQ(FindConfigFile(std::nullopt, shell, dir.string()).path, (dir / "skippr.yaml").string());
  touch("skippr.yml");
  EXPECT_EQ(FindConfigFile(std::nullopt, shell, dir.string()).path, (dir / "skippr.yml").string());
  touch("from-env.yml");
  shell.Set("SKIPPR_CONFIG_FILE", (dir / "from-env.yml").string());
  EXPECT_EQ(FindConfigFile(std::nullopt, shell, dir.string()).path,
            (dir / "from-env.yml").string());
  touch("explicit.yml");
  EXPECT_EQ(FindConfigFile((dir / "explicit.yml").string(), shell, dir.string()).path,
            (dir / "explicit.yml").string());
  const ConfigLocation fell_back = FindConfigFile((dir / "typo.yml").string(), shell, dir.string());
  EXPECT_EQ(fell_back.path, (dir / "from-env.yml").string());
  EXPECT_EQ(fell_back.fell_back_from, (dir / "typo.yml").string());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace skippr::config
