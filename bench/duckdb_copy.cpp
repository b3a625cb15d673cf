// duckdb_copy: DuckDB's one-line command, as a user runs it — `duckdb -c "<statement>"`, a fresh
// process with an in-memory database at DuckDB's default settings — for benchmarks that time a
// skipprd process beside it (bench/lake). No DuckDB command-line shell comes with the library we
// install, so this is that shell's work and nothing more: open, run one statement, print the first
// value of its result (a COPY's row count), close. Not named bench_*: bench/run.sh runs those.
//
//   duckdb_copy '<statement>'
//
// Exit 0 with the value on stdout; exit 1 with DuckDB's message on stderr.
#include <duckdb.h>

#include <cstdint>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: duckdb_copy '<statement>'\n");
    return 1;
  }
  duckdb_database database = nullptr;
  duckdb_connection connection = nullptr;
  if (duckdb_open(nullptr, &database) != DuckDBSuccess ||
      duckdb_connect(database, &connection) != DuckDBSuccess) {
    std::fprintf(stderr, "duckdb_copy: cannot open an in-memory DuckDB\n");
    return 1;
  }
  duckdb_result result;
  const bool ok = duckdb_query(connection, argv[1], &result) == DuckDBSuccess;
  if (ok) {
    const int64_t value = duckdb_column_count(&result) > 0 && duckdb_row_count(&result) > 0
                              ? duckdb_value_int64(&result, 0, 0)
                              : 0;
    std::printf("%lld\n", static_cast<long long>(value));
  } else {
    std::fprintf(stderr, "duckdb_copy: %s\n", duckdb_result_error(&result));
  }
  duckdb_destroy_result(&result);
  duckdb_disconnect(&connection);
  duckdb_close(&database);
  return ok ? 0 : 1;
}
