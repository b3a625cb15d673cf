// The Postgres sink end to end, over Debian's PostgreSQL started by the suite: a file stream lands
// exactly once across SIGKILLs during landing (read back by psql), the table evolves, the write
// policies, types map faithfully, and a PostgreSQL source's changes land as its current rows in
// another database across kills.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "e2e/cdc_workload.hpp"
#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "support/postgres_server.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPassword = "sink pass'word";

class PostgresSinkE2e : public PostgresSuite<PostgresSinkE2e> {
 public:
  static PostgresServerOptions ServerOptions() {
    return {.logical_replication = true, .password = kPassword};
  }

 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (HasFatalFailure()) return;
    dir_.Write(".env", fmt::format("PG_PASSWORD=\"{}\"\n", kPassword));
  }

  // `data_sinks.pg`: this test's database (or `database`), schema `landed`, plus `settings`.
  std::string SinkConfig(const std::string& settings = "", const std::string& database = "") {
    return fmt::format(R"(data_sinks:
  pg:
    Postgres:
      host: 127.0.0.1
      port: {}
      user: skippr
      password: ${{PG_PASSWORD}}
      database: {}
      schema: landed
      sslmode: disable{}
)",
                       server_->port(), database.empty() ? database_ : database, settings);
  }
  // A File source over input/ landing in the sink as pipeline `events`.
  void WriteFileConfig(const std::string& sink_settings = "",
                       const std::string& source_settings = "") {
    dir_.Write("skippr.yml", "data_sources:\n  source:\n    File:\n      path: input" +
                                 source_settings + "\n" + SinkConfig(sink_settings) +
                                 "pipelines:\n  events:\n    data_source: data_sources.source\n"
                                 "    data_sink: data_sinks.pg\n");
  }
  ProcessResult Sync(const std::string& pipeline, std::map<std::string, std::string> env = {}) {
    return Skipprd(dir_, {"sync", "-p", pipeline, "--once", "--output", "text"}, std::move(env));
  }
  // psql's unaligned output of `sql` in `database` (this test's by default), trailing newline cut.
  std::string Psql(const std::string& sql, const std::string& database = "") {
    std::string out = server_->PsqlOrFail(sql, database.empty() ? database_ : database);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  TempDir dir_;
};

TEST_F(PostgresSinkE2e, AFileStreamLandsEveryRowExactlyOnceAcrossKills) {
  WriteFileConfig("\n      target_file_size_bytes: 1048576\n      commit_interval_seconds: 1");
  int64_t expected_rows = Scaled(300000, 10);
  int64_t expected_checksum = WriteInput(dir_, 10, expected_rows);
  const std::map<std::string, std::string> small_buffers = {{"BUFFER_THRESHOLD_BYTES", "2000000"}};
  std::mt19937 random(20261207);
  std::uniform_int_distribution<int> delay_ms(50, 900);
  int kills = 0;
  for (int round = 0; round < 20; ++round) {
    SyncAndKillAfter(dir_, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
    ++kills;
  }
  for (const std::string point : {"postgres_sink.before_commit", "postgres_sink.after_commit",
                                  "landing.before_store_commit", "landing.after_store_commit"}) {
    const int64_t extra_rows = Scaled(20000, 2);
    expected_checksum +=
        WriteInput(dir_, 2, extra_rows, expected_rows, std::string("extra-") + point);
    expected_rows += extra_rows;
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    const ProcessResult crashed = Sync("events", env);
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << point << " was not reached\n" << crashed.err;
    ++kills;
  }
  const ProcessResult final_run = Sync("events");
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err << final_run.out;
  EXPECT_GE(kills, 20);
  EXPECT_EQ(Psql("SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM landed.events"),
            fmt::format("{}|{}|{}", expected_rows, expected_rows, expected_checksum))
      << "after " << kills << " kills";
  EXPECT_EQ(Psql("SELECT sum(rows) = (SELECT count(*) FROM landed.events), count(*) = "
                 "count(DISTINCT landing_id) FROM landed._skippr_landings"),
            "t|t");
}

// `skipprd query` does not read PostgreSQL (reference §8.1: a non-Iceberg sink's view is the live
// WAL): while a sync lands, every query succeeds and counts each live row once; psql sees them all
// at the end.
TEST_F(PostgresSinkE2e, QueryDuringASyncShowsTheLiveWalConsistently) {
  WriteFileConfig("\n      target_file_size_bytes: 1048576\n      commit_interval_seconds: 1");
  const int64_t rows = Scaled(300000, 6);
  WriteInput(dir_, 6, rows);
  RunningProcess sync =
      StartProcess(SKIPPRD_BINARY, {"sync", "-p", "events", "--once", "--output", "text"},
                   OptionsFor(dir_, {{"BUFFER_THRESHOLD_BYTES", "2000000"}}));
  int answered = 0;
  bool running = true;
  for (int attempt = 0; attempt < 2000 && running; ++attempt) {
    running = waitpid(sync.pid(), nullptr, WNOHANG) == 0;
    const ProcessResult query = Skipprd(
        dir_,
        {"query", "--plain", "--sql", "SELECT count(*), count(DISTINCT id) FROM events.events"});
    if (query.exit_code != 0) {
      EXPECT_EQ(answered, 0) << query.err;  // before the first commit there is no table yet
      continue;
    }
    const auto json = nlohmann::json::parse(query.out);
    const int64_t count = std::stoll(json["rows"][0][0].get<std::string>());
    EXPECT_EQ(json["rows"][0][1].get<std::string>(), std::to_string(count)) << "a row twice";
    EXPECT_LE(count, rows);
    ++answered;
  }
  const ProcessResult finished = sync.Wait();
  EXPECT_EQ(finished.exit_code, 0) << finished.err;
  EXPECT_GE(answered, 1);
  EXPECT_EQ(Psql("SELECT count(*), count(DISTINCT id) FROM landed.events"),
            fmt::format("{}|{}", rows, rows));
}

TEST_F(PostgresSinkE2e, ANewColumnAndAWidenedIntegerLandAsAlterTable) {
  WriteFileConfig();
  dir_.Write("input/1.jsonl", "{\"id\": 1, \"n\": 5}\n{\"id\": 2, \"n\": 6}\n");
  const ProcessResult first = Sync("events");
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  const std::string type_of_n =
      "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
      "'landed.events'::regclass AND attname = 'n'";
  EXPECT_EQ(Psql(type_of_n), "integer");
  dir_.Write("input/2.jsonl",
             "{\"id\": 3, \"n\": 9000000000, \"note\": \"wi\\tde\\\\\"}\n{\"id\": 4, \"n\": 7}\n");
  const ProcessResult second = Sync("events");
  ASSERT_EQ(second.exit_code, 0) << second.err << second.out;
  EXPECT_EQ(Psql(type_of_n), "bigint");
  EXPECT_EQ(Psql("SELECT count(*), sum(n), string_agg(note, ',') = E'wi\\tde\\\\' FROM "
                 "landed.events"),
            "4|9000000018|t");
}

// PostgreSQL would cut a name past 63 bytes silently: the landing stops, naming the field, and
// nothing of it is written; the rows stay in the WAL.
TEST_F(PostgresSinkE2e, AFieldNameTooLongForPostgresqlIsAClearError) {
  WriteFileConfig();
  const std::string name(70, 'n');
  dir_.Write("input/1.jsonl", "{\"id\": 1, \"" + name + "\": 2}\n");
  const ProcessResult sync = Sync("events");
  EXPECT_NE(sync.exit_code, 0);
  EXPECT_THAT(sync.err + sync.out,
              HasSubstr("field '" + name + "' is 70 bytes, longer than a PostgreSQL column name"));
  EXPECT_EQ(Psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'landed' AND tablename = "
                 "'events'"),
            "0");
}

TEST_F(PostgresSinkE2e, ReplaceTableAndMergeByKey) {
  WriteFileConfig("\n      write_policy: merge_by_key", "\n      primary_key: [id]");
  dir_.Write("input/1.jsonl",
             "{\"id\": 1, \"v\": \"a\"}\n{\"id\": 2, \"v\": \"b\"}\n"
             "{\"id\": 1, \"v\": \"c\"}\n");
  const ProcessResult first = Sync("events");
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  dir_.Write("input/2.jsonl", "{\"id\": 2, \"v\": \"d\"}\n{\"id\": 3, \"v\": \"e\"}\n");
  // Killed after its transaction committed, before the store recorded it: the replay is a no-op.
  EXPECT_EQ(Sync("events", {{"SKIPPR_CRASH_POINT", "postgres_sink.after_commit"}}).exit_code,
            128 + SIGKILL);
  const ProcessResult replayed = Sync("events");
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err << replayed.out;
  EXPECT_EQ(Psql("SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM landed.events"),
            "1=c,2=d,3=e");
  EXPECT_EQ(Psql("SELECT count(*) FROM landed._skippr_landings"), "2");

  Psql("DROP SCHEMA landed CASCADE");
  dir_.Write("skippr.yml", "data_sources:\n  source:\n    File:\n      path: input2\n" +
                               SinkConfig("\n      write_policy: replace_table") +
                               "pipelines:\n  again:\n    data_source: data_sources.source\n"
                               "    data_sink: data_sinks.pg\n");
  dir_.Write("input2/1.jsonl", "{\"id\": 1}\n{\"id\": 2}\n");
  ASSERT_EQ(Sync("again").exit_code, 0);
  dir_.Write("input2/2.jsonl", "{\"id\": 3}\n");
  ASSERT_EQ(Sync("again").exit_code, 0);
  EXPECT_EQ(Psql("SELECT count(*), sum(id) FROM landed.again"), "1|3");
}

// A PostgreSQL table of many types through the PostgreSQL source into the sink in another
// database: each column has the same type and the same text on both sides.
TEST_F(PostgresSinkE2e, TypesMapFaithfully) {
  const std::string sink_database = database_ + "_sink";
  server_->PsqlOrFail("CREATE DATABASE " + sink_database);
  Sql("CREATE TABLE things (id bigint PRIMARY KEY, d numeric(12,3), r double precision, "
      "ts timestamptz, t timestamp, day date, u uuid, b bytea, arr integer[], tags text[], "
      "flag boolean, note text); "
      "INSERT INTO things VALUES (1, 123456789.125, 2.5, '2024-01-15 10:30:00.123456+02', "
      "'2024-01-15 10:30:00', '2024-02-29', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
      "'\\x00ff10', '{1,NULL,3}', '{\"a,b\",\"c\\\"d\",NULL}', true, E'tab\\there'), "
      "(2, NULL, 'NaN', NULL, NULL, NULL, NULL, NULL, '{}', NULL, NULL, NULL)");
  dir_.Write("skippr.yml", fmt::format(R"(data_sources:
  src:
    Postgres:
      host: 127.0.0.1
      port: {}
      user: skippr
      password: ${{PG_PASSWORD}}
      database: {}
      sslmode: disable
{}pipelines:
  shop:
    data_source: data_sources.src
    data_sink: data_sinks.pg
)",
                                       server_->port(), database_, SinkConfig("", sink_database)));
  const ProcessResult sync = Sync("shop");
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  const std::string columns = "id, d, r, ts, t, day, u, b, arr, tags, flag, note";
  const std::string types =
      "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY "
      "attnum) FROM pg_attribute WHERE attrelid = '{}'::regclass AND attnum > 0 AND NOT "
      "attisdropped AND attname NOT LIKE '\\_skippr%'";
  const auto of = [](const std::string& sql, const std::string& table) {
    return fmt::format(fmt::runtime(sql), table);
  };
  EXPECT_EQ(Psql(of(types, "landed.postgres_things"), sink_database), Psql(of(types, "things")));
  const std::string rows = "SELECT " + columns + " FROM {} ORDER BY id";
  EXPECT_EQ(Psql(of(rows, "landed.postgres_things"), sink_database), Psql(of(rows, "things")));
  server_->Psql("DROP DATABASE IF EXISTS " + sink_database + " WITH (FORCE)");
}

// Random transactions (inserts, updates, key changes, deletes, TRUNCATE) on a PostgreSQL source,
// landed in another database's PostgreSQL sink across kills and at each crash point: the sink's
// table equals the source's column by column, and no landing is applied twice.
TEST_F(PostgresSinkE2e, ASourcesChangesLandAsItsCurrentRowsAcrossKills) {
  const std::string sink_database = database_ + "_sink";
  server_->PsqlOrFail("CREATE DATABASE " + sink_database);
  dir_.Write("skippr.yml",
             fmt::format(R"(data_sources:
  src:
    Postgres:
      host: 127.0.0.1
      port: {}
      user: skippr
      password: ${{PG_PASSWORD}}
      database: {}
      sslmode: disable
      cdc_mode: snapshot_then_cdc
      replication_slot_name: slot_{}
      batch_size_rows: 300
{}pipelines:
  shop:
    data_source: data_sources.src
    data_sink: data_sinks.pg
)",
                         server_->port(), database_, database_,
                         SinkConfig("\n      target_file_size_bytes: 1048576", sink_database)));
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts SELECT g, 'row ' || g, g * 1.5 FROM generate_series(1, 2000) g;");
  const std::string rows =
      "SELECT coalesce(string_agg(id || '|' || coalesce(v, '~') || '|' || coalesce(n::text, '~'), "
      "';' ORDER BY id), '') FROM ";
  const auto same = [&](const std::string& context) {
    const std::string source = Psql(rows + "accounts");
    const std::string landed = Psql(rows + "landed.postgres_accounts", sink_database);
    EXPECT_EQ(landed.size(), source.size()) << context;
    return landed == source;
  };
  ProcessResult sync = Sync("shop");
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  EXPECT_TRUE(same("snapshot"));

  RunCdcRounds(
      {.dir = &dir_,
       .pipeline = "shop",
       .sql = [this](const std::string& sql) { Sql(sql); },
       .sync =
           [this](std::map<std::string, std::string> env) { return Sync("shop", std::move(env)); },
       .crash_points = {"postgres_sink.before_commit", "postgres_sink.after_commit",
                        "landing.before_store_commit", "landing.after_store_commit"},
       .rounds = ScaledRounds(5, 3),
       .seed = 20261208},
      2001, [&](int round) { ASSERT_TRUE(same(fmt::format("round {}", round))); });
  if (HasFatalFailure()) return;
  EXPECT_EQ(Psql("SELECT count(*) > 5, count(*) = count(DISTINCT landing_id) FROM "
                 "landed._skippr_landings",
                 sink_database),
            "t|t");
  server_->Psql("DROP DATABASE IF EXISTS " + sink_database + " WITH (FORCE)");
}

TEST_F(PostgresSinkE2e, DoctorChecksTheServerAndThePrivileges) {
  WriteFileConfig();
  Sql("CREATE ROLE reader LOGIN PASSWORD 'sink pass''word'");
  ProcessResult doctor = Skipprd(dir_, {"doctor"});
  EXPECT_EQ(doctor.exit_code, 0) << doctor.out << doctor.err;
  EXPECT_THAT(doctor.out, HasSubstr(fmt::format("data_sinks.pg.Postgres: PostgreSQL "
                                                "skippr@127.0.0.1:{}/{}, schema landed reachable",
                                                server_->port(), database_)));
  EXPECT_THAT(doctor.out, HasSubstr("schema 'landed' will be created; user skippr may create"));
  dir_.Write(
      "skippr.yml", "data_sources:\n  source:\n    File:\n      path: input\n" +
                        [&] {
                          std::string config = SinkConfig();
                          config.replace(config.find("user: skippr"), 12, "user: reader");
                          return config;
                        }() +
                        "pipelines:\n  events:\n    data_source: data_sources.source\n"
                        "    data_sink: data_sinks.pg\n");
  doctor = Skipprd(dir_, {"doctor"});
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out;
  EXPECT_THAT(doctor.out, HasSubstr("user reader may not create schema 'landed'; GRANT CREATE ON "
                                    "DATABASE"));
  Sql("DROP OWNED BY reader; DROP ROLE reader");
}

}  // namespace
}  // namespace skippr::testing
