// `skipprd sync` from a real PostgreSQL (Debian's, started here): a snapshot of typed tables lands
// in the WAL exactly once — also across SIGKILLs in the middle of its ranges — and `query` shows
// each table equal to the source, column by column.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "e2e/cdc_workload.hpp"
#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "support/postgres_server.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPassword = "pg pass'word";

class PostgresE2e : public PostgresSuite<PostgresE2e> {
 public:
  static PostgresServerOptions ServerOptions() { return {.password = kPassword}; }

 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (HasFatalFailure()) return;
    // Every command resolves the password: sync, and query too.
    dir_.Write(".env", fmt::format("PG_PASSWORD=\"{}\"\n", kPassword));
    dir_.Write("skippr.yml", fmt::format(R"(data_sources:
  pg:
    Postgres:
      host: 127.0.0.1
      port: {}
      user: skippr
      password: ${{PG_PASSWORD}}
      database: {}
      sslmode: disable
      snapshot_parallelism: 2
      batch_size_rows: 500
pipelines:
  shop:
    data_source: data_sources.pg
)",
                                         server_->port(), database_));
  }
  ProcessResult Sync() {
    return Skipprd(dir_, {"sync", "-p", "shop", "--once", "--output", "text"});
  }

  TempDir dir_;
};

// Each column of the test table as PostgreSQL and as `skipprd query` (DuckDB) write it in one
// canonical text form, so the two can be compared value by value.
struct ColumnCheck {
  std::string name;
  std::string postgres;
  std::string duckdb;
};
const std::vector<ColumnCheck>& Checks() {
  static const std::vector<ColumnCheck> kChecks = {
      {"id", "id::text", "CAST(id AS VARCHAR)"},
      {"i", "i::text", "CAST(i AS VARCHAR)"},
      {"big", "big::text", "CAST(big AS VARCHAR)"},
      {"f", "CASE WHEN f = 'NaN' THEN 'nan' WHEN f = 'Infinity' THEN 'inf' WHEN f = '-Infinity' "
            "THEN '-inf' ELSE f::text END",
       // Both print the shortest text that reads back as the same double; DuckDB adds ".0".
       "regexp_replace(CAST(f AS VARCHAR), '\\.0$', '')"},
      {"n", "n::text", "coalesce(CAST(n AS VARCHAR), n_string)"},
      {"b", "b::text", "CAST(b AS VARCHAR)"},
      {"t", "t", "t"},
      {"by", "encode(by, 'hex')", "lower(hex(\"by\"))"},
      {"u", "u::text", "CAST(u AS VARCHAR)"},
      {"dt", "(dt - date '1970-01-01')::text", "CAST(date_diff('day', DATE '1970-01-01', dt) AS VARCHAR)"},
      {"ts", "(extract(epoch from ts) * 1000000)::bigint::text", "CAST(epoch_us(ts) AS VARCHAR)"},
      {"tstz", "(extract(epoch from tstz) * 1000000)::bigint::text", "CAST(epoch_us(tstz) AS VARCHAR)"},
      {"j", "j::text", "j"},
      {"arr", "array_to_string(arr, ',', '~')", "array_to_string(list_transform(arr, x -> coalesce(CAST(x AS VARCHAR), '~')), ',')"},
  };
  return kChecks;
}

TEST_F(PostgresE2e, ASnapshotLandsEveryRowAndQueryEqualsTheSourceColumnByColumn) {
  Sql(R"sql(
    CREATE TABLE items (id bigint PRIMARY KEY, i integer, big bigint, f double precision,
      n numeric(12, 3), b boolean, t text, by bytea, u uuid, dt date, ts timestamp,
      tstz timestamptz, j jsonb, arr integer[]);
    INSERT INTO items SELECT g,
      CASE WHEN g % 7 = 0 THEN NULL ELSE (g * 7919) % 2000000 - 1000000 END,
      CASE WHEN g % 11 = 0 THEN NULL ELSE g::bigint * 1000000007 END,
      CASE g % 13 WHEN 0 THEN 'NaN' WHEN 1 THEN 'Infinity' WHEN 2 THEN '-Infinity'
                  ELSE g / 3.0 END,
      CASE g % 17 WHEN 0 THEN 'NaN' ELSE (g * 12.345)::numeric(12, 3) END,
      CASE WHEN g % 5 = 0 THEN NULL ELSE g % 2 = 0 END,
      CASE WHEN g % 19 = 0 THEN NULL ELSE 'row ' || g || E' tab\t nl\n ' || repeat('é', g % 5) END,
      decode(lpad(to_hex(g), 8, '0'), 'hex'),
      md5(g::text)::uuid,
      date '2000-01-01' + (g % 10000),
      timestamp '1999-12-31 23:59:59.999999' + g * interval '1 minute 1.000001 second',
      timestamptz '2024-06-01 00:00:00+02' - g * interval '3 hours',
      jsonb_build_object('g', g, 'even', g % 2 = 0),
      CASE WHEN g % 23 = 0 THEN NULL ELSE ARRAY[g, NULL, -g] END
    FROM generate_series(1, 3000) g;
  )sql");
  const ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  EXPECT_THAT(sync.out, HasSubstr("rows=3000")) << sync.err;

  // One canonical line per row on each side (tabs and newlines in values made visible).
  std::string postgres_row = "''";
  std::string duckdb_row = "''";
  for (const ColumnCheck& check : Checks()) {
    postgres_row += fmt::format(" || replace(replace(coalesce({}, ''), E'\\t', '<tab>'), E'\\n', "
                                "'<nl>') || '|'",
                                check.postgres);
    duckdb_row += fmt::format(" || replace(replace(coalesce({}, ''), chr(9), '<tab>'), chr(10), "
                              "'<nl>') || '|'",
                              check.duckdb);
  }
  std::vector<std::string> source_rows;
  std::stringstream stream(
      server_->PsqlOrFail("SELECT " + postgres_row + " FROM items ORDER BY id", database_));
  for (std::string line; std::getline(stream, line);) source_rows.push_back(line);
  const std::vector<std::vector<std::string>> landed =
      QueryRows(dir_, "SELECT " + duckdb_row + " FROM shop.postgres_items ORDER BY id");
  ASSERT_EQ(landed.size(), 3000u);
  ASSERT_EQ(source_rows.size(), 3000u);
  for (size_t row = 0; row < landed.size(); ++row) {
    ASSERT_EQ(landed[row].at(0), source_rows[row]) << "row " << row;
  }
  // Declared types, not inferred ones; NaN keeps its text beside the decimal.
  EXPECT_EQ(QueryRow(dir_, "SELECT typeof(n), typeof(u), typeof(tstz), typeof(arr), "
                           "typeof(n_string), typeof(i) FROM shop.postgres_items LIMIT 1"),
            (std::vector<std::string>{"DECIMAL(12,3)", "UUID", "TIMESTAMP WITH TIME ZONE",
                                      "INTEGER[]", "VARCHAR", "INTEGER"}));

  // Snapshot mode reads each table once: a second pass reads nothing.
  const ProcessResult again = Sync();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*) FROM shop.postgres_items")[0], "3000");
}

// Names PostgreSQL allows that a careless reader trips on: quotes, spaces, a dot, columns that
// differ only by case, unicode; values with every COPY escape. The namespace name follows the name
// rules (docs/schema.md): postgres_we_ird__tab_le.
TEST_F(PostgresE2e, UglyNamesAndValuesArriveIntact) {
  Sql(R"sql(CREATE TABLE "we""ird. tab le" (id int PRIMARY KEY, "V" text, "v" text,
              "col with ""quotes"" and spaces" text, "é" int);
            INSERT INTO "we""ird. tab le" VALUES
              (1, E'back\\slash', E'tab\there', E'nl\nand\rcr', 7),
              (2, '', NULL, E'\\N', -1),
              (3, repeat('x', 100000), 'NULL', '"quoted"', NULL);)sql");
  const ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  const std::string source = Sql(
      R"sql(SELECT string_agg(id || '|' || coalesce(md5("V"), '~') || '|' || coalesce(md5("v"), '~')
            || '|' || coalesce(md5("col with ""quotes"" and spaces"), '~') || '|' ||
            coalesce("é"::text, '~'), ';' ORDER BY id) FROM "we""ird. tab le")sql");
  const std::vector<std::vector<std::string>> columns = QueryRows(
      dir_, "SELECT column_name FROM (DESCRIBE shop.postgres_we_ird__tab_le)");
  std::vector<std::string> names;
  for (const auto& row : columns) names.push_back(row.at(0));
  ASSERT_EQ(names.size(), 5u);
  const std::vector<std::string> row = QueryRow(
      dir_, fmt::format("SELECT string_agg(CAST(id AS VARCHAR) || '|' || coalesce(md5(\"{}\"), "
                        "'~') || '|' || coalesce(md5(\"{}\"), '~') || '|' || "
                        "coalesce(md5(\"col with \"\"quotes\"\" and spaces\"), '~') || '|' || "
                        "coalesce(CAST(\"é\" AS VARCHAR), '~'), ';' ORDER BY id) FROM "
                        "shop.postgres_we_ird__tab_le",
                        names[1], names[2]));
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0] + "\n", source) << "columns: " << names[1] << ", " << names[2];
}

TEST_F(PostgresE2e, KillsInTheMiddleOfSnapshotRangesLoseNothingAndDuplicateNothing) {
  // Scaled down under the sanitizers, where every row is dearer.
  const int64_t rows = std::max<int64_t>(Scaled(600000), 60000);
  Sql(fmt::format("CREATE TABLE big (id bigint PRIMARY KEY, pad text); INSERT INTO big SELECT g, "
                  "repeat(md5(g::text), 4) FROM generate_series(1, {}) g;",
                  rows));
  // Commits every ~100 kB, about every other 500-row batch.
  const std::map<std::string, std::string> small_buffers = {{"BUFFER_THRESHOLD_BYTES", "100000"}};
  // Crashes in the middle of snapshot ranges until the snapshot is done, each round's progress
  // checked: at every point the WAL holds each row at most once. A run is killed the n-th time a
  // reader hands a batch over (postgres.snapshot.mid_range@n); the batches in flight between the
  // readers and the WAL are bounded, so with n past that bound every run commits some rows first —
  // whatever the machine's speed — and n a tenth of the table's batches makes about ten rounds.
  const int64_t batches = rows / 500;
  const int64_t crash_at_batch = std::max<int64_t>(40, batches / 10);
  // Discovered first: discover reads (and hands over) batches of its own.
  ASSERT_EQ(Skipprd(dir_, {"discover", "-p", "shop"}).exit_code, 0);
  int partial_kills = 0;
  int64_t committed = 0;
  for (int round = 0; round < 100 && committed < rows; ++round) {
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = fmt::format("postgres.snapshot.mid_range@{}", crash_at_batch);
    Skipprd(dir_, {"sync", "-p", "shop", "--once", "--output", "text"}, env);
    const ProcessResult query = Skipprd(
        dir_, {"query", "--plain", "--sql",
               "SELECT count(*), count(DISTINCT id) FROM shop.postgres_big"});
    ASSERT_EQ(query.exit_code, 0) << "round " << round << " committed nothing: " << query.err;
    const nlohmann::json counts = nlohmann::json::parse(query.out)["rows"][0];
    const int64_t now_committed = std::stoll(counts[0].get<std::string>());
    EXPECT_EQ(counts[0], counts[1]) << "after round " << round;
    EXPECT_GT(now_committed, committed) << "round " << round << " made no progress";
    if (now_committed <= committed) break;
    committed = now_committed;
    if (committed < rows) ++partial_kills;
  }
  EXPECT_GE(partial_kills, 2) << "the kills should land in the middle of the snapshot";
  for (const char* point : {"sync.after_source_read", "sync.before_commit", "sync.after_commit"}) {
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    Skipprd(dir_, {"sync", "-p", "shop", "--once", "--output", "text"}, env);
  }
  const ProcessResult sync = Skipprd(dir_, {"sync", "-p", "shop", "--once", "--output", "text"}, small_buffers);
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  const std::vector<std::string> counts = QueryRow(
      dir_, "SELECT count(*), count(DISTINCT id), sum(id) FROM shop.postgres_big");
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0], std::to_string(rows));
  EXPECT_EQ(counts[1], std::to_string(rows));
  EXPECT_EQ(counts[2], std::to_string(rows * (rows + 1) / 2));
}

// ----- change data capture -------------------------------------------------------------------

// `data_sinks.lake`: SkipprLake at `warehouse`, table namespace `landed`, small landings.
std::string LakeSinkConfig(const std::string& warehouse) {
  return "data_sinks:\n  lake:\n    SkipprLake:\n      warehouse: file://" + warehouse +
         "\n      table_namespace: landed\n      target_file_size_bytes: 1048576\n";
}

// Two long texts equal, or where they first differ.
::testing::AssertionResult SameText(const std::string& actual, const std::string& expected) {
  if (actual == expected) return ::testing::AssertionSuccess();
  const size_t at = static_cast<size_t>(
      std::mismatch(actual.begin(), actual.end(), expected.begin(), expected.end()).first -
      actual.begin());
  const size_t from = at > 80 ? at - 80 : 0;
  return ::testing::AssertionFailure()
         << "differ at byte " << at << " of " << actual.size() << " and " << expected.size()
         << ":\n actual:   ..." << actual.substr(from, 200) << "\n expected: ..."
         << expected.substr(from, 200);
}

class PostgresCdcE2e : public PostgresSuite<PostgresCdcE2e> {
 public:
  static PostgresServerOptions ServerOptions() {
    return {.logical_replication = true, .password = kPassword};
  }

 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (HasFatalFailure()) return;
    dir_.Write(".env", fmt::format("PG_PASSWORD=\"{}\"\n", kPassword));
    WriteConfig("");
  }

  // The source's settings plus `extra` ones, then `rest`: the sinks and pipelines.
  void WriteConfig(const std::string& extra,
                   const std::string& rest = "pipelines:\n  shop:\n    data_source: "
                                             "data_sources.pg\n") {
    dir_.Write("skippr.yml", fmt::format(R"(data_sources:
  pg:
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
{}{})",
                                         server_->port(), database_, database_, extra, rest));
  }
  ProcessResult Sync(std::map<std::string, std::string> env = {}) {
    return Skipprd(dir_, {"sync", "-p", "shop", "--once", "--output", "text"}, std::move(env));
  }

  // The table's rows as one text, in PostgreSQL and as `skipprd query` shows them.
  std::string SourceRows() {
    return Sql("SELECT coalesce(string_agg(id || '|' || coalesce(v, '~') || '|' || "
               "coalesce(n::text, '~'), ';' ORDER BY id), '') FROM accounts");
  }
  std::string QueriedRows() {
    const std::vector<std::string> row = QueryRow(
        dir_, "SELECT coalesce(string_agg(CAST(id AS VARCHAR) || '|' || coalesce(v, '~') || '|' "
              "|| coalesce(CAST(n AS VARCHAR), '~'), ';' ORDER BY id), '') FROM "
              "shop.postgres_accounts");
    return row.empty() ? "<query failed>" : row[0] + "\n";
  }
  // The two as one assertion that stays readable for large tables: where they first differ.
  ::testing::AssertionResult QueryEqualsSource() { return SameText(QueriedRows(), SourceRows()); }

  // The shared randomized workload on `accounts`, synced as `shop` (cdc_workload.hpp).
  CdcRounds Rounds(std::vector<std::string> crash_points, uint32_t seed,
                   int rounds = ScaledRounds(5, 3)) {
    return {.dir = &dir_,
            .pipeline = "shop",
            .sql = [this](const std::string& sql) { Sql(sql); },
            .sync = [this](std::map<std::string, std::string> env) { return Sync(std::move(env)); },
            .crash_points = std::move(crash_points),
            .rounds = rounds,
            .seed = seed};
  }

  TempDir dir_;
};

TEST_F(PostgresCdcE2e, ChangesConvergeToTheSourceAcrossKillsAndTheSlotIsConfirmed) {
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts SELECT g, 'row ' || g, g * 1.5 FROM generate_series(1, 2000) g;");
  int64_t next_id = 2001;
  ProcessResult first = Sync();
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  EXPECT_EQ(QueriedRows(), SourceRows());

  std::mt19937 random(20261202);
  std::uniform_int_distribution<int> delay_ms(20, 400);
  for (int round = 0; round < 6; ++round) {
    Sql(RandomTransactions(random, 60, next_id));
    if (round == 3) {
      // One large transaction: its changes reach the WAL in many commits.
      Sql(fmt::format("INSERT INTO accounts SELECT g, 'bulk', 1 FROM generate_series({}, {}) g",
                      next_id, next_id + 19999));
      next_id += 20000;
    }
    for (int kill = 0; kill < 2; ++kill) {
      SyncAndKillAfter(dir_, "shop", std::chrono::milliseconds(delay_ms(random)),
                       {{"BUFFER_THRESHOLD_BYTES", "200000"}});
    }
    const ProcessResult sync = Sync();
    ASSERT_EQ(sync.exit_code, 0) << "round " << round << ": " << sync.err << sync.out;
    ASSERT_EQ(QueriedRows(), SourceRows()) << "round " << round;
  }
  // Every crash point of the commit protocol, with changes to commit.
  for (const char* point : {"sync.after_source_read", "sync.before_commit", "sync.after_commit"}) {
    Sql(RandomTransactions(random, 20, next_id));
    Sync({{"SKIPPR_CRASH_POINT", point}});
    const ProcessResult sync = Sync();
    ASSERT_EQ(sync.exit_code, 0) << point << ": " << sync.err;
    ASSERT_EQ(QueriedRows(), SourceRows()) << point;
  }
  // The slot has been confirmed up to the server's position: it pins no WAL.
  const std::string lsn = Sql("SELECT pg_current_wal_lsn()");
  ASSERT_EQ(Sync().exit_code, 0);
  EXPECT_EQ(Sql(fmt::format("SELECT confirmed_flush_lsn >= '{}' FROM pg_replication_slots WHERE "
                            "slot_name = 'slot_{}'",
                            lsn.substr(0, lsn.find('\n')), database_)),
            "t\n");
  // `status` shows the slot: how much WAL it keeps on the server and how far behind it is.
  const ProcessResult status = Skipprd(dir_, {"status", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json server = nlohmann::json::parse(status.out)["pipelines"][0]["source_server"];
  EXPECT_EQ(server["what"], "replication slot slot_" + database_);
  EXPECT_EQ(server["facts"]["active"], "false");
  EXPECT_EQ(server["facts"]["wal_status"], "reserved");
  EXPECT_TRUE(server["facts"].contains("retained_wal_bytes"));
  EXPECT_TRUE(server["facts"].contains("behind_server_bytes"));
  const ProcessResult text = Skipprd(dir_, {"status"});
  EXPECT_THAT(text.out, HasSubstr("source server: replication slot slot_" + database_ +
                                  ": exists true, active false, wal_status reserved"));
}

// Transactions larger than the server's logical_decoding_work_mem stream while still in progress
// (pgoutput protocol version 2). They wait in spill files until their commit, so neither an aborted
// one nor a savepoint rolled back inside one reaches the WAL, and kills while they stream or while
// their changes are applied lose nothing and duplicate nothing.
TEST_F(PostgresCdcE2e, TransactionsStreamedWhileInProgressLandOnlyWhenCommitted) {
  // The smallest decoding memory the server allows: any transaction of more than a few hundred
  // rows streams.
  Sql(fmt::format("ALTER DATABASE {} SET logical_decoding_work_mem = '64kB'", database_));
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts SELECT g, 'row ' || g, g FROM generate_series(1, 100) g;");
  ASSERT_EQ(Sync().exit_code, 0);

  // Two large transactions at once, so their streams interleave; inside one, a savepoint rolled
  // back, a released one, key changes and deletes; then one aborted whole.
  std::thread concurrent([&] {
    server_->PsqlOrFail(
        "BEGIN; INSERT INTO accounts SELECT g, 'concurrent', g FROM generate_series(100001, "
        "112000) g; SELECT pg_sleep(0.3); UPDATE accounts SET v = 'concurrent 2' WHERE id BETWEEN "
        "100001 AND 104000; COMMIT;",
        database_);
  });
  Sql("BEGIN; INSERT INTO accounts SELECT g, 'big', g FROM generate_series(1000, 16000) g; "
      "SAVEPOINT s; INSERT INTO accounts SELECT g, 'rolled back', 0 FROM generate_series(200001, "
      "204000) g; UPDATE accounts SET v = 'rolled back' WHERE id < 50; ROLLBACK TO SAVEPOINT s; "
      "SAVEPOINT t; UPDATE accounts SET n = n + 1 WHERE id < 2000; RELEASE SAVEPOINT t; "
      "UPDATE accounts SET id = id + 1000000 WHERE id BETWEEN 1000 AND 1100; "
      "DELETE FROM accounts WHERE id BETWEEN 2000 AND 2500; COMMIT;");
  Sql("BEGIN; INSERT INTO accounts SELECT g, 'aborted', g FROM generate_series(300001, 310000) g; "
      "UPDATE accounts SET v = 'aborted' WHERE id < 10; ROLLBACK;");
  concurrent.join();

  std::mt19937 random(20261203);
  std::uniform_int_distribution<int> delay_ms(50, 1500);
  for (int kill = 0; kill < 4; ++kill) {
    SyncAndKillAfter(dir_, "shop", std::chrono::milliseconds(delay_ms(random)),
                     {{"BUFFER_THRESHOLD_BYTES", "200000"}});
  }
  const ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  EXPECT_TRUE(QueryEqualsSource());
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*) FROM shop.postgres_accounts WHERE v IN ('aborted', "
                           "'rolled back')")[0],
            "0");
  // They did stream: the server counts the transactions it streamed through the slot.
  EXPECT_EQ(Sql(fmt::format("SELECT stream_txns >= 2 FROM pg_stat_replication_slots WHERE "
                            "slot_name = 'slot_{}'",
                            database_)),
            "t\n");
  EXPECT_TRUE(std::filesystem::is_empty(dir_.Sub("data/shop/spill"))) << "spill files are removed";
}

TEST_F(PostgresCdcE2e, ChangesKeepEveryTypeAndAnAddedColumnEvolvesTheNamespace) {
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "CREATE TABLE typed (id int PRIMARY KEY, f double precision, d date, ts timestamptz, "
      "u uuid, b bytea, arr int[], big numeric);");
  ASSERT_EQ(Sync().exit_code, 0);
  Sql("INSERT INTO typed VALUES (1, 'NaN', '0044-03-15 BC', '2024-01-15 10:20:30.123456+02', "
      "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x00ff', '{1,NULL,3}', 'Infinity'), "
      "(2, -1.5e300, '2024-02-29', '-infinity', NULL, '\\x', '{}', 12345678901234567890.0123456789);"
      "ALTER TABLE typed ADD COLUMN note text; "
      "UPDATE typed SET note = 'added', f = 'Infinity' WHERE id = 2; DELETE FROM typed WHERE id = 1; "
      "INSERT INTO typed (id, note) VALUES (3, 'third');");
  const ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  const std::vector<std::vector<std::string>> rows = QueryRows(
      dir_, "SELECT id, CAST(f AS VARCHAR), CAST(d AS VARCHAR), ts_string, CAST(u AS VARCHAR), "
            "hex(b), CAST(arr AS VARCHAR), CAST(big AS VARCHAR), note FROM shop.postgres_typed "
            "ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"2", "inf", "2024-02-29", "-infinity", "", "", "[]",
                                               "12345678901234567890.0123456789", "added"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"3", "", "", "", "", "", "", "", "third"}));
}

// A column's type change drives the namespace when it is a widening (int → bigint, a numeric of
// more digits), a dropped column reads NULL from then on, and any other type change stops the
// pass naming the table, the column and what to do, with the changes before it committed.
TEST_F(PostgresCdcE2e, WideningsEvolveTheNamespaceAndAnIncompatibleTypeChangeStops) {
  Sql("CREATE TABLE typed (id int PRIMARY KEY, amount numeric(10, 2), qty int, label text, "
      "note text); CREATE TABLE other (id int PRIMARY KEY); "
      "INSERT INTO typed VALUES (1, 12345678.91, 7, 'one', 'n1');");
  ASSERT_EQ(Sync().exit_code, 0);
  Sql("ALTER TABLE typed ALTER COLUMN amount TYPE numeric(16, 2); "
      "ALTER TABLE typed ALTER COLUMN qty TYPE bigint; ALTER TABLE typed DROP COLUMN note; "
      "INSERT INTO typed VALUES (2, 12345678901234.56, 1099511627776, 'two'); "
      "UPDATE typed SET label = 'one again' WHERE id = 1;");
  const ProcessResult widened = Sync();
  ASSERT_EQ(widened.exit_code, 0) << widened.err << widened.out;
  EXPECT_EQ(QueryRows(dir_, "SELECT id, CAST(amount AS VARCHAR), qty, label, note FROM "
                            "shop.postgres_typed ORDER BY id"),
            (std::vector<std::vector<std::string>>{
                {"1", "12345678.91", "7", "one again", ""},
                {"2", "12345678901234.56", "1099511627776", "two", ""}}));
  const ProcessResult schema = Skipprd(dir_, {"schema", "-p", "shop", "--output", "json"});
  ASSERT_EQ(schema.exit_code, 0) << schema.err;
  EXPECT_THAT(schema.out, HasSubstr("decimal(16,2)"));

  // text → integer is no widening: the pass stops before the change, naming what to do.
  Sql("INSERT INTO typed VALUES (3, 3, 3, 'before'); "
      "ALTER TABLE typed ALTER COLUMN label TYPE int USING length(label); "
      "INSERT INTO typed VALUES (4, 4, 4, 4);");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const ProcessResult stopped = Sync();
    EXPECT_NE(stopped.exit_code, 0);
    EXPECT_THAT(stopped.err + stopped.out,
                HasSubstr("PostgreSQL table public.typed: column 'label' is now int, but namespace "
                          "'postgres_typed' holds it as string"));
    EXPECT_THAT(stopped.err + stopped.out, HasSubstr("remove it from data_sources.pg.tables"));
  }
  EXPECT_EQ(QueryRow(dir_, "SELECT string_agg(label, ',' ORDER BY id) FROM shop.postgres_typed"),
            std::vector<std::string>{"one again,two,before"})
      << "the change before the type change is committed";
  // Doing what it says: without the table, the pipeline goes on.
  WriteConfig("      tables: [other]\n");
  Sql("INSERT INTO other VALUES (1)");
  const ProcessResult without = Sync();
  ASSERT_EQ(without.exit_code, 0) << without.err << without.out;
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*) FROM shop.postgres_other")[0], "1");
}

TEST_F(PostgresCdcE2e, ATruncateLeavesOnlyTheRowsWrittenAfterIt) {
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts SELECT g, 'old', g FROM generate_series(1, 500) g;");
  ASSERT_EQ(Sync().exit_code, 0);
  Sql("INSERT INTO accounts VALUES (501, 'old', 1); UPDATE accounts SET v = 'older' WHERE id < 10;"
      "BEGIN; INSERT INTO accounts VALUES (502, 'gone', 2); TRUNCATE accounts; "
      "INSERT INTO accounts VALUES (7, 'after', 3); COMMIT;"
      "INSERT INTO accounts VALUES (8, 'later', 4); UPDATE accounts SET n = 5 WHERE id = 7;");
  const ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  EXPECT_EQ(QueriedRows(), SourceRows());
  EXPECT_EQ(QueriedRows(), "7|after|5.00;8|later|4.00\n");
  // And again, with the truncate already in the WAL.
  Sql("TRUNCATE accounts; INSERT INTO accounts VALUES (1, 'fresh', 0);");
  ASSERT_EQ(Sync().exit_code, 0);
  EXPECT_EQ(QueriedRows(), "1|fresh|0.00\n");
}

TEST_F(PostgresCdcE2e, LargeValuesAnUpdateLeftUnchangedKeepTheirValue) {
  // `big` is stored out of line (TOAST): an UPDATE of another column does not send it.
  Sql("CREATE TABLE docs (id int PRIMARY KEY, title text, big text); "
      "CREATE TABLE full_docs (id int PRIMARY KEY, title text, big text); "
      "ALTER TABLE full_docs REPLICA IDENTITY FULL;");
  ASSERT_EQ(Sync().exit_code, 0);
  const std::string large = "(SELECT string_agg(md5((g * i)::text), '') FROM generate_series(1, 300) g)";
  for (const char* table : {"docs", "full_docs"}) {
    Sql(fmt::format("INSERT INTO {0} SELECT i, 'v1', {1} FROM generate_series(1, 20) i; "
                    "UPDATE {0} SET title = 'v2' WHERE id <= 10; "
                    "UPDATE {0} SET title = 'v3', big = 'small now' WHERE id = 3; "
                    "BEGIN; UPDATE {0} SET title = 'v4' WHERE id = 11; "
                    "UPDATE {0} SET big = big || 'x' WHERE id = 12; COMMIT; "
                    "UPDATE {0} SET id = 100 WHERE id = 13;",
                    table, large));
  }
  const ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  for (const char* table : {"docs", "full_docs"}) {
    const std::string source = Sql(fmt::format(
        "SELECT string_agg(id || ':' || title || ':' || md5(big), ';' ORDER BY id) FROM {}", table));
    const std::vector<std::string> queried = QueryRow(
        dir_, fmt::format("SELECT string_agg(CAST(id AS VARCHAR) || ':' || title || ':' || "
                          "coalesce(md5(big), 'NULL'), ';' ORDER BY id) FROM shop.postgres_{}",
                          table));
    ASSERT_EQ(queried.size(), 1u);
    EXPECT_EQ(queried[0] + "\n", source) << table;
  }

  // An UPDATE of many rows that leaves their large values as they are: the values are read back
  // a batch of keys per query, not a query per row.
  Sql(fmt::format("INSERT INTO docs SELECT i, 'v1', {} FROM generate_series(1000, 3999) i", large));
  ASSERT_EQ(Sync().exit_code, 0);
  Sql("UPDATE docs SET title = 'mass' WHERE id >= 1000");
  const auto transactions = [&] {
    return std::stoll(Sql("SELECT xact_commit FROM pg_stat_database WHERE datname = "
                          "current_database()"));
  };
  const int64_t before = transactions();
  const ProcessResult mass = Sync();
  ASSERT_EQ(mass.exit_code, 0) << mass.err << mass.out;
  EXPECT_LT(transactions() - before, 100) << "3,000 changes read their large values";
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*), count(DISTINCT md5(big)) FROM shop.postgres_docs "
                           "WHERE title = 'mass'"),
            (std::vector<std::string>{"3000", Sql("SELECT count(DISTINCT md5(big)) FROM docs WHERE "
                                                  "title = 'mass'").substr(0, 4)}));
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*) FROM shop.postgres_docs WHERE title = 'mass' AND big "
                           "IS NULL")[0],
            "0");
}

// `sync` without --once follows the stream: each time it catches up it commits, so changes become
// queryable while it runs; a kill then loses nothing.
TEST_F(PostgresCdcE2e, WithoutOnceSyncFollowsTheStreamAndCommitsWhenCaughtUp) {
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts VALUES (1, 'first', 1)");
  RunningProcess sync =
      StartProcess(SKIPPRD_BINARY, {"sync", "-p", "shop", "--output", "text"}, OptionsFor(dir_));
  const auto count = [&] {
    const ProcessResult query = Skipprd(
        dir_, {"query", "--plain", "--sql", "SELECT count(*) FROM shop.postgres_accounts"});
    if (query.exit_code != 0) return std::string();
    return nlohmann::json::parse(query.out)["rows"][0][0].get<std::string>();
  };
  // Waits for what the running sync commits (a bound on the wait, not on its speed).
  const auto wait_for = [&](const std::string& expected) {
    for (int attempt = 0; attempt < 600 && count() != expected; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return count();
  };
  EXPECT_EQ(wait_for("1"), "1");
  Sql("INSERT INTO accounts SELECT g, 'more', g FROM generate_series(2, 500) g");
  EXPECT_EQ(wait_for("500"), "500") << "changes are committed while sync runs";
  Sql("DELETE FROM accounts WHERE id > 250");
  EXPECT_EQ(wait_for("250"), "250");
  sync.Kill(SIGKILL);
  sync.Wait();
  Sql("UPDATE accounts SET v = 'after the kill' WHERE id = 1");
  ASSERT_EQ(Sync().exit_code, 0);
  EXPECT_EQ(QueriedRows(), SourceRows());
}

// A sync killed moments before holds its slot until the server notices its connection is gone.
// The next sync waits for the slot (saying so) rather than calling it another process's, and reads
// on once it is released. Here pg_recvlogical holds the slot, with no change pending.
TEST_F(PostgresCdcE2e, ASlotStillHeldByAStoppedReaderIsWaitedFor) {
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts VALUES (1, 'first', 1)");
  ASSERT_EQ(Sync().exit_code, 0);
  const std::string slot = "slot_" + database_;
  RunningProcess holder = StartProcess(
      server_->bin() + "/pg_recvlogical",
      {"-h", "127.0.0.1", "-p", std::to_string(server_->port()), "-U", "skippr", "-d", database_,
       "--slot", slot, "--start", "-o", "proto_version=1", "-o",
       "publication_names=skippr_publication", "-f", "/dev/null"},
      {.set_env = {{"PGPASSWORD", kPassword}}});
  const std::string is_active =
      fmt::format("SELECT active FROM pg_replication_slots WHERE slot_name = '{}'", slot);
  for (int attempt = 0; attempt < 600 && Sql(is_active) != "t\n"; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(Sql(is_active), "t\n") << "pg_recvlogical holds the slot";
  RunningProcess sync = StartProcess(
      SKIPPRD_BINARY, {"sync", "-p", "shop", "--once", "--output", "text", "--log", "info"},
      OptionsFor(dir_));
  // The sync has found the slot held once its connection's last query is its read of the slot
  // (ReadSlot's text, which no other connection here sends).
  const std::string has_read_the_slot =
      "SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%plugin = ''pgoutput'' AND "
      "slot_type%' AND pid <> pg_backend_pid()";
  for (int attempt = 0; attempt < 600 && Sql(has_read_the_slot) != "t\n"; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(Sql(has_read_the_slot), "t\n") << "the sync reads the slot";
  holder.Kill(SIGTERM);
  holder.Wait();
  const ProcessResult waited = sync.Wait();
  ASSERT_EQ(waited.exit_code, 0) << waited.err << waited.out;
  EXPECT_THAT(waited.err + waited.out, HasSubstr("is active; waiting up to 30 s"));
  Sql("UPDATE accounts SET v = 'after the wait' WHERE id = 1; INSERT INTO accounts VALUES (2, "
      "'second', 2)");
  ASSERT_EQ(Sync().exit_code, 0);
  EXPECT_EQ(QueriedRows(), SourceRows());
}

// With heartbeat_interval_seconds, an idle pass writes heartbeat messages into the server's WAL and
// confirms the slot past them: a publication whose tables see no writes pins no server WAL.
TEST_F(PostgresCdcE2e, HeartbeatsLetAnIdleSlotBeConfirmed) {
  WriteConfig("      heartbeat_interval_seconds: 1\n      cdc_idle_timeout_seconds: 3\n");
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2))");
  ASSERT_EQ(Sync().exit_code, 0);
  // An observer slot of its own sees every message written to the WAL from here on.
  Sql(fmt::format("SELECT pg_create_logical_replication_slot('observer_{}', 'test_decoding')",
                  database_));
  const ProcessResult idle = Sync();  // no change arrives: it ends after 3 s of idleness
  ASSERT_EQ(idle.exit_code, 0) << idle.err << idle.out;
  const std::string heartbeats = Sql(fmt::format(
      "SELECT count(*) >= 1, bool_and(lsn <= (SELECT confirmed_flush_lsn FROM "
      "pg_replication_slots WHERE slot_name = 'slot_{0}')) FROM "
      "pg_logical_slot_peek_changes('observer_{0}', NULL, NULL) WHERE data LIKE "
      "'message: transactional: 0 prefix: skippr_heartbeat%'",
      database_));
  EXPECT_EQ(heartbeats, "t|t\n") << "heartbeats were written, and the slot confirmed past them";
  // A value out of range names the setting.
  WriteConfig("      heartbeat_interval_seconds: 0\n");
  const ProcessResult invalid = Sync();
  EXPECT_NE(invalid.exit_code, 0);
  EXPECT_THAT(invalid.err + invalid.out, HasSubstr("heartbeat_interval_seconds"));
}

TEST_F(PostgresCdcE2e, DoctorChecksTheServerTheTablesAndWhatCdcNeeds) {
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "CREATE TABLE logs (line text); CREATE ROLE reader LOGIN PASSWORD 'r' NOSUPERUSER; "
      "GRANT SELECT ON accounts TO reader;");
  ProcessResult doctor = Skipprd(dir_, {"doctor"});
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out;
  EXPECT_THAT(doctor.out, HasSubstr("[ok]   data source 'pg': connected to PostgreSQL 15"));
  EXPECT_THAT(doctor.out, HasSubstr("(no TLS)"));
  EXPECT_THAT(doctor.out, HasSubstr("[ok]   data source 'pg': wal_level = logical"));
  EXPECT_THAT(doctor.out, HasSubstr("[ok]   data source 'pg': table public.accounts → namespace "
                                    "postgres_accounts, key (id)"));
  EXPECT_THAT(doctor.out, HasSubstr("[FAIL] data source 'pg': table public.logs: no primary key "
                                    "and no REPLICA IDENTITY FULL: ALTER TABLE public.logs "
                                    "REPLICA IDENTITY FULL"));
  // Another user: no REPLICATION attribute, and a table it may not read.
  dir_.Write(".env", "PG_PASSWORD=r\n");
  std::ifstream file(dir_.Sub("skippr.yml"));
  std::string config((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  config.replace(config.find("user: skippr"), 12, "user: reader");
  dir_.Write("skippr.yml", config);
  doctor = Skipprd(dir_, {"doctor"});
  EXPECT_EQ(doctor.exit_code, 1);
  EXPECT_THAT(doctor.out, HasSubstr("user reader lacks the REPLICATION attribute: ALTER ROLE "
                                    "reader REPLICATION"));
  EXPECT_THAT(doctor.out, HasSubstr("table public.logs: user reader may not read it: GRANT SELECT "
                                    "ON public.logs TO reader"));
  // A server that cannot be reached: the check fails naming it.
  config.replace(config.find(fmt::format("port: {}", server_->port())),
                 fmt::format("port: {}", server_->port()).size(), "port: 1");
  dir_.Write("skippr.yml", config);
  doctor = Skipprd(dir_, {"doctor"});
  EXPECT_EQ(doctor.exit_code, 1);
  EXPECT_THAT(doctor.out, HasSubstr("[FAIL] data_sources.pg: cannot connect to PostgreSQL "
                                    "reader@127.0.0.1:1/"));
}

// The table's rows as the independent Iceberg reader sees them, as "<id>|<column>|...;..." in id
// order: a string as it is, any other value as its JSON, NULL as "~" (SourceRows' form).
std::string IcebirdRows(const std::string& warehouse, const std::string& table,
                        const std::vector<std::string>& columns) {
  const nlohmann::json read = ReadWithIcebird(warehouse, "landed", table);
  std::vector<std::pair<int64_t, std::string>> ordered;
  for (const nlohmann::json& row : read["rows"]) {
    const int64_t id = row["id"].get<int64_t>();
    std::string line = std::to_string(id);
    for (const std::string& column : columns) {
      const nlohmann::json& value = row[column];
      line += "|" + (value.is_null()     ? std::string("~")
                     : value.is_string() ? value.get<std::string>()
                                         : value.dump());
    }
    ordered.emplace_back(id, std::move(line));
  }
  std::sort(ordered.begin(), ordered.end());
  std::string joined;
  for (const auto& [id, line] : ordered) joined += (joined.empty() ? "" : ";") + line;
  return joined + "\n";
}

// The table's newest metadata.
nlohmann::json NewestMetadata(const std::string& warehouse, const std::string& table) {
  nlohmann::json newest;
  for (const auto& entry :
       std::filesystem::directory_iterator(warehouse + "/landed/" + table + "/metadata")) {
    if (!entry.path().string().ends_with(".metadata.json")) continue;
    std::ifstream file(entry.path());
    nlohmann::json metadata = nlohmann::json::parse(file);
    if (newest.is_null() || metadata["last-sequence-number"] > newest["last-sequence-number"]) {
      newest = std::move(metadata);
    }
  }
  return newest;
}

// The landing ids of the snapshots the table's newest metadata lists, in order (maintenance
// snapshots have none), and how many maintenance snapshots it lists.
std::vector<std::string> LandingIds(const std::string& warehouse, const std::string& table,
                                    int* maintenance_snapshots = nullptr) {
  std::vector<std::string> ids;
  const nlohmann::json metadata = NewestMetadata(warehouse, table);
  for (const nlohmann::json& snapshot : metadata["snapshots"]) {
    const nlohmann::json& summary = snapshot["summary"];
    if (summary.contains("skippr.landing-id")) ids.push_back(summary["skippr.landing-id"]);
    if (maintenance_snapshots != nullptr && summary.contains("skippr.maintenance")) {
      ++*maintenance_snapshots;
    }
  }
  return ids;
}

// The current snapshot's summary number `key`.
int64_t CurrentTotal(const std::string& warehouse, const std::string& table,
                     const std::string& key) {
  const nlohmann::json metadata = NewestMetadata(warehouse, table);
  for (const nlohmann::json& snapshot : metadata["snapshots"]) {
    if (snapshot["snapshot-id"] == metadata["current-snapshot-id"]) {
      return std::stoll(snapshot["summary"][key].get<std::string>());
    }
  }
  return -1;
}

// `aggregates show` of one aggregate as "<value>|<value>|...;..." (a group per ';', its
// `columns` in order, text as it is, numbers as JSON), then a newline: as the source's
// string_agg prints its GROUP BY.
std::string ShownGroups(const TempDir& dir, const std::string& pipeline, const std::string& id,
                        const std::vector<std::string>& columns) {
  const ProcessResult show =
      Skipprd(dir, {"aggregates", "show", "-p", pipeline, "--id", id, "--output", "json"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  std::string joined;
  const nlohmann::json groups = nlohmann::json::parse(show.exit_code == 0 ? show.out : "[]");
  for (const nlohmann::json& group : groups) {
    if (!joined.empty()) joined += ';';
    for (size_t i = 0; i < columns.size(); ++i) {
      const nlohmann::json& value = group[columns[i]];
      joined += (i > 0 ? "|" : "") + (value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  return joined + "\n";
}

constexpr const char* kMaintenanceCrashPoints[] = {"lake.maintenance.after_data_file",
                                                   "lake.maintenance.before_commit",
                                                   "lake.maintenance.after_commit"};

// Crashes a sync at each crash point of table maintenance in `points`: changes the source
// (`change`) and syncs with the crash point set until a sync dies there — a landing's maintenance
// rewrites the table once it holds more than 16 delete files or small data files — then syncs to
// the end and calls `check(point)`. Fails when a point is never reached.
void CrashAtMaintenancePoints(
    const std::vector<const char*>& points, const std::function<void()>& change,
    const std::function<ProcessResult(std::map<std::string, std::string>)>& sync,
    const std::function<void(const std::string&)>& check) {
  for (const char* point : points) {
    bool crashed = false;
    for (int attempt = 0; attempt < 40 && !crashed; ++attempt) {
      change();
      const ProcessResult attempted = sync({{"SKIPPR_CRASH_POINT", point}});
      ASSERT_TRUE(attempted.exit_code == 0 || attempted.exit_code == 128 + SIGKILL)
          << point << ": " << attempted.err << attempted.out;
      crashed = attempted.exit_code != 0;
    }
    EXPECT_TRUE(crashed) << point << " was never reached";
    const ProcessResult synced = sync({});
    ASSERT_EQ(synced.exit_code, 0) << point << ": " << synced.err << synced.out;
    check(point);
    if (::testing::Test::HasFailure()) return;
  }
}

// With a SkipprLake sink, changes land as the source's final state: per key the newest change,
// deletes and primary-key changes applied, a TRUNCATE replacing the table at its place in the
// stream. Across kills during sync and at each crash point of a landing, the table alone (the WAL
// fully landed) equals the source, through query and through an Iceberg reader we did not write,
// and no landing is committed twice.
TEST_F(PostgresCdcE2e, ALakeSinkLandsTheSourcesCurrentRowsAcrossKills) {
  const std::string warehouse = dir_.Sub("warehouse");
  // Small landings: many of them, each a merge into what the earlier ones left.
  WriteConfig("", LakeSinkConfig(warehouse) +
                      "pipelines:\n  shop:\n    data_source: data_sources.pg\n"
                      "    data_sink: data_sinks.lake\n");
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts SELECT g, 'row ' || g, g * 1.5 FROM generate_series(1, 2000) g;");
  int64_t next_id = 2001;
  ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  EXPECT_TRUE(QueryEqualsSource());
  EXPECT_TRUE(SameText(IcebirdRows(warehouse, "postgres_accounts", {"v", "n"}), SourceRows()));

  std::mt19937 random(20261205);
  next_id = RunCdcRounds(
      Rounds({"lake.after_data_file", "lake.after_catalog_commit", "landing.before_store_commit",
              "landing.after_store_commit"},
             20261205),
      next_id, [&](int round) {
        ASSERT_TRUE(QueryEqualsSource()) << "round " << round;
        ASSERT_TRUE(
            SameText(IcebirdRows(warehouse, "postgres_accounts", {"v", "n"}), SourceRows()))
            << "round " << round;
      });
  if (HasFatalFailure()) return;

  // Each sync's landing adds a delete file and a small data file, so one of the next syncs
  // rewrites the table (past 16 of either); a crash at each point of that leaves the table exact.
  CrashAtMaintenancePoints(
      {std::begin(kMaintenanceCrashPoints), std::end(kMaintenanceCrashPoints)},
      [&] { Sql(RandomTransactions(random, 5, next_id)); },
      [&](std::map<std::string, std::string> env) { return Sync(std::move(env)); },
      [&](const std::string& point) {
        EXPECT_TRUE(QueryEqualsSource()) << point;
        EXPECT_TRUE(
            SameText(IcebirdRows(warehouse, "postgres_accounts", {"v", "n"}), SourceRows()))
            << point;
      });
  if (HasFailure()) return;
  int maintenance_snapshots = 0;
  const std::vector<std::string> ids =
      LandingIds(warehouse, "postgres_accounts", &maintenance_snapshots);
  EXPECT_GT(ids.size(), 10u);
  // Maintenance follows a landing: the one crashed before its commit was rolled back (nothing
  // committed), the one crashed after it was finished.
  EXPECT_GE(maintenance_snapshots, 1);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size())
      << "a landing was committed twice";
  // The table stays small however many landings it took.
  EXPECT_LE(CurrentTotal(warehouse, "postgres_accounts", "total-delete-files"), 16);
  EXPECT_LE(CurrentTotal(warehouse, "postgres_accounts", "total-data-files"), 16);
}

// With a DuckDB database sink, changes land as the source's current rows too: per key the newest
// change applied when it is newer than the table's row, its tombstone and its last truncate
// (`_skippr_order_token`, `_skippr_tombstones_<table>`, `_skippr_truncates`). Across kills during
// sync and at each crash point of a landing, DuckDB itself reading the file — and query — sees
// exactly the source's rows, and no landing is applied twice.
TEST_F(PostgresCdcE2e, ADuckdbDatabaseSinkLandsTheSourcesCurrentRowsAcrossKills) {
  const std::string database = dir_.Sub("shop.duckdb");
  WriteConfig("", "data_sinks:\n  duck:\n    Duckdb:\n      database: " + database +
                      "\n      target_file_size_bytes: 1048576\n"
                      "pipelines:\n  shop:\n    data_source: data_sources.pg\n"
                      "    data_sink: data_sinks.duck\n");
  Sql("CREATE TABLE accounts (id bigint PRIMARY KEY, v text, n numeric(10, 2)); "
      "INSERT INTO accounts SELECT g, 'row ' || g, g * 1.5 FROM generate_series(1, 2000) g;");
  const auto database_rows = [&] {
    const std::vector<std::vector<std::string>> rows = ReadDuckdbFile(
        database, "SELECT coalesce(string_agg(CAST(id AS VARCHAR) || '|' || coalesce(v, '~') || "
                  "'|' || coalesce(CAST(n AS VARCHAR), '~'), ';' ORDER BY id), '') FROM "
                  "db.main.postgres_accounts");
    return rows.empty() ? std::string("<read failed>") : rows[0][0] + "\n";
  };
  int64_t next_id = 2001;
  ProcessResult sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  EXPECT_TRUE(SameText(database_rows(), SourceRows()));
  EXPECT_TRUE(QueryEqualsSource());

  // Four rounds: one per crash point. Each ends in a sync that lands: at least five landings with
  // the first sync's.
  RunCdcRounds(Rounds({"duckdb_sink.before_commit", "duckdb_sink.after_commit",
                       "landing.before_store_commit", "landing.after_store_commit"},
                      20261206, ScaledRounds(4, 3)),
               next_id, [&](int round) {
                 ASSERT_TRUE(SameText(database_rows(), SourceRows())) << "round " << round;
                 ASSERT_TRUE(QueryEqualsSource()) << "round " << round;
               });
  if (HasFatalFailure()) return;
  const std::vector<std::vector<std::string>> landings = ReadDuckdbFile(
      database, "SELECT count(*) >= 5, count(*) = count(DISTINCT landing_id) FROM "
                "db.main._skippr_landings");
  ASSERT_EQ(landings.size(), 1u);
  EXPECT_EQ(landings[0], (std::vector<std::string>{"true", "true"}));
}

// The seeds' materialised-view example, verbatim (`data_sources.pg`, `data_sinks.lake`,
// `customer_invoice_totals`), over a randomized workload: amounts and customers updated, invoices
// deleted and renumbered, in multi-statement transactions, another table truncated, and sync
// killed at random. At the end the landed table equals the source column by column (through query
// and through the independent Iceberg reader), the aggregate equals the source's GROUP BY exactly,
// `aggregates verify` passes, and no landing is committed twice. A measure added after the WAL
// was reclaimed rebuilds from the landed table as last-row images: the changes after it stay exact.
TEST_F(PostgresCdcE2e, TheSeedInvoicesExampleLandsAndAggregatesTheSourcesCurrentState) {
  const std::string warehouse = dir_.Sub("warehouse");
  const auto write_config = [&](const std::string& extra_measure) {
    WriteConfig("", LakeSinkConfig(warehouse) + fmt::format(R"(pipelines:
  invoices:
    data_source: data_sources.pg
    data_sink: data_sinks.lake
    transform:
      aggregates:
        - id: customer_invoice_totals
          key_fields: [customer_id]
          measures:
            invoice_total: {{ sum: amount }}
            invoice_count: {{ count: "*" }}{}
)",
                                                            extra_measure));
  };
  write_config("");
  Sql("CREATE TABLE invoices (id bigint PRIMARY KEY, customer_id int NOT NULL, "
      "amount numeric(12, 2) NOT NULL, memo text); "
      "CREATE TABLE notes (id int PRIMARY KEY, body text); "
      "INSERT INTO invoices SELECT g, g % 17, (g * 7919 % 100000) / 100.0, 'm' || g "
      "FROM generate_series(1, 3000) g; "
      "INSERT INTO notes SELECT g, 'note' FROM generate_series(1, 50) g;");
  int64_t next_id = 3001;
  const auto sync = [&](std::map<std::string, std::string> env = {}) {
    return Skipprd(dir_, {"sync", "-p", "invoices", "--once", "--output", "text"}, std::move(env));
  };
  const auto source_rows = [&] {
    return Sql("SELECT coalesce(string_agg(id || '|' || customer_id || '|' || amount || '|' || "
               "coalesce(memo, '~'), ';' ORDER BY id), '') FROM invoices");
  };
  const auto queried_rows = [&] {
    const std::vector<std::string> row = QueryRow(
        dir_, "SELECT coalesce(string_agg(CAST(id AS VARCHAR) || '|' || CAST(customer_id AS "
              "VARCHAR) || '|' || CAST(amount AS VARCHAR) || '|' || coalesce(memo, '~'), ';' "
              "ORDER BY id), '') FROM invoices.postgres_invoices");
    return row.empty() ? "<query failed>" : row[0] + "\n";
  };
  // `aggregates show` as "customer|count|total;..." beside the source's GROUP BY.
  const auto shown_totals = [&] {
    return ShownGroups(dir_, "invoices", "customer_invoice_totals",
                       {"customer_id", "invoice_count", "invoice_total"});
  };
  const auto source_totals = [&] {
    return Sql("SELECT coalesce(string_agg(c || '|' || n || '|' || t, ';' ORDER BY c), '') FROM "
               "(SELECT customer_id AS c, count(*) AS n, sum(amount) AS t FROM invoices "
               "GROUP BY 1) g");
  };
  const auto random_transactions = [&](std::mt19937& random, int transactions) {
    std::string sql;
    for (int t = 0; t < transactions; ++t) {
      sql += "BEGIN;";
      for (int s = std::uniform_int_distribution<int>(1, 5)(random); s > 0; --s) {
        const int64_t target = std::uniform_int_distribution<int64_t>(1, next_id)(random);
        switch (std::uniform_int_distribution<int>(0, 9)(random)) {
          case 0: case 1:
            sql += fmt::format("INSERT INTO invoices VALUES ({}, {}, {}.{:02}, NULL);", next_id,
                               next_id % 23, next_id % 977, next_id % 100);
            ++next_id;
            break;
          case 2: case 3:
            sql += fmt::format("UPDATE invoices SET amount = amount + 1.05 WHERE id = {};", target);
            break;
          case 4:  // a move to another customer: two groups change
            sql += fmt::format("UPDATE invoices SET customer_id = {} WHERE id = {};", target % 29,
                               target);
            break;
          case 5:
            sql += fmt::format("DELETE FROM invoices WHERE id = {};", target);
            break;
          case 6:  // an invoice renumbered: its key changes
            sql += fmt::format("UPDATE invoices SET id = {} WHERE id = {};", next_id++, target);
            break;
          case 7:
            sql += fmt::format("UPDATE invoices SET memo = 'edited {}' WHERE id % 41 = {};", t,
                               target % 41);
            break;
          case 8:
            sql += fmt::format("TRUNCATE notes; INSERT INTO notes VALUES ({}, 'after');", target);
            break;
          default:
            sql += fmt::format("UPDATE invoices SET amount = 0.01, customer_id = 1 WHERE id = {};",
                               target);
        }
      }
      sql += "COMMIT;";
    }
    Sql(sql);
  };
  const auto expect_all_equal = [&](const std::string& when) {
    const std::string source = source_rows();
    EXPECT_TRUE(SameText(queried_rows(), source)) << when << ", query";
    const std::string landed =
        IcebirdRows(warehouse, "postgres_invoices", {"customer_id", "amount", "memo"});
    EXPECT_TRUE(SameText(landed, source)) << when << ", Iceberg reader";
    EXPECT_TRUE(SameText(shown_totals(), source_totals())) << when << ", aggregates show";
    const ProcessResult verify = Skipprd(dir_, {"aggregates", "verify", "-p", "invoices"});
    EXPECT_EQ(verify.exit_code, 0) << when << ": " << verify.out << verify.err;
  };

  ProcessResult synced = sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
  expect_all_equal("after the snapshot");
  std::mt19937 random(20261205);
  std::uniform_int_distribution<int> delay_ms(20, 600);
  for (int round = 0; round < ScaledRounds(4, 3); ++round) {
    random_transactions(random, 80);
    for (int kill = 0; kill < 2; ++kill) {
      SyncAndKillAfter(dir_, "invoices", std::chrono::milliseconds(delay_ms(random)),
                       {{"BUFFER_THRESHOLD_BYTES", "20000"}});
      random_transactions(random, 10);
    }
    if (round == 2) {
      // Everything so far is landed and reclaimed; a new measure rebuilds the aggregate from the
      // landed table, whose rows the changes after it update and delete.
      synced = sync();
      ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
      write_config("\n            memo_count: { count: memo }");
      random_transactions(random, 60);
    }
    synced = sync();
    ASSERT_EQ(synced.exit_code, 0) << "round " << round << ": " << synced.err << synced.out;
    expect_all_equal(fmt::format("round {}", round));
    if (HasFailure()) return;
  }
  // A kill during maintenance, between writing the rewritten files and committing them (the test
  // above crashes at every maintenance point): the aggregate, the landed table and query stay
  // exact.
  CrashAtMaintenancePoints({"lake.maintenance.before_commit"},
                           [&] { random_transactions(random, 4); }, sync,
                           [&](const std::string& point) { expect_all_equal(point); });
  // The rolled-back maintenance runs again after the next landing.
  random_transactions(random, 4);
  synced = sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
  expect_all_equal("after the maintenance ran again");
  int maintenance_snapshots = 0;
  const std::vector<std::string> ids =
      LandingIds(warehouse, "postgres_invoices", &maintenance_snapshots);
  EXPECT_GE(maintenance_snapshots, 1);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size())
      << "a landing was committed twice";
}

// An aggregate finds an entity by its business key, written by three readers: the snapshot (from
// PostgreSQL's text), the change stream (from pgoutput's values) and a rebuild after reclaim (from
// the landed table through DuckDB). A primary key of uuid, timestamptz, numeric, date and text
// must come out as the same bytes from all three, or an update after the snapshot or after a
// rebuild would count its row twice.
TEST_F(PostgresCdcE2e, AKeyOfEveryKindIsOneEntityForTheSnapshotTheStreamAndARebuild) {
  const std::string warehouse = dir_.Sub("warehouse");
  const auto write_config = [&](const std::string& extra_measure) {
    WriteConfig("", LakeSinkConfig(warehouse) + fmt::format(R"(pipelines:
  shop:
    data_source: data_sources.pg
    data_sink: data_sinks.lake
    transform:
      aggregates:
        - id: totals
          key_fields: [grp]
          measures:
            amount_total: {{ sum: amount }}
            row_count: {{ count: "*" }}{}
)",
                                                            extra_measure));
  };
  write_config("");
  Sql("CREATE TABLE items (id uuid, at timestamptz, code numeric(8, 2), day date, name text, "
      "grp int NOT NULL, amount bigint NOT NULL, PRIMARY KEY (id, at, code, day, name)); "
      "INSERT INTO items SELECT md5(g::text)::uuid, timestamptz '2026-01-01 10:00:00.123456+02' "
      "+ g * interval '1 minute 7.5 seconds', g * 1.25 - 100, date '1999-12-31' + g, "
      "'n\"a''m\\e ' || g, g % 7, g FROM generate_series(1, 300) g;");
  const auto shown = [&] {
    return ShownGroups(dir_, "shop", "totals", {"grp", "row_count", "amount_total"});
  };
  const auto expected = [&] {
    return Sql("SELECT coalesce(string_agg(grp || '|' || n || '|' || t, ';' ORDER BY grp), '') "
               "FROM (SELECT grp, count(*) AS n, sum(amount) AS t FROM items GROUP BY 1) g");
  };
  const auto expect_exact = [&](const std::string& when) {
    EXPECT_TRUE(SameText(shown(), expected())) << when;
    const ProcessResult verify = Skipprd(dir_, {"aggregates", "verify", "-p", "shop"});
    EXPECT_EQ(verify.exit_code, 0) << when << ": " << verify.out << verify.err;
  };
  const auto change = [&](int round) {
    Sql(fmt::format("UPDATE items SET amount = amount + 1000, grp = (grp + {0}) % 7 "
                    "WHERE amount % 5 = {0}; DELETE FROM items WHERE amount % 11 = {0}",
                    round));
  };
  ProcessResult synced = Sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
  expect_exact("after the snapshot");
  change(1);
  synced = Sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
  expect_exact("after changes to snapshot rows");
  // The WAL is reclaimed behind the landings: a new measure rebuilds from the landed table.
  write_config("\n            name_count: { count: name }");
  change(2);
  synced = Sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
  expect_exact("after the rebuild");
  change(3);
  synced = Sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err << synced.out;
  expect_exact("after changes to rebuilt rows");
}

TEST_F(PostgresCdcE2e, ATableWithoutKeyOrFullIdentityIsRefusedNamingIt) {
  Sql("CREATE TABLE logs (line text)");
  const ProcessResult sync = Sync();
  EXPECT_NE(sync.exit_code, 0);
  EXPECT_THAT(sync.err + sync.out, HasSubstr("table public.logs has no primary key and no REPLICA "
                                             "IDENTITY FULL"));
  Sql("ALTER TABLE logs REPLICA IDENTITY FULL; INSERT INTO logs VALUES ('a'), ('b')");
  const ProcessResult synced = Sync();
  ASSERT_EQ(synced.exit_code, 0) << synced.err;
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*) FROM shop.postgres_logs")[0], "2");
}

}  // namespace
}  // namespace skippr::testing
