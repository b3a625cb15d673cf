// bench/postgres: the PostgreSQL source against PostgreSQL's own tools, on one server this
// benchmark starts (Debian's, as the tests start it), in one run:
//   snapshot   `skipprd sync --once` (cdc_mode snapshot, 1 and 2 connections) of a table against
//              `psql -c "COPY table TO STDOUT" > /dev/null`;
//   changes    `skipprd sync --once` over a stream of updates (cdc_mode snapshot_then_cdc) against
//              `pg_recvlogical` decoding the same changes with pgoutput to /dev/null;
//   large      peak RSS of the sync that reads one transaction of many rows (5M; streamed by the
//              server while in progress, spilled to disk until its commit).
// Ratios are baseline seconds / skipprd seconds: higher is better, 1.0 is parity.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "bench_common.hpp"
#include "support/postgres_server.hpp"

namespace fs = std::filesystem;
using namespace skippr::bench;

namespace {

struct Options {
  uint64_t rows = kDefaultRows;
  uint64_t changes = 500'000;
  uint64_t large_transaction_rows = 5'000'000;
  fs::path skipprd;
  fs::path dir;
};

Options ParseOptions(int argc, char** argv) {
  Options options;
  BenchArgs args(argc, argv, "--rows N, --changes N, --large N, --quick, --skipprd PATH, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      options.rows = args.Unsigned();
    } else if (args.Is("--changes")) {
      options.changes = args.Unsigned();
    } else if (args.Is("--large")) {
      options.large_transaction_rows = args.Unsigned();
    } else if (args.Is("--quick")) {
      options.rows = kQuickRows;
      options.changes = 50'000;
      options.large_transaction_rows = 200'000;
    } else if (args.Is("--skipprd")) {
      options.skipprd = args.Value();
    } else if (args.Is("--dir")) {
      options.dir = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  ResolveSkipprdAndDir(options.skipprd, options.dir);
  return options;
}

class Bench {
 public:
  Bench(Options options, Launcher& launcher)
      : options_(std::move(options)), launcher_(launcher), work_(MakeWorkDir(options_.dir)) {
    std::string why_not;
    server_ = skippr::testing::PostgresServer::Start({.logical_replication = true}, &why_not);
    if (!server_) Fail("cannot start PostgreSQL: " + why_not);
  }
  ~Bench() { fs::remove_all(work_); }

  void Run() {
    Sql("CREATE DATABASE bench");
    Sql(fmt::format(
        "CREATE TABLE rides (id bigint PRIMARY KEY, station int, amount numeric(10, 2), rider "
        "text, comment text, is_member boolean, started_at timestamptz); INSERT INTO rides "
        "SELECT g, g % 5000, (g % 100000) / 100.0, 'rider ' || (g % 9973), repeat('ok ', 1 + g % "
        "12), g % 3 = 0, timestamptz '2024-01-01' + g * interval '1 second' FROM "
        "generate_series(1, {}) g;",
        options_.rows),
        "bench");
    Sql("VACUUM ANALYZE rides", "bench");
    fmt::print("bench/postgres: {} rows, PostgreSQL on loopback, skipprd {}\n", options_.rows,
               options_.skipprd.string());
    Snapshot();
    Changes();
    LargeTransaction();
    Lag();
  }

 private:
  std::string Sql(const std::string& sql, const std::string& database = "postgres") {
    auto [status, output] = server_->Psql(sql, database);
    if (status != 0) Fail(fmt::format("psql failed: {}\n{}", output, sql));
    return output;
  }

  double TimeShell(const std::string& command) {
    const ChildRun run = launcher_.Run({{"/bin/sh", "-c", command}, ChildEnvironment({}),
                                        work_ / "shell.err"});
    if (run.exit_code != 0) Fail(fmt::format("`{}` failed: {}", command, FileText(work_ / "shell.err")));
    return run.seconds;
  }

  // skippr.yml of pipeline `name` reading `table` in `mode`; the slot and publication are named
  // after the pipeline.
  fs::path WriteConfig(const std::string& name, const std::string& table, const std::string& mode,
                       int parallelism) {
    const fs::path config = work_ / (name + ".yml");
    std::ofstream(config) << fmt::format(R"(data_sources:
  pg:
    Postgres:
      host: 127.0.0.1
      port: {}
      user: skippr
      database: bench
      sslmode: disable
      tables: [{}]
      cdc_mode: {}
      snapshot_parallelism: {}
      replication_slot_name: {}_slot
      publication_name: {}_publication
pipelines:
  {}:
    data_source: data_sources.pg
)",
                                         server_->port(), table, mode, parallelism, name, name,
                                         name);
    return config;
  }

  SyncRun Sync(const fs::path& config, const std::string& pipeline, uint64_t expected_rows,
               bool keeps_data_dir) {
    return RunSkipprdSync(launcher_, options_.skipprd, config, pipeline, work_ / "data",
                          work_ / "sync.err", expected_rows, keeps_data_dir);
  }

  void Snapshot() {
    const std::string copy = fmt::format(
        "psql -X -q -h 127.0.0.1 -p {} -U skippr -d bench -c 'COPY rides TO STDOUT' > /dev/null",
        server_->port());
    const std::string size = Sql("SELECT pg_table_size('rides')", "bench");
    const uint64_t table_bytes = std::stoull(size);
    const double psql_seconds = BestOfSeconds([&] { return TimeShell(copy); });
    fmt::print("snapshot    psql COPY TO STDOUT > /dev/null   {}\n",
               Throughput(psql_seconds, options_.rows, table_bytes));
    for (int connections : {1, 2}) {
      const fs::path config = WriteConfig("snap", "rides", "snapshot", connections);
      uint64_t peak_kib = 0;
      const double seconds = BestOfSeconds([&] {
        const SyncRun run = Sync(config, "snap", options_.rows, false);
        peak_kib = std::max(peak_kib, run.peak_rss_kib);
        return run.seconds;
      });
      fmt::print("snapshot    skipprd, {} connection(s)          {}   ratio {:.2f}   peak RSS {:.0f} MiB\n",
                 connections, Throughput(seconds, options_.rows, table_bytes), psql_seconds / seconds,
                 peak_kib / kKibPerMib);
    }
  }

  void Changes() {
    const fs::path config = WriteConfig("cdc", "rides", "snapshot_then_cdc", 2);
    Sync(config, "cdc", options_.rows, false);  // the snapshot, and the slot
    Sql("SELECT pg_create_logical_replication_slot('baseline_slot', 'pgoutput')", "bench");
    // The same stream for both: updates in transactions of 1,000 rows.
    Sql(fmt::format("DO $$ BEGIN FOR batch_start IN 1..{} BY 1000 LOOP UPDATE rides SET amount = amount "
                    "+ 1 WHERE id >= batch_start AND id < batch_start + 1000; COMMIT; END LOOP; END $$;",
                    options_.changes),
        "bench");
    const std::string end_lsn = Sql("SELECT pg_current_wal_lsn()", "bench");
    const double recvlogical_seconds = TimeShell(fmt::format(
        "pg_recvlogical -h 127.0.0.1 -p {} -U skippr -d bench -S baseline_slot --start "
        "--endpos={} -o proto_version=1 -o publication_names=cdc_publication -f /dev/null",
        server_->port(), end_lsn.substr(0, end_lsn.find('\n'))));
    const SyncRun run = Sync(config, "cdc", options_.changes, true);
    fmt::print("changes     pg_recvlogical (pgoutput) > /dev/null  {}\n",
               Throughput(recvlogical_seconds, options_.changes, 0));
    fmt::print("changes     skipprd sync --once                 {}   ratio {:.2f}   peak RSS {:.0f} MiB\n",
               Throughput(run.seconds, options_.changes, 0), recvlogical_seconds / run.seconds,
               run.peak_rss_kib / kKibPerMib);
    Sql("SELECT pg_drop_replication_slot('baseline_slot')", "bench");
  }

  void LargeTransaction() {
    const fs::path config = WriteConfig("cdc", "rides", "snapshot_then_cdc", 2);
    Sql(fmt::format("INSERT INTO rides SELECT g, 1, 1, 'large', 'one transaction', true, now() "
                    "FROM generate_series({}, {}) g",
                    options_.rows + 1, options_.rows + options_.large_transaction_rows),
        "bench");
    const SyncRun run = Sync(config, "cdc", options_.large_transaction_rows, true);
    fmt::print("large       one {}-row transaction: {}   peak RSS {:.0f} MiB (target < 512)\n",
               options_.large_transaction_rows,
               Throughput(run.seconds, options_.large_transaction_rows, 0),
               run.peak_rss_kib / kKibPerMib);
  }

  // Commit-to-queryable lag while `sync` (without --once) follows a stream of about 10k
  // inserts/s: each row's insert time against the first `skipprd query` that sees it (polled
  // back to back, so each figure is an upper bound by up to one query's time).
  void Lag() {
    // Row 0 first: a namespace appears with its table's first row.
    Sql("CREATE TABLE events (id bigint PRIMARY KEY, written_at timestamptz NOT NULL); INSERT INTO "
        "events VALUES (0, now())",
        "bench");
    const fs::path config = WriteConfig("lag", "events", "snapshot_then_cdc", 1);
    const fs::path data_dir = work_ / "lag_data";
    const std::string pid = launcher_.Run({{"/bin/sh", "-c",
                                            fmt::format("DATA_DIR={} {} --config {} sync -p lag "
                                                        "--output json > /dev/null 2>&1 & echo $!",
                                                        data_dir.string(),
                                                        options_.skipprd.string(),
                                                        config.string())},
                                           ChildEnvironment({}), work_ / "lag.err"})
                                .stdout_text;
    const auto max_id = [&]() -> std::optional<int64_t> {
      const ChildRun query = launcher_.Run(
          {{options_.skipprd.string(), "--config", config.string(), "query", "--plain", "--sql",
            "SELECT coalesce(max(id), -1) AS m FROM lag.postgres_events"},
           ChildEnvironment({{"DATA_DIR", data_dir.string()}}), work_ / "query.err"});
      if (query.exit_code != 0) return std::nullopt;
      // --plain: {"columns": [...], "rows": [["<max>"]], ...}
      const size_t rows = query.stdout_text.find("\"rows\"");
      const size_t digits = query.stdout_text.find_first_of("-0123456789", rows);
      if (rows == std::string::npos || digits == std::string::npos) return std::nullopt;
      return std::stoll(query.stdout_text.substr(digits));
    };
    while (!max_id()) {  // the first pass: slot, snapshot, the table queryable
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    constexpr int kRounds = 1000;  // 100 rows every 10 ms: about 10,000 rows/s for 10 s
    const auto writer_start = Clock::now();
    TimeShell(fmt::format(
        "psql -X -q -h 127.0.0.1 -p {} -U skippr -d bench -c 'DO $$ BEGIN FOR r IN 0..{} LOOP "
        "INSERT INTO events SELECT r * 100 + g, clock_timestamp() FROM generate_series(1, 100) g; "
        "COMMIT; PERFORM pg_sleep(0.01); END LOOP; END $$;' > {} 2>&1 &",
        server_->port(), kRounds - 1, (work_ / "writer.log").string()));
    std::vector<std::pair<int64_t, int64_t>> visible_at;  // (max id seen, unix µs after the query)
    const int64_t total = int64_t{kRounds} * 100;
    auto last_progress = Clock::now();
    for (int64_t seen = 0; seen < total;) {
      const std::optional<int64_t> now_seen = max_id();
      const int64_t at = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
      if (now_seen && *now_seen > seen) {
        visible_at.push_back({*now_seen, at});
        seen = *now_seen;
        last_progress = Clock::now();
      } else if (SecondsSince(last_progress) > 60) {
        kill(static_cast<pid_t>(std::stol(pid)), SIGTERM);
        Fail(fmt::format("no new row became queryable for 60 s (max id {} of {}); the writer "
                         "said: {}",
                         seen, total, FileText(work_ / "writer.log")));
      }
    }
    const double writing_seconds = SecondsSince(writer_start);
    kill(static_cast<pid_t>(std::stol(pid)), SIGTERM);
    // Each row's lag: the first query that saw it, minus when it was written.
    const std::string written = Sql(
        "SELECT string_agg(id || ' ' || (extract(epoch FROM written_at) * 1e6)::bigint, ',' ORDER "
        "BY id) FROM events",
        "bench");
    std::vector<double> lags_ms;
    size_t poll = 0;
    for (size_t at = 0; at < written.size();) {
      const size_t comma = std::min(written.find(',', at), written.size());
      const std::string pair = written.substr(at, comma - at);
      const int64_t id = std::stoll(pair);
      const int64_t written_micros = std::stoll(pair.substr(pair.find(' ') + 1));
      while (poll < visible_at.size() && visible_at[poll].first < id) ++poll;
      if (poll < visible_at.size()) {
        lags_ms.push_back(static_cast<double>(visible_at[poll].second - written_micros) / 1000);
      }
      at = comma + 1;
    }
    std::sort(lags_ms.begin(), lags_ms.end());
    const auto percentile = [&](double p) {
      return lags_ms.empty() ? 0.0 : lags_ms[static_cast<size_t>(p * (lags_ms.size() - 1))];
    };
    fmt::print("lag         {} inserts at {:.0f}/s, commit to queryable: p50 {:.0f} ms, p99 {:.0f} ms "
               "({} queries, each figure high by up to one query's time)\n",
               total, total / writing_seconds, percentile(0.5), percentile(0.99), visible_at.size());
  }

  Options options_;
  Launcher& launcher_;
  fs::path work_;
  std::unique_ptr<skippr::testing::PostgresServer> server_;
};

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/postgres");
  Launcher launcher;  // first: forks while this process is small
  Bench bench(ParseOptions(argc, argv), launcher);
  bench.Run();
  return 0;
}
