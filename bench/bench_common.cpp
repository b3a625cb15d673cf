#include "bench_common.hpp"

#include <algorithm>
#include <array>
#include <iterator>

namespace fs = std::filesystem;

namespace skippr::bench {

namespace {

constexpr std::array<std::string_view, 8> kFirstNames = {"Ada",     "Grace", "Alan",     "Edsger",
                                                         "Barbara", "Ken",   "Margaret", "Dennis"};
constexpr std::array<std::string_view, 8> kLastNames = {
    "Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Hamilton", "Ritchie"};
constexpr std::array<std::string_view, 12> kWords = {"smooth", "ride", "along", "the",
                                                     "canal",  "flat", "tyre",  "rain",
                                                     "bike",   "dock", "full",  "late"};
constexpr std::array<std::string_view, 4> kBikeModels = {"classic", "e-bike", "cargo", "tandem"};

}  // namespace

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

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
  ride.ride_date =
      fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
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

void AppendCsvLine(fmt::memory_buffer& out, const Ride& ride) {
  fmt::format_to(std::back_inserter(out), "{},{},{}.{:02},{},{},{},{},{}\n", ride.ride_id,
                 ride.station_id, ride.amount_cents / 100, ride.amount_cents % 100,
                 CsvField(ride.rider_name), CsvField(ride.comment), ride.is_member, ride.started_at,
                 ride.ride_date);
}

void Flush(std::ofstream& file, fmt::memory_buffer& buffer) {
  file.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  buffer.clear();
}

std::optional<InputFiles> WriteInputFiles(const fs::path& dir, uint64_t rows) {
  InputFiles files{dir / "rides.jsonl", dir / "rides.csv"};
  std::ofstream jsonl(files.jsonl, std::ios::binary);
  std::ofstream csv(files.csv, std::ios::binary);
  fmt::memory_buffer jsonl_buffer;
  fmt::memory_buffer csv_buffer;
  csv_buffer.append(kCsvHeader);
  for (uint64_t i = 0; i < rows; ++i) {
    const Ride ride = MakeRide(i);
    AppendJsonLine(jsonl_buffer, ride);
    AppendCsvLine(csv_buffer, ride);
    if (jsonl_buffer.size() >= kFlushBytes) Flush(jsonl, jsonl_buffer);
    if (csv_buffer.size() >= kFlushBytes) Flush(csv, csv_buffer);
  }
  Flush(jsonl, jsonl_buffer);
  Flush(csv, csv_buffer);
  if (!jsonl.good() || !csv.good()) return std::nullopt;
  return files;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double BestOfSeconds(const std::function<double()>& run) {
  run();
  double best_seconds = run();
  for (int i = 1; i < kTimedRuns; ++i) best_seconds = std::min(best_seconds, run());
  return best_seconds;
}

std::string Throughput(double seconds, uint64_t rows, uint64_t bytes) {
  return fmt::format("{:6.2f} s  {:6.2f} M rows/s  {:5.0f} MB/s", seconds, rows / seconds / 1e6,
                     bytes / seconds / kBytesPerMb);
}

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

}  // namespace skippr::bench
