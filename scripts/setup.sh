#!/usr/bin/env bash
# Installs what skipprd needs on a Debian machine, and nothing that is already there.
# Idempotent: a rerun with everything present touches no network and changes nothing.
#   scripts/setup.sh          install what is missing
#   scripts/setup.sh --check  exit 0 when everything is present, 1 otherwise (installs nothing)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duckdb_dir="$root/third_party/duckdb"
iceberg_reader_dir="$root/third_party/iceberg_reader"
test_servers_dir="$root/third_party/test_servers"

# DESIGN.md §4: every library and tool comes from a Debian package (DuckDB, and the Iceberg reader
# that only tests use, from npm).
debian_packages=(
  # lld links the test binaries (each with the DuckDB-, Iceberg- and WAL-sized libraries, with
  # debug info) several times faster than ld.bfd; CMake uses it when it is there.
  build-essential cmake ninja-build ccache pkg-config git lld
  libyaml-cpp-dev libcli11-dev libsimdjson-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  liblmdb-dev lmdb-utils libavro-dev libsqlite3-dev sqlite3 libpq-dev libcurl4-openssl-dev
  libzstd-dev liblz4-dev libxxhash-dev libssl-dev zlib1g-dev libjemalloc-dev
  pybind11-dev python3-dev python3-pandas python3-pytest python3-avro
  # The Python module: skippr.Config keeps a file's comments (ruamel.yaml round trip); its type
  # stubs are checked against the module by mypy's stubtest.
  python3-ruamel.yaml python3-mypy
  libgtest-dev libgmock-dev libbenchmark-dev
  postgresql
  # The PostgreSQL TLS tests generate their CA and certificates with the openssl command.
  openssl
  # The sanitizer and fuzzing builds (make sanitize / tsan / fuzz): clang, and compiler-rt's
  # runtimes (libclang_rt.asan, .ubsan, .tsan, .fuzzer), which Debian 12 ships apart from clang in
  # libclang-rt-dev; llvm brings llvm-symbolizer, which turns the reports' addresses into
  # file:line. The three unversioned packages pick one LLVM (14 on Debian 12), so they match.
  clang libclang-rt-dev llvm
)

missing_packages() {
  local pkg
  for pkg in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
  done
  # npm fetches DuckDB. A machine whose Node.js came with its own npm keeps it (Debian's npm package
  # would conflict with that nodejs); otherwise Debian's packages provide both.
  command -v npm >/dev/null 2>&1 || echo "nodejs npm"
}

# The pinned DuckDB is present when the installed package versions equal the lock file's.
duckdb_is_current() {
  local lib="$duckdb_dir/node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so"
  local header="$duckdb_dir/node_modules/duckdb/src/duckdb/src/include/duckdb.h"
  [[ -f "$lib" && -f "$header" ]] || return 1
  local stamp="$duckdb_dir/node_modules/.skipprd-lock.sha256"
  [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$(sha256sum < "$duckdb_dir/package-lock.json")" ]]
}

# The pinned Iceberg reader (tests/lake/read_iceberg.mjs) is present when its lock file is unchanged.
iceberg_reader_is_current() {
  [[ -f "$iceberg_reader_dir/node_modules/icebird/package.json" ]] || return 1
  local stamp="$iceberg_reader_dir/node_modules/.skipprd-lock.sha256"
  [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$(sha256sum < "$iceberg_reader_dir/package-lock.json")" ]]
}

# The pinned S3- and DynamoDB-compatible servers tests start on loopback (tests/support/s3_server.*)
# are present when their lock file is unchanged.
test_servers_are_current() {
  [[ -f "$test_servers_dir/node_modules/s3rver/package.json" ]] || return 1
  local stamp="$test_servers_dir/node_modules/.skipprd-lock.sha256"
  [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$(sha256sum < "$test_servers_dir/package-lock.json")" ]]
}

if [[ "${1:-}" == "--check" ]]; then
  [[ -z "$(missing_packages)" ]] && duckdb_is_current && iceberg_reader_is_current &&
    test_servers_are_current
  exit $?
fi

read -r -a missing <<< "$(missing_packages | tr '\n' ' ')"
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! duckdb_is_current; then
  echo "setup: installing DuckDB (pinned in third_party/duckdb/package-lock.json)"
  (cd "$duckdb_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  sha256sum < "$duckdb_dir/package-lock.json" > "$duckdb_dir/node_modules/.skipprd-lock.sha256"
fi

if ! iceberg_reader_is_current; then
  echo "setup: installing the tests' Iceberg reader (pinned in third_party/iceberg_reader/package-lock.json)"
  (cd "$iceberg_reader_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  sha256sum < "$iceberg_reader_dir/package-lock.json" > "$iceberg_reader_dir/node_modules/.skipprd-lock.sha256"
fi

if ! test_servers_are_current; then
  echo "setup: installing the tests' S3 and DynamoDB servers (pinned in third_party/test_servers/package-lock.json)"
  (cd "$test_servers_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  sha256sum < "$test_servers_dir/package-lock.json" > "$test_servers_dir/node_modules/.skipprd-lock.sha256"
fi

echo "setup: everything skipprd needs is installed"
