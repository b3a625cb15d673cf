# Every dependency comes from a Debian package, except DuckDB: its prebuilt library and header come
# from the npm registry, pinned in third_party/duckdb/package-lock.json (scripts/setup.sh installs both).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(GTest REQUIRED)
find_package(simdjson REQUIRED)

set(SKIPPR_DUCKDB_DIR "${PROJECT_SOURCE_DIR}/third_party/duckdb/node_modules")
find_library(DUCKDB_LIBRARY duckdb PATHS "${SKIPPR_DUCKDB_DIR}/@duckdb/node-bindings-linux-x64"
             NO_DEFAULT_PATH)
find_path(DUCKDB_INCLUDE_DIR duckdb.h PATHS "${SKIPPR_DUCKDB_DIR}/duckdb/src/duckdb/src/include"
          NO_DEFAULT_PATH)
if(NOT DUCKDB_LIBRARY OR NOT DUCKDB_INCLUDE_DIR)
  message(FATAL_ERROR "DuckDB is missing: run scripts/setup.sh (or `make setup`) first")
endif()
add_library(duckdb SHARED IMPORTED GLOBAL)
set_target_properties(duckdb PROPERTIES IMPORTED_LOCATION "${DUCKDB_LIBRARY}"
                                        INTERFACE_INCLUDE_DIRECTORIES "${DUCKDB_INCLUDE_DIR}")
get_filename_component(DUCKDB_LIBRARY_DIR "${DUCKDB_LIBRARY}" DIRECTORY)
# The binary finds libduckdb.so beside the build through its RPATH.
set(CMAKE_BUILD_RPATH "${DUCKDB_LIBRARY_DIR}")
find_package(ZLIB REQUIRED)
# Avro C (libavro-dev) encodes and decodes Iceberg manifest records; the container framing is ours
# (src/iceberg/avro_container.hpp says why).
pkg_check_modules(AVRO_C REQUIRED IMPORTED_TARGET avro-c)
# The Iceberg catalog (src/iceberg/): SQLite by default, PostgreSQL through libpq.
find_package(SQLite3 REQUIRED)
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
# S3 and DynamoDB: libcurl signs requests itself (CURLOPT_AWS_SIGV4, curl >= 7.75).
find_package(CURL 7.75 REQUIRED)

# jemalloc serves the binary's allocations: ingest makes and frees many small objects per record,
# and glibc's malloc spent a sixth of a file → WAL sync in consolidating and unlinking chunks.
if(SKIPPR_JEMALLOC)
  find_library(JEMALLOC_LIBRARY jemalloc REQUIRED)
endif()
