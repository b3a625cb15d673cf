// bench/discover: skipprd's parse-and-type throughput (File source + Shaper, the path `skipprd
// discover` takes) for JSON lines and CSV, beside DuckDB's read_json / read_csv materialising the
// same file with the same thread count, in the same run. Prints ratios (STYLE.md, "Benchmarks print
// ratios from one run"); no thresholds.
//
//   bench_discover [--rows N] [--quick] [--dir PATH] [--threads T]
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "config/config.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"

namespace fs = std::filesystem;
using namespace skippr;

namespace {

constexpr uint64_t kDefaultRows = 2'000'000;
constexpr uint64_t kQuickRows = 200'000;
constexpr int kTimedRuns = 3;  // after one warm-up run
constexpr double kBytesPerMb = 1e6;

[[noreturn]] void Fail(const std::string& message) {
  fmt::print(stderr, "bench/discover: {}\n", message);
  std::exit(1);
}

// ---------------------------------------------------------------------------------------------
// Flags

struct Flags {
  uint64_t rows = kDefaultRows;
  std::string dir;  // empty: a fresh temporary directory, removed at the end
  int threads = 1;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--rows") {
      flags.rows = std::stoull(value());
    } else if (arg == "--quick") {
      flags.rows = kQuickRows;
    } else if (arg == "--dir") {
      flags.dir = value();
    } else if (arg == "--threads") {
      flags.threads = std::stoi(value());
    } else {
      Fail(fmt::format("unknown flag {} (use --rows N, --quick, --dir PATH, --threads T)", arg));
    }
  }
  if (flags.rows == 0 || flags.threads < 1) Fail("--rows and --threads must be positive");
  return flags;
}

// ---------------------------------------------------------------------------------------------
// Input files: rides-like records, a pure function of the row index.

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

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

constexpr std::array<std::string_view, 8> kFirstNames = {"Ada",   "Grace", "Alan",     "Edsger",
                                                         "Barbara", "Ken", "Margaret", "Dennis"};
constexpr std::array<std::string_view, 8> kLastNames = {"Lovelace", "Hopper", "Turing", "Dijkstra",
                                                        "Liskov",   "Thompson", "Hamilton", "Ritchie"};
constexpr std::array<std::string_view, 12> kWords = {
    "smooth", "ride", "along", "the", "canal", "flat", "tyre", "rain", "bike", "dock", "full", "late"};
constexpr std::array<std::string_view, 4> kBikeModels = {"classic", "e-bike", "cargo", "tandem"};

struct Ride {
  int64_t ride_id = 0;      // long: 16 digits (not read as an epoch timestamp)
  int32_t station_id = 0;   // int
  int32_t amount_cents = 0; // written as a double with two decimals
  std::string rider_name;
  std::string comment;      // 1–12 words; some with a comma, a few with a quoted word
  bool is_member = false;
  std::string started_at;   // "2024-01-15T10:30:00Z"
  std::string ride_date;    // "2024-01-15"
  std::string_view bike_model;  // the nested object (JSON lines only)
  int32_t bike_battery_pct = 0;
  bool bike_is_electric = false;
};

std::string MakeComment(RowRandom& random) {
  std::string comment;
  const uint64_t word_count = 1 + random.Below(12);
  const bool has_comma = random.Below(10) == 0;
  const bool has_quote = random.Below(50) == 0;
  for (uint64_t w = 0; w < word_count; ++w) {
    if (w > 0) comment += (has_comma && w == 1) ? ", " : " ";
    const std::string_view word = kWords[random.Below(kWords.size())];
    if (has_quote && w == word_count - 1) {
      comment += fmt::format("\"{}\"", word);
    } else {
      comment += word;
    }
  }
  return comment;
}

Ride MakeRide(uint64_t index) {
  using namespace std::chrono;
  RowRandom random(index);
  Ride ride;
  ride.ride_id = 4'000'000'000'000'000 + static_cast<int64_t>(index);
  ride.station_id = 1 + static_cast<int32_t>(random.Below(4999));
  ride.amount_cents = 150 + static_cast<int32_t>(random.Below(9850));
  ride.rider_name = fmt::format("{} {}", kFirstNames[random.Below(kFirstNames.size())],
                                kLastNames[random.Below(kLastNames.size())]);
  ride.comment = MakeComment(random);
  ride.is_member = random.Below(3) != 0;
  const sys_seconds start = sys_days(year{2024} / January / 1) + seconds(random.Below(180 * 86400));
  const sys_days day = floor<days>(start);
  const year_month_day date(day);
  const hh_mm_ss<seconds> time(start - day);
  ride.ride_date = fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
                               static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
  ride.started_at = fmt::format("{}T{:02}:{:02}:{:02}Z", ride.ride_date, time.hours().count(),
                                time.minutes().count(), time.seconds().count());
  ride.bike_model = kBikeModels[random.Below(kBikeModels.size())];
  ride.bike_battery_pct = static_cast<int32_t>(random.Below(101));
  ride.bike_is_electric = ride.bike_model == "e-bike";
  return ride;
}

std::string JsonEscaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void AppendJsonLine(fmt::memory_buffer& out, const Ride& ride) {
  fmt::format_to(std::back_inserter(out),
                 R"({{"ride_id":{},"station_id":{},"amount":{}.{:02},"rider_name":"{}",)"
                 R"("comment":"{}","is_member":{},"started_at":"{}","ride_date":"{}",)"
                 R"("bike":{{"model":"{}","battery_pct":{},"is_electric":{}}}}})"
                 "\n",
                 ride.ride_id, ride.station_id, ride.amount_cents / 100, ride.amount_cents % 100,
                 ride.rider_name, JsonEscaped(ride.comment), ride.is_member, ride.started_at,
                 ride.ride_date, ride.bike_model, ride.bike_battery_pct, ride.bike_is_electric);
}

constexpr std::string_view kCsvHeader =
    "ride_id,station_id,amount,rider_name,comment,is_member,started_at,ride_date\n";

void AppendCsvLine(fmt::memory_buffer& out, const Ride& ride) {
  fmt::format_to(std::back_inserter(out), "{},{},{}.{:02},{},{},{},{},{}\n", ride.ride_id,
                 ride.station_id, ride.amount_cents / 100, ride.amount_cents % 100,
                 CsvField(ride.rider_name), CsvField(ride.comment), ride.is_member, ride.started_at,
                 ride.ride_date);
}

struct InputFiles {
  fs::path jsonl;
  fs::path csv;
};

// Writes both files in one pass over the rows, flushing every few MB.
InputFiles WriteInputFiles(const fs::path& dir, uint64_t rows) {
  constexpr size_t kFlushBytes = 4 << 20;
  InputFiles files{dir / "rides.jsonl", dir / "rides.csv"};
  std::ofstream jsonl(files.jsonl, std::ios::binary);
  std::ofstream csv(files.csv, std::ios::binary);
  fmt::memory_buffer jsonl_buffer;
  fmt::memory_buffer csv_buffer;
  csv_buffer.append(kCsvHeader);
  auto flush = [](std::ofstream& file, fmt::memory_buffer& buffer) {
    file.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    buffer.clear();
  };
  for (uint64_t i = 0; i < rows; ++i) {
    const Ride ride = MakeRide(i);
    AppendJsonLine(jsonl_buffer, ride);
    AppendCsvLine(csv_buffer, ride);
    if (jsonl_buffer.size() >= kFlushBytes) flush(jsonl, jsonl_buffer);
    if (csv_buffer.size() >= kFlushBytes) flush(csv, csv_buffer);
  }
  flush(jsonl, jsonl_buffer);
  flush(csv, csv_buffer);
  if (!jsonl.good() || !csv.good()) Fail(fmt::format("cannot write the input files in {}", dir.string()));
  return files;
}

// ---------------------------------------------------------------------------------------------
// Timing and memory

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One warm-up run, then the best of kTimedRuns. `run` returns the seconds of its timed part.
double BestOfSeconds(const std::function<double()>& run) {
  run();
  double best_seconds = run();
  for (int i = 1; i < kTimedRuns; ++i) best_seconds = std::min(best_seconds, run());
  return best_seconds;
}

// The process's resident-set high-water mark (VmHWM), and a reset of it (Linux ≥ 4.0), so each side
// can be measured on its own.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return 0;
}

void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// ---------------------------------------------------------------------------------------------
// skipprd side: the File source and the Shaper, as `skipprd discover` drives them (all rows).

struct SkipprRun {
  uint64_t records = 0;
  uint64_t deadletters = 0;
  std::string types;  // the inferred top-level types, for the report
};

std::string DescribeTypes(const schema::PipelineSchema& schema) {
  std::string types;
  for (const auto& [name, ns] : schema.namespaces) {
    for (const Field& field : ns.fields) {
      types += (types.empty() ? "" : ", ") + field.type.ToString();
    }
  }
  return types;
}

SkipprRun ReadWithSkippr(const fs::path& file) {
  config::ConnectorConfig connector;
  connector.kind = "File";
  connector.settings["path"] = file.string();
  Result<std::unique_ptr<sources::Source>> source = sources::MakeSource(connector);
  if (!source.ok()) Fail(fmt::format("File source: {}", source.status().message()));
  sources::ReadOptions options;
  options.max_records_per_partition = 0;  // every row
  if (Status opened = (*source)->Open({}, options); !opened.ok()) {
    Fail(fmt::format("File source open: {}", opened.message()));
  }
  schema::Shaper shaper({}, schema::ShaperOptions{"bench"});
  SkipprRun run;
  while (true) {
    Result<std::optional<sources::SourceBatch>> batch = (*source)->Next();
    if (!batch.ok()) Fail(fmt::format("File source read: {}", batch.status().message()));
    if (!*batch) break;
    for (sources::SourceRecord& record : (*batch)->records) {
      if (shaper.Absorb(std::move(record.value), record.origin, (*batch)->context)) ++run.deadletters;
    }
    run.records += (*batch)->records.size();
    run.deadletters += (*batch)->deadletters.size();
  }
  shaper.Seal();
  run.types = DescribeTypes(shaper.schema());
  return run;
}

double TimeSkippr(const fs::path& file, uint64_t expected_rows, std::string& types) {
  const Clock::time_point start = Clock::now();
  const SkipprRun run = ReadWithSkippr(file);
  const double seconds = SecondsSince(start);
  if (run.deadletters != 0 || run.records != expected_rows) {
    Fail(fmt::format("skipprd read {}: {} records and {} deadletters, expected {} and 0",
                     file.string(), run.records, run.deadletters, expected_rows));
  }
  types = run.types;
  return seconds;
}

// ---------------------------------------------------------------------------------------------
// DuckDB side: an in-memory database materialising every column with CREATE TABLE AS.

class DuckDb {
 public:
  explicit DuckDb(int threads) {
    if (duckdb_open(nullptr, &database_) != DuckDBSuccess) Fail("cannot open an in-memory DuckDB");
    if (duckdb_connect(database_, &connection_) != DuckDBSuccess) Fail("cannot connect to DuckDB");
    Execute(fmt::format("SET threads = {}", threads));
  }
  ~DuckDb() {
    duckdb_disconnect(&connection_);
    duckdb_close(&database_);
  }
  DuckDb(const DuckDb&) = delete;
  DuckDb& operator=(const DuckDb&) = delete;

  void Execute(const std::string& sql) { Query(sql, [](duckdb_result&) {}); }

  int64_t QueryInt64(const std::string& sql) {
    int64_t value = 0;
    Query(sql, [&](duckdb_result& result) { value = duckdb_value_int64(&result, 0, 0); });
    return value;
  }

  std::string QueryText(const std::string& sql) {
    std::string value;
    Query(sql, [&](duckdb_result& result) {
      char* text = duckdb_value_varchar(&result, 0, 0);
      value = text != nullptr ? text : "";
      duckdb_free(text);
    });
    return value;
  }

 private:
  void Query(const std::string& sql, const std::function<void(duckdb_result&)>& read) {
    duckdb_result result;
    if (duckdb_query(connection_, sql.c_str(), &result) != DuckDBSuccess) {
      const std::string error = duckdb_result_error(&result);
      duckdb_destroy_result(&result);
      Fail(fmt::format("DuckDB: {}\n  in: {}", error, sql));
    }
    read(result);
    duckdb_destroy_result(&result);
  }

  duckdb_database database_ = nullptr;
  duckdb_connection connection_ = nullptr;
};

std::string SqlQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string ReadJsonSql(const fs::path& file) {
  return fmt::format("read_json({}, format = 'newline_delimited')", SqlQuoted(file.string()));
}

std::string ReadCsvSql(const fs::path& file) {
  return fmt::format("read_csv({})", SqlQuoted(file.string()));
}

double TimeDuckDb(DuckDb& duckdb, const std::string& table_function, uint64_t expected_rows,
                  std::string& types) {
  const Clock::time_point start = Clock::now();
  duckdb.Execute("CREATE TABLE t AS SELECT * FROM " + table_function);
  const double seconds = SecondsSince(start);
  const int64_t rows = duckdb.QueryInt64("SELECT count(*) FROM t");
  if (rows != static_cast<int64_t>(expected_rows)) {
    Fail(fmt::format("DuckDB read {} rows from {}, expected {}", rows, table_function, expected_rows));
  }
  types = duckdb.QueryText(
      "SELECT string_agg(lower(data_type), ', ' ORDER BY ordinal_position) "
      "FROM information_schema.columns WHERE table_name = 't'");
  duckdb.Execute("DROP TABLE t");
  return seconds;
}

// ---------------------------------------------------------------------------------------------
// Report

struct Measurement {
  double seconds = 0;
  std::string types;
};

struct FileResult {
  std::string label;  // "JSON lines", "CSV"
  std::string duckdb_function;
  uint64_t file_bytes = 0;
  Measurement duckdb;
  Measurement skippr;
};

std::string Throughput(double seconds, uint64_t rows, uint64_t bytes) {
  return fmt::format("{:6.2f} s  {:6.2f} M rows/s  {:5.0f} MB/s", seconds, rows / seconds / 1e6,
                     bytes / seconds / kBytesPerMb);
}

void PrintFileResult(const FileResult& result, uint64_t rows) {
  fmt::print("  {:<38}{}   (baseline, same run)\n",
             fmt::format("duckdb {} (CREATE TABLE AS)", result.duckdb_function),
             Throughput(result.duckdb.seconds, rows, result.file_bytes));
  fmt::print("  {:<38}{}   ratio {:.2f}\n", fmt::format("skipprd discover path ({})", result.label),
             Throughput(result.skippr.seconds, rows, result.file_bytes),
             result.duckdb.seconds / result.skippr.seconds);
  fmt::print("    types  duckdb:  {}\n", result.duckdb.types);
  fmt::print("           skipprd: {}\n", result.skippr.types);
}

fs::path MakeWorkDir(const Flags& flags, bool& is_temporary) {
  is_temporary = flags.dir.empty();
  fs::path dir = flags.dir;
  if (is_temporary) {
    std::string pattern = (fs::temp_directory_path() / "bench_discover.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) Fail("cannot create a temporary directory");
    dir = pattern;
  }
  fs::create_directories(dir);
  return dir;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  bool is_temporary = false;
  const fs::path dir = MakeWorkDir(flags, is_temporary);
  const InputFiles files = WriteInputFiles(dir, flags.rows);

  FileResult json{"JSON lines", "read_json", fs::file_size(files.jsonl)};
  FileResult csv{"CSV", "read_csv ", fs::file_size(files.csv)};
  fmt::print("bench/discover  rows={} threads={}  rides.jsonl={:.0f} MB  rides.csv={:.0f} MB\n",
             flags.rows, flags.threads, json.file_bytes / kBytesPerMb, csv.file_bytes / kBytesPerMb);

  // skipprd first, then DuckDB, so that each side's peak RSS is its own.
  ResetPeakRss();
  json.skippr.seconds = BestOfSeconds([&] { return TimeSkippr(files.jsonl, flags.rows, json.skippr.types); });
  csv.skippr.seconds = BestOfSeconds([&] { return TimeSkippr(files.csv, flags.rows, csv.skippr.types); });
  const double skippr_peak_rss_mib = PeakRssMib();

  ResetPeakRss();
  double duckdb_peak_rss_mib = 0;
  {
    DuckDb duckdb(flags.threads);
    json.duckdb.seconds = BestOfSeconds(
        [&] { return TimeDuckDb(duckdb, ReadJsonSql(files.jsonl), flags.rows, json.duckdb.types); });
    csv.duckdb.seconds = BestOfSeconds(
        [&] { return TimeDuckDb(duckdb, ReadCsvSql(files.csv), flags.rows, csv.duckdb.types); });
    duckdb_peak_rss_mib = PeakRssMib();
  }

  PrintFileResult(json, flags.rows);
  PrintFileResult(csv, flags.rows);
  fmt::print("  peak RSS  skipprd {:.0f} MiB   duckdb {:.0f} MiB   (high-water mark of each side)\n",
             skippr_peak_rss_mib, duckdb_peak_rss_mib);

  if (is_temporary) fs::remove_all(dir);
  return 0;
}
