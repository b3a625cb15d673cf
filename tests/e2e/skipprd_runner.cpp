#include "e2e/skipprd_runner.hpp"


#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <thread>

namespace skippr::testing {

ProcessOptions OptionsFor(const TempDir& dir, std::map<std::string, std::string> env) {
  ProcessOptions options;
  options.working_dir = dir.path();
  options.unset_env = {"SKIPPR_CONFIG_FILE", "PIPELINE_NAME", "SKIPPR_CRASH_POINT",
                       "SKIPPR_CHAOS_MODE", "BUFFER_THRESHOLD_BYTES", "BUFFER_THRESHOLD_SECONDS",
                       "SYNC_FREQUENCY", "SKIPPR_DISK_MIN_FREE_BYTES",
                       "SKIPPR_DISK_PAUSE_AT_PERCENT", "SKIPPR_DISK_RESUME_AT_PERCENT",
                       "SKIPPR_DISK_WAIT_SECONDS"};
  options.set_env = std::move(env);
  options.set_env["DATA_DIR"] = dir.path() + "/data";
  return options;
}

ProcessResult Skipprd(const TempDir& dir, const std::vector<std::string>& args,
                      std::map<std::string, std::string> env) {
  return RunProcess(SKIPPRD_BINARY, args, OptionsFor(dir, std::move(env)));
}

int64_t WriteInput(const TempDir& dir, int files, int64_t rows, int64_t first_id,
                   const std::string& prefix) {
  int64_t checksum = 0;
  const int64_t per_file = rows / files;
  for (int file = 0; file < files; ++file) {
    const bool is_csv = file % 2 == 1;
    std::string text = is_csv ? "id,name,amount\n" : "";
    for (int64_t i = first_id + file * per_file; i < first_id + (file + 1) * per_file; ++i) {
      const int64_t amount = (i * 7919) % 100000;
      checksum += i * 31 + amount;
      const std::string name = "rider-" + std::to_string(i % 977);
      text += is_csv ? std::to_string(i) + "," + name + "," + std::to_string(amount) + "\n"
                     : "{\"id\":" + std::to_string(i) + ",\"name\":\"" + name +
                           "\",\"amount\":" + std::to_string(amount) + "}\n";
    }
    dir.Write("input/" + prefix + "-" + std::to_string(1000 + file) + (is_csv ? ".csv" : ".jsonl"),
              text);
  }
  return checksum;
}

int SyncAndKillAfter(const TempDir& dir, const std::string& pipeline,
                     std::chrono::milliseconds delay, std::map<std::string, std::string> env) {
  RunningProcess sync =
      StartProcess(SKIPPRD_BINARY, {"sync", "-p", pipeline, "--once", "--output", "text"},
                   OptionsFor(dir, std::move(env)));
  std::this_thread::sleep_for(delay);
  sync.Kill(SIGKILL);
  return sync.Wait().exit_code;
}

std::vector<std::string> QueryRow(const TempDir& dir, const std::string& sql) {
  ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql", sql});
  EXPECT_EQ(query.exit_code, 0) << sql << "\n" << query.err;
  if (query.exit_code != 0) return {};
  std::vector<std::string> values;
  const nlohmann::json result = nlohmann::json::parse(query.out);
  for (const nlohmann::json& value : result["rows"][0]) {
    values.push_back(value.is_null() ? "" : value.get<std::string>());
  }
  return values;
}

std::vector<std::vector<std::string>> QueryRows(const TempDir& dir, const std::string& sql) {
  ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql", sql});
  EXPECT_EQ(query.exit_code, 0) << sql << "\n" << query.err;
  std::vector<std::vector<std::string>> rows;
  if (query.exit_code != 0) return rows;
  const nlohmann::json result = nlohmann::json::parse(query.out);
  for (const nlohmann::json& row : result["rows"]) {
    std::vector<std::string> values;
    for (const nlohmann::json& value : row) {
      values.push_back(value.is_null() ? "" : value.get<std::string>());
    }
    rows.push_back(std::move(values));
  }
  return rows;
}

nlohmann::json ReadWithIcebird(const std::string& warehouse, const std::string& table_namespace,
                               const std::string& table) {
  ProcessResult read = RunProcess(
      "/usr/bin/env", {"node", std::string(SKIPPR_SOURCE_DIR) + "/tests/lake/read_iceberg.mjs",
                       "--catalog", warehouse + "/skippr_catalog.db", table_namespace, table});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  if (read.exit_code != 0) return nlohmann::json::object({{"schema", {}}, {"rows", {}}});
  return nlohmann::json::parse(read.out);
}

int ExpectCountDuringSyncIsMonotone(const TempDir& dir, const std::string& pipeline,
                                    const std::string& table, int64_t source_rows,
                                    std::map<std::string, std::string> env) {
  RunningProcess sync =
      StartProcess(SKIPPRD_BINARY, {"sync", "-p", pipeline, "--once", "--output", "text"},
                   OptionsFor(dir, std::move(env)));
  const std::string sql = "SELECT count(*) AS n FROM " + pipeline + "." + table;
  int64_t last_count = -1;
  int successful_queries = 0;
  bool sync_running = true;
  for (int attempt = 0; attempt < 2000 && sync_running; ++attempt) {
    sync_running = waitpid(sync.pid(), nullptr, WNOHANG) == 0;
    ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql", sql});
    if (query.exit_code != 0) {
      // Before the first commit there is no table yet; after it, every query must succeed.
      EXPECT_EQ(last_count, -1) << query.err;
      continue;
    }
    const auto json = nlohmann::json::parse(query.out);
    const int64_t count = std::stoll(json["rows"][0][0].get<std::string>());
    EXPECT_GE(count, last_count) << "a later query saw fewer rows";
    EXPECT_LE(count, source_rows) << "a query counted rows twice";
    last_count = count;
    ++successful_queries;
  }
  ProcessResult finished = sync.Wait();
  EXPECT_TRUE(finished.exit_code == 0 || finished.exit_code == -1) << finished.err;
  EXPECT_EQ(QueryRow(dir, sql), std::vector<std::string>{std::to_string(source_rows)});
  EXPECT_GE(successful_queries, 1);
  return successful_queries;
}

std::vector<std::vector<std::string>> ReadDuckdbFile(const std::string& path,
                                                     const std::string& sql) {
  const ProcessResult read = RunProcess(DUCKDB_ROWS_BINARY, {path, sql});
  std::vector<std::vector<std::string>> rows;
  if (read.exit_code != 0) {
    ADD_FAILURE() << "DuckDB over " << path << ": " << read.err << "\n" << sql;
    return rows;
  }
  for (const nlohmann::json& row : nlohmann::json::parse(read.out)) {
    std::vector<std::string>& values = rows.emplace_back();
    for (const nlohmann::json& value : row) {
      values.push_back(value.is_null() ? "" : value.get<std::string>());
    }
  }
  return rows;
}

}  // namespace skippr::testing
