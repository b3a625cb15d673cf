// duckdb_rows: DuckDB itself reading a database file, in a process of its own — how the tests read
// back what the Duckdb sink landed without initialising DuckDB in the test process (whose
// allocator's fork handlers would then run in every skipprd the test forks; under TSan they hang).
//
//   duckdb_rows <database file> <sql>
//
// Attaches the file read-only as `db` (waiting up to 30 s while a writer holds its lock), runs the
// SQL and prints its rows as one JSON array of arrays of strings (NULL as null). Exit 1 with
// DuckDB's message on stderr.
#include <duckdb.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace {

// The query's error ("" when it ran); its rows into `rows` when `rows` is given.
std::string Run(duckdb_connection connection, const std::string& sql, nlohmann::json* rows) {
  duckdb_result result;
  if (duckdb_query(connection, sql.c_str(), &result) != DuckDBSuccess) {
    std::string error = duckdb_result_error(&result);
    duckdb_destroy_result(&result);
    return error.empty() ? "unknown error" : error;
  }
  for (idx_t row = 0; rows != nullptr && row < duckdb_row_count(&result); ++row) {
    nlohmann::json values = nlohmann::json::array();
    for (idx_t column = 0; column < duckdb_column_count(&result); ++column) {
      char* text = duckdb_value_varchar(&result, column, row);
      values.push_back(text != nullptr ? nlohmann::json(text) : nlohmann::json());
      duckdb_free(text);
    }
    rows->push_back(std::move(values));
  }
  duckdb_destroy_result(&result);
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: duckdb_rows <database file> <sql>\n");
    return 1;
  }
  duckdb_database database = nullptr;
  duckdb_connection connection = nullptr;
  if (duckdb_open(nullptr, &database) != DuckDBSuccess ||
      duckdb_connect(database, &connection) != DuckDBSuccess) {
    std::fprintf(stderr, "duckdb_rows: cannot open DuckDB\n");
    return 1;
  }
  const std::string attach = std::string("ATTACH '") + argv[1] + "' AS db (READ_ONLY)";
  std::string error;
  for (int attempt = 0; attempt < 600; ++attempt) {
    error = Run(connection, attach, nullptr);
    if (error.find("lock") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nlohmann::json rows = nlohmann::json::array();
  if (error.empty()) error = Run(connection, argv[2], &rows);
  duckdb_disconnect(&connection);
  duckdb_close(&database);
  if (!error.empty()) {
    std::fprintf(stderr, "duckdb_rows: %s\n", error.c_str());
    return 1;
  }
  std::printf("%s\n", rows.dump().c_str());
  return 0;
}
