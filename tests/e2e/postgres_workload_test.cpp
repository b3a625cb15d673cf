// The PostgreSQL source's acceptance test: a randomized workload over a table of every supported
// type (NULLs, NaN and ±Infinity, TOASTed values updated with and without changing them, inserts,
// updates, deletes and primary-key changes in multi-statement transactions, savepoints rolled
// back, ADD COLUMN, TRUNCATE, a 1M-row transaction), with `sync` SIGKILLed at random moments —
// in the middle of the snapshot's ranges too — and at each crash point of the commit protocol. At
// the end of every round `query` shows the table equal to the source, column by column, and at the
// end the slot is confirmed up to the server's position.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "support/postgres_server.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

// One column of the table: how to make a random value of it in SQL, and how PostgreSQL and
// `skipprd query` (DuckDB) each write its value as one canonical text, so that the two compare.
struct WorkloadColumn {
  std::string name;
  std::string type;
  std::string random_value;  // an SQL expression; evaluated per row
  std::string postgres_text;
  std::string duckdb_text;
};

// The PostgreSQL side runs with the session settings the source reads with, so that a value kept
// as PostgreSQL's text (interval, timetz, json, ...) prints the same.
constexpr const char* kSessionSettings =
    "SET DateStyle = ISO; SET TimeZone = UTC; SET IntervalStyle = iso_8601; "
    "SET extra_float_digits = 3; SET bytea_output = hex; ";

std::string Maybe(const std::string& expression, double null_share = 0.08) {
  return fmt::format("CASE WHEN random() < {} THEN NULL ELSE {} END", null_share, expression);
}

const std::vector<WorkloadColumn>& Columns() {
  static const std::vector<WorkloadColumn> kColumns = {
      {"i2", "smallint", Maybe("floor(random() * 65535 - 32767)::int2"), "i2::text",
       "CAST(i2 AS VARCHAR)"},
      {"i4", "integer", Maybe("floor(random() * 4e9 - 2e9)::int4"), "i4::text",
       "CAST(i4 AS VARCHAR)"},
      {"i8", "bigint", Maybe("floor(random() * 9e18 - 4.5e18)::int8"), "i8::text",
       "CAST(i8 AS VARCHAR)"},
      {"n", "numeric(12, 4)", Maybe("round((random() * 2e7 - 1e7)::numeric, 4)"), "n::text",
       "CAST(n AS VARCHAR)"},
      // Unconstrained: decimal(38, 10), and what it cannot hold (NaN, ±Infinity, 40 digits) as
      // PostgreSQL wrote it in n_any_string.
      {"n_any", "numeric",
       Maybe("CASE WHEN random() < 0.05 THEN 'NaN'::numeric WHEN random() < 0.05 THEN "
             "'Infinity'::numeric WHEN random() < 0.05 THEN '-Infinity'::numeric WHEN random() < "
             "0.05 THEN floor(random() * 1e9)::numeric * 1e31 ELSE round((random() * 2e6 - "
             "1e6)::numeric, floor(random() * 9)::int) END"),
       "trim_scale(n_any)::text",
       "coalesce(regexp_replace(regexp_replace(CAST(n_any AS VARCHAR), '0+$', ''), '\\.$', ''), "
       "n_any_string)"},
      {"f4", "real",
       Maybe("CASE WHEN random() < 0.04 THEN 'NaN'::real WHEN random() < 0.04 THEN "
             "'Infinity'::real WHEN random() < 0.04 THEN '-Infinity'::real ELSE round((random() * "
             "2000 - 1000)::numeric, 3)::real END"),
       "CASE WHEN f4 = 'NaN' THEN 'nan' WHEN f4 = 'Infinity' THEN 'inf' WHEN f4 = '-Infinity' "
       "THEN '-inf' ELSE f4::text END",
       "regexp_replace(CAST(f4 AS VARCHAR), '\\.0$', '')"},
      {"f8", "double precision",
       Maybe("CASE WHEN random() < 0.04 THEN 'NaN'::float8 WHEN random() < 0.04 THEN "
             "'-Infinity'::float8 ELSE round((random() * 2e6 - 1e6)::numeric, 6)::float8 END"),
       "CASE WHEN f8 = 'NaN' THEN 'nan' WHEN f8 = 'Infinity' THEN 'inf' WHEN f8 = '-Infinity' "
       "THEN '-inf' ELSE f8::text END",
       "regexp_replace(CAST(f8 AS VARCHAR), '\\.0$', '')"},
      {"b", "boolean", Maybe("random() < 0.5"), "b::text", "CAST(b AS VARCHAR)"},
      {"t", "text",
       Maybe("CASE WHEN random() < 0.1 THEN '' WHEN random() < 0.1 THEN E'tab\\there, \"q\" '' "
             "\\\\N é' ELSE md5(random()::text) END"),
       "t", "t"},
      {"vc", "varchar(20)", Maybe("left(md5(random()::text), floor(random() * 20)::int)"), "vc",
       "vc"},
      // char(n) keeps its padding; PostgreSQL's text cast drops it.
      {"ch", "char(5)", Maybe("left(md5(random()::text), floor(random() * 5)::int)"),
       "rpad(ch::text, 5)", "ch"},
      {"ci", "citext", Maybe("'Ab' || left(md5(random()::text), 3)"), "ci::text", "ci"},
      {"by", "bytea",
       Maybe("CASE WHEN random() < 0.1 THEN '\\x'::bytea ELSE decode(md5(random()::text), 'hex') "
             "END"),
       "encode(by, 'hex')", "lower(hex(\"by\"))"},
      {"u", "uuid", Maybe("gen_random_uuid()"), "u::text", "CAST(u AS VARCHAR)"},
      {"d", "date",
       Maybe("CASE WHEN random() < 0.03 THEN 'infinity'::date WHEN random() < 0.03 THEN "
             "'0044-03-15 BC'::date ELSE date '1900-01-01' + floor(random() * 73000)::int END"),
       "CASE WHEN isfinite(d) THEN (d - date '1970-01-01')::text ELSE d::text END",
       "coalesce(CAST(date_diff('day', DATE '1970-01-01', d) AS VARCHAR), d_string)"},
      {"tm", "time",
       Maybe("time '00:00' + floor(random() * 86399999999)::int8 * interval '1 microsecond'"),
       "tm::text", "CAST(tm AS VARCHAR)"},
      {"ttz", "timetz",
       Maybe("(floor(random() * 24)::text || ':' || lpad(floor(random() * 60)::text, 2, '0') || "
             "':07.5+0' || floor(random() * 10)::text)::timetz"),
       "ttz::text", "ttz"},
      {"ts", "timestamp",
       Maybe("CASE WHEN random() < 0.03 THEN '-infinity'::timestamp ELSE timestamp "
             "'1950-01-01' + random() * interval '100 years' END"),
       "CASE WHEN isfinite(ts) THEN (extract(epoch from ts) * 1000000)::bigint::text ELSE "
       "ts::text END",
       "coalesce(CAST(epoch_us(ts) AS VARCHAR), ts_string)"},
      {"tstz", "timestamptz",
       Maybe("timestamptz '1950-01-01 00:00+00' + random() * interval '100 years'"),
       "(extract(epoch from tstz) * 1000000)::bigint::text", "CAST(epoch_us(tstz) AS VARCHAR)"},
      {"iv", "interval",
       Maybe("make_interval(0, floor(random() * 14)::int, 0, floor(random() * 40)::int, "
             "floor(random() * 30)::int, 0, round((random() * 60)::numeric, 3)::float8)"),
       "iv::text", "iv"},
      {"j", "json", Maybe("json_build_object('k', floor(random() * 100), 'a', json_build_array(1, "
                          "'x é', NULL))"),
       "j::text", "j"},
      {"jb", "jsonb", Maybe("jsonb_build_object('k', random(), 'nested', jsonb_build_object('b', "
                            "random() < 0.5))"),
       "jb::text", "jb"},
      {"e", "mood", Maybe("(ARRAY['sad', 'ok', 'happy'])[1 + floor(random() * 3)::int]::mood"),
       "e::text", "e"},
      {"dm", "positive", Maybe("round((random() * 1e6 + 0.001)::numeric, 3)::positive"),
       "dm::text", "CAST(dm AS VARCHAR)"},
      {"arr", "integer[]",
       Maybe("CASE WHEN random() < 0.1 THEN '{}'::int[] ELSE ARRAY[floor(random() * 100)::int, "
             "CASE WHEN random() < 0.3 THEN NULL ELSE 7 END] END"),
       "array_to_string(arr, ',', '~')",
       "CASE WHEN arr IS NOT NULL THEN coalesce(array_to_string(list_transform(arr, x -> "
       "coalesce(CAST(x AS VARCHAR), '~')), ','), '') END"},
      {"tarr", "text[]",
       Maybe("ARRAY[left(md5(random()::text), 4), CASE WHEN random() < 0.3 THEN NULL ELSE 'a, "
             "\"b\"' END]"),
       "array_to_string(tarr, '|', '~')",
       "CASE WHEN tarr IS NOT NULL THEN coalesce(array_to_string(list_transform(tarr, x -> "
       "coalesce(x, '~')), '|'), '') END"},
      {"ip", "inet",
       Maybe("CASE WHEN random() < 0.2 THEN '2001:db8::1/64'::inet ELSE ('10.' || "
             "floor(random() * 255) || '.' || floor(random() * 255) || '.1/24')::inet END"),
       "ip::text", "ip"},
      {"cid", "cidr", Maybe("('192.168.' || floor(random() * 255) || '.0/24')::cidr"),
       "cid::text", "cid"},
      {"mac", "macaddr",
       Maybe("('08:00:2b:01:02:' || lpad(to_hex(floor(random() * 255)::int), 2, '0'))::macaddr"),
       "mac::text", "mac"},
      // Stored out of line (STORAGE EXTERNAL) when large: an UPDATE that leaves it does not send it.
      {"big", "text",
       Maybe("CASE WHEN random() < 0.4 THEN (SELECT string_agg(md5(random()::text || g), '') "
             "FROM generate_series(1, 150) g) ELSE 'small' END"),
       "md5(big)", "md5(big)"},
  };
  return kColumns;
}

// Added by ALTER TABLE halfway through.
const WorkloadColumn& AddedColumn() {
  static const WorkloadColumn kAdded = {"added", "integer", Maybe("floor(random() * 1000)::int"),
                                        "added::text", "CAST(added AS VARCHAR)"};
  return kAdded;
}

class PostgresWorkload : public PostgresSuite<PostgresWorkload> {
 public:
  static PostgresServerOptions ServerOptions() {
    return {.logical_replication = true, .password = "work load"};
  }

 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (HasFatalFailure()) return;
    dir_.Write(".env", "PG_PASSWORD=\"work load\"\n");
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
      snapshot_parallelism: 2
      batch_size_rows: 400
pipelines:
  shop:
    data_source: data_sources.pg
)",
                                         server_->port(), database_, database_));
  }

  std::vector<const WorkloadColumn*> CurrentColumns() const {
    std::vector<const WorkloadColumn*> columns;
    for (const WorkloadColumn& column : Columns()) columns.push_back(&column);
    if (has_added_column_) columns.push_back(&AddedColumn());
    return columns;
  }

  // INSERT of rows [first, last] with random values in every column.
  std::string InsertRandomRows(int64_t first, int64_t last) const {
    std::string names = "id";
    std::string values = "g";
    for (const WorkloadColumn* column : CurrentColumns()) {
      names += ", " + column->name;
      values += ", " + column->random_value;
    }
    return fmt::format("INSERT INTO everything ({}) SELECT {} FROM generate_series({}, {}) g;",
                       names, values, first, last);
  }

  // Random transactions of several statements each, each run by a psql of its own (a command
  // line holds at most 128 KiB).
  void RunRandomTransactions(std::mt19937& random, int transactions) {
    const std::vector<const WorkloadColumn*> columns = CurrentColumns();
    for (int t = 0; t < transactions; ++t) {
      std::string sql = "BEGIN;";
      const int statements = std::uniform_int_distribution<int>(1, 6)(random);
      for (int s = 0; s < statements; ++s) {
        const int64_t target = std::uniform_int_distribution<int64_t>(1, next_id_ - 1)(random);
        const WorkloadColumn& column =
            *columns[std::uniform_int_distribution<size_t>(0, columns.size() - 1)(random)];
        switch (std::uniform_int_distribution<int>(0, 11)(random)) {
          case 0: case 1:
            sql += InsertRandomRows(next_id_, next_id_ + 2);
            next_id_ += 3;
            break;
          case 2: case 3:
            sql += fmt::format("UPDATE everything SET {} = {} WHERE id = {};", column.name,
                               column.random_value, target);
            break;
          case 4:  // many rows at once
            sql += fmt::format("UPDATE everything SET {} = {} WHERE id % 53 = {};", column.name,
                               column.random_value, target % 53);
            break;
          case 5:  // leaves the large value as it is: the stream does not carry it
            sql += fmt::format("UPDATE everything SET i4 = coalesce(i4, 0) / 2 + 1 WHERE id % 211 "
                               "= {};",
                               target % 211);
            break;
          case 6:  // changes the large value
            sql += fmt::format("UPDATE everything SET big = big || 'x' WHERE id = {};", target);
            break;
          case 7: case 8:
            sql += fmt::format("DELETE FROM everything WHERE id = {};", target);
            break;
          case 9:  // a primary-key change: a delete of the old key and an insert of the new one
            sql += fmt::format("UPDATE everything SET id = {} WHERE id = {};", next_id_++, target);
            break;
          case 10:  // a savepoint rolled back: none of it happened
            sql += fmt::format("SAVEPOINT s; DELETE FROM everything WHERE id % 7 = {}; {} "
                               "ROLLBACK TO SAVEPOINT s;",
                               target % 7, InsertRandomRows(next_id_, next_id_ + 1));
            next_id_ += 2;
            break;
          default:
            sql += fmt::format("UPDATE everything SET {0} = NULL WHERE id = {1}; UPDATE everything "
                               "SET {0} = {2} WHERE id = {3};",
                               column.name, target, column.random_value, target + 1);
        }
      }
      Sql(sql + "COMMIT;");
    }
  }

  // Every column of the table hashed in its canonical text, as PostgreSQL and as `query` see it.
  std::vector<std::string> Hashes(bool from_postgres) const {
    std::string select = "count(*)";
    for (const WorkloadColumn* column : CurrentColumns()) {
      const std::string& text = from_postgres ? column->postgres_text : column->duckdb_text;
      select += fmt::format(", md5(coalesce(string_agg(CAST(id AS VARCHAR) || ':' || "
                            "coalesce({}, '~'), ',' ORDER BY id), ''))",
                            text);
    }
    if (from_postgres) {
      const std::string output = server_->PsqlOrFail(
          std::string(kSessionSettings) + "SELECT " + select + " FROM everything", database_);
      std::vector<std::string> hashes;
      std::stringstream fields(output.substr(0, output.find('\n')));
      for (std::string field; std::getline(fields, field, '|');) hashes.push_back(field);
      return hashes;
    }
    return QueryRow(dir_, "SELECT " + select + " FROM shop.postgres_everything");
  }

  // Which columns differ, with the first row that differs in each.
  ::testing::AssertionResult QueryEqualsSource() const {
    const std::vector<std::string> source = Hashes(true);
    const std::vector<std::string> queried = Hashes(false);
    if (source == queried) return ::testing::AssertionSuccess();
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    if (source.empty() || queried.size() != source.size()) {
      return failure << "query returned " << queried.size() << " values for " << source.size();
    }
    failure << "rows: source " << source[0] << ", query " << queried[0];
    const std::vector<const WorkloadColumn*> columns = CurrentColumns();
    for (size_t i = 0; i < columns.size(); ++i) {
      if (source[i + 1] == queried[i + 1]) continue;
      failure << "\ncolumn " << columns[i]->name << " differs; " << FirstDifference(*columns[i]);
    }
    return failure;
  }

  std::string FirstDifference(const WorkloadColumn& column) const {
    const std::string postgres = server_->PsqlOrFail(
        fmt::format("{}SELECT id || '=' || coalesce({}, '~') FROM everything ORDER BY id",
                    kSessionSettings, column.postgres_text),
        database_);
    const std::vector<std::vector<std::string>> queried = QueryRows(
        dir_, fmt::format("SELECT CAST(id AS VARCHAR) || '=' || coalesce({}, '~') FROM "
                          "shop.postgres_everything ORDER BY id",
                          column.duckdb_text));
    std::stringstream lines(postgres);
    std::string line;
    for (const std::vector<std::string>& row : queried) {
      if (!std::getline(lines, line)) return "query has more rows, first " + row[0];
      if (row[0] != line) return "source " + line + ", query " + row[0];
    }
    if (std::getline(lines, line)) return "the source has more rows, first " + line;
    return "no row differs";
  }

  ProcessResult Sync(std::map<std::string, std::string> env = {}) {
    return Skipprd(dir_, {"sync", "-p", "shop", "--once", "--output", "text"}, std::move(env));
  }
  void KillSyncs(std::mt19937& random, int kills, int max_delay_ms) {
    std::uniform_int_distribution<int> delay_ms(30, max_delay_ms);
    for (int kill = 0; kill < kills; ++kill) {
      SyncAndKillAfter(dir_, "shop", std::chrono::milliseconds(delay_ms(random)),
                       {{"BUFFER_THRESHOLD_BYTES", "300000"}});
    }
  }

  TempDir dir_;
  int64_t next_id_ = 1;
  bool has_added_column_ = false;
};

TEST_F(PostgresWorkload, ARandomizedWorkloadOfEveryTypeConvergesAcrossKillsAndCrashPoints) {
  std::string create = "CREATE EXTENSION citext; CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); "
                       "CREATE DOMAIN positive AS numeric(12, 3) CHECK (VALUE > 0); "
                       "CREATE TABLE everything (id bigint PRIMARY KEY";
  for (const WorkloadColumn& column : Columns()) create += ", " + column.name + " " + column.type;
  Sql(create + "); ALTER TABLE everything ALTER COLUMN big SET STORAGE EXTERNAL;");
  // The values no random row may happen to have, so that every sibling column exists.
  Sql("INSERT INTO everything (id, n_any, d, ts) VALUES (1, 'NaN', 'infinity', '-infinity');");
  const int64_t initial_rows = Scaled(20'000, 100);
  Sql(InsertRandomRows(2, initial_rows));
  next_id_ = initial_rows + 1;

  std::mt19937 random(20261202);
  // The snapshot, crashed in the middle of a range, killed at random moments, with changes
  // arriving between the kills.
  ProcessResult sync = Sync({{"SKIPPR_CRASH_POINT", "postgres.snapshot.mid_range"}});
  EXPECT_NE(sync.exit_code, 0) << "postgres.snapshot.mid_range";
  KillSyncs(random, ScaledRounds(2, 1), 700);
  RunRandomTransactions(random, ScaledRounds(20, 5));
  KillSyncs(random, 1, 700);
  sync = Sync();
  ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
  ASSERT_TRUE(QueryEqualsSource()) << "after the snapshot";

  // Received from the server, shaped, about to commit, committed but the slot not confirmed.
  const std::vector<const char*> crash_points = {"postgres.cdc.after_receive",
                                                 "sync.after_source_read", "sync.before_commit",
                                                 "sync.after_commit"};
  for (int round = 0; round < 6; ++round) {
    RunRandomTransactions(random, ScaledRounds(40, 10));
    if (round == 1) {
      Sql("ALTER TABLE everything ADD COLUMN added integer;");
      has_added_column_ = true;
      RunRandomTransactions(random, ScaledRounds(20, 5));
    }
    if (round == 2) {
      // One transaction of a million rows, streamed to spill files while in progress, with kills
      // while it streams and while it is applied; checked by its count and sum, then deleted.
      const int64_t bulk_rows = Scaled(1'000'000, 1000);
      Sql(fmt::format("INSERT INTO everything (id, i4, t) SELECT g, g % 1000, 'bulk' FROM "
                      "generate_series({}, {}) g;",
                      next_id_, next_id_ + bulk_rows - 1));
      next_id_ += bulk_rows;
      KillSyncs(random, ScaledRounds(2, 1), 4000);
      sync = Sync();
      ASSERT_EQ(sync.exit_code, 0) << sync.err << sync.out;
      const std::string bulk = "count(*), sum(i4) FROM everything WHERE t = 'bulk'";
      const std::string source = Sql("SELECT " + bulk);
      EXPECT_EQ(QueryRow(dir_, "SELECT " + bulk.substr(0, bulk.find(" FROM")) +
                                   " FROM shop.postgres_everything WHERE t = 'bulk'"),
                (std::vector<std::string>{source.substr(0, source.find('|')),
                                          source.substr(source.find('|') + 1,
                                                        source.find('\n') - source.find('|') - 1)}));
      Sql("DELETE FROM everything WHERE t = 'bulk';");
    }
    if (round == 3) {
      RunRandomTransactions(random, ScaledRounds(10, 3));
      Sql("BEGIN; TRUNCATE everything;" + InsertRandomRows(next_id_, next_id_ + 999) + "COMMIT;");
      next_id_ += 1000;
    }
    KillSyncs(random, ScaledRounds(2, 1), 1200);
    RunRandomTransactions(random, ScaledRounds(10, 3));
    const char* crash_point = crash_points[static_cast<size_t>(round) % crash_points.size()];
    sync = Sync({{"SKIPPR_CRASH_POINT", crash_point}});
    EXPECT_NE(sync.exit_code, 0) << "crash point " << crash_point;
    sync = Sync();
    ASSERT_EQ(sync.exit_code, 0) << "round " << round << ": " << sync.err << sync.out;
    ASSERT_TRUE(QueryEqualsSource()) << "round " << round;
  }

  // The slot has been confirmed up to the server's position.
  const std::string lsn = Sql("SELECT pg_current_wal_lsn()");
  ASSERT_EQ(Sync().exit_code, 0);
  EXPECT_EQ(Sql(fmt::format("SELECT confirmed_flush_lsn >= '{}' FROM pg_replication_slots WHERE "
                            "slot_name = 'slot_{}'",
                            lsn.substr(0, lsn.find('\n')), database_)),
            "t\n");
}

}  // namespace
}  // namespace skippr::testing
