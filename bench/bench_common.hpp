// bench/bench_common: what bench/discover and bench/wal share: the rides-like input generator (a
// pure function of the row index), the JSON-lines and CSV writers, timing, and the DuckDB
// table-function SQL.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace skippr::bench {

constexpr uint64_t kDefaultRows = 2'000'000;  // rows of the input files (--rows)
constexpr uint64_t kQuickRows = 200'000;      // with --quick
constexpr int kTimedRuns = 3;  // after one warm-up run
constexpr double kBytesPerMb = 1e6;

// ---------------------------------------------------------------------------------------------
// Input files: rides-like records, a pure function of the row index.

uint64_t SplitMix64(uint64_t x);

// Draws successive small random numbers from one row's seed.
class RowRandom {
 public:
  explicit RowRandom(uint64_t index) : state_(SplitMix64(index)) {}
  uint64_t Below(uint64_t bound) {
    state_ = SplitMix64(state_);
    return state_ % bound;
  }

 private:
  uint64_t state_;
};

struct Ride {
  int64_t ride_id = 0;       // long: 16 digits (not read as an epoch timestamp)
  int32_t station_id = 0;    // int
  int32_t amount_cents = 0;  // written as a double with two decimals
  std::string rider_name;
  std::string comment;  // 1–12 words; some with a comma, a few with a quoted word
  bool is_member = false;
  std::string started_at;       // "2024-01-15T10:30:00Z"
  std::string ride_date;        // "2024-01-15"
  std::string_view bike_model;  // the nested object (JSON lines only)
  int32_t bike_battery_pct = 0;
  bool bike_is_electric = false;
};

std::string MakeComment(RowRandom& random);
Ride MakeRide(uint64_t index);

std::string JsonEscaped(std::string_view text);
std::string CsvField(std::string_view text);

void AppendJsonLine(fmt::memory_buffer& out, const Ride& ride);

constexpr std::string_view kCsvHeader =
    "ride_id,station_id,amount,rider_name,comment,is_member,started_at,ride_date\n";

void AppendCsvLine(fmt::memory_buffer& out, const Ride& ride);

constexpr size_t kFlushBytes = 4 << 20;

// Writes `buffer` to `file` and empties it.
void Flush(std::ofstream& file, fmt::memory_buffer& buffer);

struct InputFiles {
  std::filesystem::path jsonl;
  std::filesystem::path csv;
};

// Writes dir/rides.jsonl and dir/rides.csv in one pass over the rows, flushing every few MB;
// nullopt when a file could not be written.
std::optional<InputFiles> WriteInputFiles(const std::filesystem::path& dir, uint64_t rows);

// ---------------------------------------------------------------------------------------------
// Timing

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start);

// One warm-up run, then the best of kTimedRuns. `run` returns the seconds of its timed part.
double BestOfSeconds(const std::function<double()>& run);

// "  1.23 s    4.56 M rows/s    789 MB/s"
std::string Throughput(double seconds, uint64_t rows, uint64_t bytes);

// ---------------------------------------------------------------------------------------------
// DuckDB table functions over the input files

std::string SqlQuoted(const std::string& text);
std::string ReadJsonSql(const std::filesystem::path& file);
std::string ReadCsvSql(const std::filesystem::path& file);

}  // namespace skippr::bench
