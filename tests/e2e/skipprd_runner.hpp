// Runs the real skipprd binary in a test directory (DATA_DIR under it, the environment cleaned of
// anything that would change a run), and the input and checks that sync and lake tests share.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "support/temp_dir.hpp"

namespace skippr::testing {

ProcessOptions OptionsFor(const TempDir& dir, std::map<std::string, std::string> env = {});

ProcessResult Skipprd(const TempDir& dir, const std::vector<std::string>& args,
                      std::map<std::string, std::string> env = {});

// Writes `files` JSON-lines and CSV files (alternating) under input/ holding `rows` rows
// {id, name, amount} with unique ids starting at `first_id`; returns the sum of a content checksum
// (id * 31 + amount) over all rows.
int64_t WriteInput(const TempDir& dir, int files, int64_t rows, int64_t first_id = 0,
                   const std::string& prefix = "part");

// Runs `sync -p <pipeline> --once` in the background and SIGKILLs it after `delay`; returns its
// exit code.
int SyncAndKillAfter(const TempDir& dir, const std::string& pipeline,
                     std::chrono::milliseconds delay, std::map<std::string, std::string> env);

// `skipprd query --plain` of one row; its values as text (NULL as "").
std::vector<std::string> QueryRow(const TempDir& dir, const std::string& sql);
// The rows `skipprd query --plain` returns, each value as text (NULL as "").
std::vector<std::vector<std::string>> QueryRows(const TempDir& dir, const std::string& sql);

// An Iceberg table as an independent reader (npm icebird, through tests/lake/read_iceberg.mjs)
// sees it through the SQLite catalog of the warehouse at the local path `warehouse`:
// {"schema": [...], "rows": [...]}.
nlohmann::json ReadWithIcebird(const std::string& warehouse, const std::string& table_namespace,
                               const std::string& table);

// The rows of `sql` run by DuckDB itself over the database file `path`, attached read-only as
// `db` (waiting while a writer holds it), each value as text (NULL as ""). Fails the test on an
// error and returns nothing.
std::vector<std::vector<std::string>> ReadDuckdbFile(const std::string& path,
                                                     const std::string& sql);

// While `sync -p <pipeline> --once` runs, repeats `SELECT count(*)` on <pipeline>.<table>: the
// count never decreases, never exceeds `source_rows`, and ends equal to it. Returns how many
// queries succeeded during the sync.
int ExpectCountDuringSyncIsMonotone(const TempDir& dir, const std::string& pipeline,
                                    const std::string& table, int64_t source_rows,
                                    std::map<std::string, std::string> env);

}  // namespace skippr::testing
