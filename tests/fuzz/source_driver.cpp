#include "fuzz/source_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"

namespace skippr::fuzz {

namespace {

// What one read of the file gave, in order.
struct Reading {
  std::vector<sources::SourceRecord> records;
  std::vector<uint64_t> deadletter_rows;
  size_t batches = 0;
  // After the first batch: how much it held and where a resumed read starts.
  size_t first_batch_records = 0;
  size_t first_batch_deadletters = 0;
  sources::PartitionPosition first_position;
  sources::PartitionPosition last_position;
  std::optional<Status> error;
};

// The shaper as sync runs it: every batch absorbed, sealed, its columns taken and encoded.
class ShapingCheck {
 public:
  explicit ShapingCheck(schema::ShaperOptions options) : shaper_({}, std::move(options)) {}

  void Absorb(const sources::SourceBatch& batch) {
    schema::RecordOrigin origin{batch.partition};
    uint64_t conformed_rows = 0;
    for (const sources::SourceRecord& record : batch.records) {
      origin.line = record.line;
      origin.row = record.row;
      if (!shaper_.Absorb(record.value, origin, batch.context)) ++conformed_rows;
    }
    shaper_.Seal();
    std::vector<Batch> batches = shaper_.TakeBatches();
    uint64_t taken_rows = 0;
    for (const Batch& shaped : batches) {
      std::string reason;
      FUZZ_CHECK(shaped.Validate(&reason), "shaped batch: " + reason);
      taken_rows += static_cast<uint64_t>(shaped.num_rows);
    }
    FUZZ_CHECK(taken_rows == conformed_rows,
               fmt::format("{} records conformed, {} rows taken", conformed_rows, taken_rows));
    CheckWalRoundTrip(batches);
  }

 private:
  schema::Shaper shaper_;
};

Reading Read(sources::Source& source, const sources::SourcePositions& committed,
             const sources::ReadOptions& read_options, const std::string& path,
             ShapingCheck* shaping) {
  Reading reading;
  const Status opened = source.Open(committed, read_options);
  FUZZ_CHECK(opened.ok(), opened.ToString());
  while (true) {
    Result<std::optional<sources::SourceBatch>> next = source.Next();
    if (!next.ok()) {
      CheckCodeIn(next.status(),
                  {StatusCode::kInvalidArgument, StatusCode::kCorruption,
                   StatusCode::kNotSupported},
                  "File source Next()");
      reading.error = next.status();
      return reading;
    }
    if (!*next) return reading;
    sources::SourceBatch& batch = **next;
    FUZZ_CHECK(batch.partition == path, batch.partition);
    FUZZ_CHECK(batch.records.size() + batch.deadletters.size() <=
                   read_options.max_records_per_batch,
               "batch over max_records_per_batch");
    if (reading.batches++ == 0) {
      reading.first_batch_records = batch.records.size();
      reading.first_batch_deadletters = batch.deadletters.size();
      reading.first_position = batch.position;
    }
    reading.last_position = batch.position;
    for (const schema::Deadletter& deadletter : batch.deadletters) {
      reading.deadletter_rows.push_back(deadletter.origin.row);
    }
    if (shaping) shaping->Absorb(batch);
    for (sources::SourceRecord& record : batch.records) {
      reading.records.push_back(std::move(record));
    }
  }
}

// Records and deadletters together number the file's records 1..records_consumed, once each.
void CheckRowsAreComplete(const Reading& reading) {
  std::vector<uint64_t> rows = reading.deadletter_rows;
  uint64_t previous_line = 0;
  for (const sources::SourceRecord& record : reading.records) {
    rows.push_back(record.row);
    FUZZ_CHECK(record.line >= previous_line,
               fmt::format("line {} after line {}", record.line, previous_line));
    previous_line = record.line;
  }
  std::sort(rows.begin(), rows.end());
  FUZZ_CHECK(reading.last_position.is_closed, "a file read to its end is closed");
  FUZZ_CHECK(rows.size() == reading.last_position.records_consumed,
             fmt::format("{} records and deadletters, records_consumed {}", rows.size(),
                         reading.last_position.records_consumed));
  for (size_t i = 0; i < rows.size(); ++i) {
    FUZZ_CHECK(rows[i] == i + 1, fmt::format("row numbers are not 1..{}: {} at {}", rows.size(),
                                             rows[i], i));
  }
}

// A read resumed from the first batch's position gives exactly what the full read gave after it.
void CheckResumeReadsTheRest(const Reading& full, const Reading& resumed) {
  FUZZ_CHECK(resumed.records.size() == full.records.size() - full.first_batch_records,
             fmt::format("resumed read gave {} records, the rest of the full read is {}",
                         resumed.records.size(), full.records.size() - full.first_batch_records));
  for (size_t i = 0; i < resumed.records.size(); ++i) {
    const sources::SourceRecord& expected = full.records[full.first_batch_records + i];
    const sources::SourceRecord& actual = resumed.records[i];
    FUZZ_CHECK(actual.row == expected.row && actual.line == expected.line &&
                   actual.value == expected.value,
               fmt::format("resumed record {} is row {} line {}, expected row {} line {}", i,
                           actual.row, actual.line, expected.row, expected.line));
  }
  const std::vector<uint64_t> rest(full.deadletter_rows.begin() + full.first_batch_deadletters,
                                   full.deadletter_rows.end());
  FUZZ_CHECK(resumed.deadletter_rows == rest, "resumed deadletters differ");
  FUZZ_CHECK(resumed.error.has_value() == full.error.has_value(), "resumed error differs");
  if (full.error) FUZZ_CHECK(resumed.error->code() == full.error->code(), "resumed error code");
}

}  // namespace

void FuzzFileSource(const SourceFuzzOptions& options, const uint8_t* data, size_t size) {
  static const ScratchFile scratch(options.file_name);
  scratch.Write(data, size);

  config::ConnectorConfig connector;
  connector.kind = "File";
  connector.settings["path"] = scratch.path();
  connector.settings["format"] = options.format;
  Result<std::unique_ptr<sources::Source>> source = sources::MakeSource(connector);
  FUZZ_CHECK(source.ok(), source.status().ToString());

  // The input's size picks the batch size and the shaper's options, so that every setting is
  // exercised while each input reproduces exactly.
  sources::ReadOptions read_options;
  read_options.max_records_per_batch = 1 + size % 5;
  schema::ShaperOptions shaper_options;
  shaper_options.default_namespace = "fuzz";
  shaper_options.build_columns = true;
  if ((size / 5) % 2 == 1) shaper_options.namespace_fields = {"type"};
  shaper_options.flatten_events = (size / 10) % 2 == 1;
  ShapingCheck shaping(shaper_options);

  const Reading full = Read(**source, {}, read_options, scratch.path(), &shaping);
  if (full.error) return;
  if (size > 0) CheckRowsAreComplete(full);  // an empty file is one deadletter of row 0
  if (full.batches < 2) return;
  const Reading resumed = Read(**source, {{scratch.path(), full.first_position}}, read_options,
                               scratch.path(), nullptr);
  CheckResumeReadsTheRest(full, resumed);
}

}  // namespace skippr::fuzz
