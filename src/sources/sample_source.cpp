// The built-in sample: deterministic bike-hire rides. Each ride is a pure function of (seed,
// index), so a read can resume at any record and two runs produce the same rows.
#include <fmt/format.h>

#include <array>

#include "sources/source_kinds.hpp"
#include "sources/sources.hpp"

namespace skippr::sources {

namespace {

struct Station {
  int32_t id;
  const char* name;
  double latitude;
  double longitude;
};

constexpr std::array<Station, 16> kStations = {{
    {101, "Hyde Park Corner", 51.5027, -0.1527},
    {102, "Waterloo Station", 51.5036, -0.1143},
    {103, "King's Cross", 51.5308, -0.1238},
    {104, "Tower Bridge", 51.5055, -0.0754},
    {105, "Borough Market", 51.5055, -0.0910},
    {106, "Covent Garden", 51.5117, -0.1240},
    {107, "Camden Town", 51.5390, -0.1426},
    {108, "Canary Wharf", 51.5054, -0.0235},
    {109, "South Kensington", 51.4941, -0.1738},
    {110, "Shoreditch High Street", 51.5233, -0.0751},
    {111, "Victoria", 51.4965, -0.1447},
    {112, "Liverpool Street", 51.5178, -0.0823},
    {113, "Angel", 51.5322, -0.1058},
    {114, "Brixton", 51.4627, -0.1145},
    {115, "Greenwich", 51.4826, -0.0077},
    {116, "Notting Hill Gate", 51.5094, -0.1967},
}};

// splitmix64: a strong, tiny mixer; hashing (seed, index, salt) makes every value independent.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Draw(uint64_t seed, uint64_t index, uint64_t salt) {
  return Mix(Mix(seed * 0x100000001b3ULL + salt) ^ index);
}

constexpr int64_t kFirstRideMicros = 1'704'067'200'000'000;  // 2024-01-01T00:00:00

// Built with emplace_back: an initializer list would copy every Value (and its strings).
Value StationValue(const Station& station) {
  ValueObject fields;
  fields.reserve(4);
  fields.emplace_back("id", Value::Int(station.id));
  fields.emplace_back("name", Value::String(station.name));
  fields.emplace_back("latitude", Value::Double(station.latitude));
  fields.emplace_back("longitude", Value::Double(station.longitude));
  return Value::Object(std::move(fields));
}

struct Ride {
  int64_t duration_seconds;
  int64_t amount_cents;
  bool is_member;
};

Ride RideNumbers(uint64_t seed, uint64_t index) {
  const bool is_member = Draw(seed, index, 3) % 10 < 7;
  const int64_t duration_seconds = 120 + static_cast<int64_t>(Draw(seed, index, 4) % 5280);
  // Members pay £0.05 a minute; casual riders £1.65 to unlock and £0.10 a minute.
  const int64_t minutes = (duration_seconds + 59) / 60;
  const int64_t amount_cents = is_member ? 5 * minutes : 165 + 10 * minutes;
  return {duration_seconds, amount_cents, is_member};
}

class SampleSource final : public Source {
 public:
  SampleSource(uint64_t rows, uint64_t seed) : rows_(rows), seed_(seed) {
    declared_types_ = {{"ride_id", LogicalType::Long()},
                       {"amount", LogicalType::Decimal(10, 2).value()},
                       {"distance_km", LogicalType::Double()}};
  }

  Status Open(const SourcePositions& committed, const ReadOptions& options) override {
    options_ = options;
    next_index_ = 0;
    if (auto it = committed.find(kPartition); it != committed.end()) {
      next_index_ = std::min(it->second.records_consumed, rows_);
    }
    limit_ = options.max_records_per_partition == 0
                 ? rows_
                 : std::min(rows_, next_index_ + options.max_records_per_partition);
    return Status::OK();
  }

  Result<std::optional<SourceBatch>> Next() override {
    if (next_index_ >= limit_) return std::optional<SourceBatch>();
    SourceBatch batch;
    batch.partition = kPartition;
    batch.context.infer_epoch_timestamps = false;  // typed values: no guessing
    batch.context.keys_may_repeat = false;
    batch.context.declared_types = &declared_types_;
    const uint64_t end = std::min(limit_, next_index_ + options_.max_records_per_batch);
    batch.records.reserve(end - next_index_);
    for (; next_index_ < end; ++next_index_) {
      batch.records.push_back(
          {SampleRide(seed_, next_index_), /*line=*/0, /*row=*/next_index_ + 1});
    }
    batch.position.records_consumed = next_index_;
    batch.position.size_bytes = rows_;  // a different `rows` setting reads as a changed partition
    batch.position.is_closed = next_index_ >= rows_;
    return std::optional<SourceBatch>(std::move(batch));
  }

 private:
  static constexpr const char* kPartition = "sample";
  uint64_t rows_;
  uint64_t seed_;
  ReadOptions options_;
  uint64_t next_index_ = 0;
  uint64_t limit_ = 0;
  std::map<std::string, LogicalType> declared_types_;
};

}  // namespace

Value SampleRide(uint64_t seed, uint64_t index) {
  const Ride ride = RideNumbers(seed, index);
  const Station& start = kStations[Draw(seed, index, 1) % kStations.size()];
  const Station& end = kStations[Draw(seed, index, 2) % kStations.size()];
  const int64_t started_at = kFirstRideMicros + static_cast<int64_t>(index) * 30'000'000 +
                             static_cast<int64_t>(Draw(seed, index, 5) % 30'000'000);
  const double distance_km =
      static_cast<double>(ride.duration_seconds * (150 + Draw(seed, index, 6) % 200) / 1000) /
      100.0;
  ValueObject ride_fields;
  ride_fields.reserve(12);
  ride_fields.emplace_back("ride_id", Value::Int(static_cast<int64_t>(index) + 1));
  ride_fields.emplace_back("bike_id",
                           Value::Int(static_cast<int64_t>(1000 + Draw(seed, index, 7) % 9000)));
  ride_fields.emplace_back("rider_type", Value::String(ride.is_member ? "member" : "casual"));
  ride_fields.emplace_back("is_electric", Value::Bool(Draw(seed, index, 8) % 4 == 0));
  ride_fields.emplace_back("start_station", StationValue(start));
  ride_fields.emplace_back("end_station", StationValue(end));
  ride_fields.emplace_back("started_at", Value::Timestamp(started_at));
  ride_fields.emplace_back("ended_at",
                           Value::Timestamp(started_at + ride.duration_seconds * 1'000'000));
  ride_fields.emplace_back("duration_seconds", Value::Int(ride.duration_seconds));
  ride_fields.emplace_back("distance_km", Value::Double(distance_km));
  ride_fields.emplace_back("amount", Value::Decimal(ride.amount_cents, 10, 2));
  const uint64_t rating = Draw(seed, index, 9) % 6;  // 0: the rider gave no rating
  ride_fields.emplace_back("rating",
                           rating == 0 ? Value::Null() : Value::Int(static_cast<int64_t>(rating)));
  return Value::Object(std::move(ride_fields));
}

SampleFigures ComputeSampleFigures(uint64_t rows, uint64_t seed) {
  SampleFigures figures;
  figures.rows = rows;
  for (uint64_t index = 0; index < rows; ++index) {
    const Ride ride = RideNumbers(seed, index);
    figures.amount_cents_sum += ride.amount_cents;
    figures.duration_seconds_sum += ride.duration_seconds;
    figures.member_rides += ride.is_member ? 1 : 0;
  }
  return figures;
}

namespace internal {
std::unique_ptr<Source> MakeSampleSource(const config::ConnectorConfig& connector) {
  return std::make_unique<SampleSource>(static_cast<uint64_t>(connector.GetInteger("rows")),
                                        static_cast<uint64_t>(connector.GetInteger("seed")));
}
}  // namespace internal

}  // namespace skippr::sources
