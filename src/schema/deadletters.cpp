// Deadletters as data: the fixed row schema, failure codes, stable ids, and the columns one WAL
// commit carries (docs/formats/deadletters.md).
#include <fmt/format.h>

#include <array>
#include <utility>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "schema/schema.hpp"

namespace skippr::schema {

namespace {

// The length of the valid UTF-8 sequence starting at text[i], or 0 when none starts there
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}


// Column order of DeadletterSchema(); the ids are the positions + 1 and never change.
enum DeadletterColumn : size_t {
  kId,
  kNamespace,
  kRecord,
  kRecordTruncated,
  kError,
  kFailureCode,
  kEventTime,
  kProcessedTime,
  kSourceUri,
  kOffsetKey,
  kOffsetPos,
  kLine,
  kByteOffset,
  kColumnCount,
};

NamespaceSchema BuildDeadletterSchema() {
  struct Column {
    const char* name;
    LogicalType type;
    bool nullable;
  };
  const std::array<Column, kColumnCount> columns = {{
      {"id", LogicalType::String(), false},
      {"namespace", LogicalType::String(), true},
      {"record", LogicalType::String(), true},
      {"record_truncated", LogicalType::Boolean(), false},
      {"error", LogicalType::String(), false},
      {"failure_code", LogicalType::String(), false},
      {"event_time", LogicalType::TimestampTz(), true},
      {"processed_time", LogicalType::TimestampTz(), false},
      {"source_uri", LogicalType::String(), false},
      {"offset_key", LogicalType::String(), false},
      {"offset_pos", LogicalType::Long(), true},
      {"line", LogicalType::Long(), true},
      {"byte_offset", LogicalType::Long(), true},
  }};
  NamespaceSchema schema;
  schema.name = std::string(kDeadlettersNamespace);
  schema.schema_id = 1;
  for (const Column& column : columns) {
    schema.fields.push_back(
        Field{++schema.last_field_id, column.name, column.type, column.nullable});
  }
  schema.history.push_back({1, {"the fixed deadletter schema, version 1"}});
  return schema;
}

// Appends a string, an integer or a null straight to a column (the Value path would copy the
// record once more).
void AppendText(Column& column, std::string_view text) { column.Append(Value::String(ValidUtf8(text))); }

void AppendOptionalInteger(Column& column, std::optional<int64_t> value) {
  value ? column.Append(Value::Int(*value)) : column.AppendNull();
}

Batch EmptyDeadletterBatch() {
  const NamespaceSchema& schema = DeadletterSchema();
  Batch batch;
  batch.namespace_name = schema.name;
  batch.schema_id = schema.schema_id;
  batch.fields = schema.fields;
  for (const Field& field : schema.fields) batch.columns.emplace_back(field.type);
  return batch;
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string valid;
  valid.reserve(text.size());
  size_t run_start = 0;  // the valid bytes since the last bad one, appended in one piece
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(text, i);
    if (length > 0) {
      i += length;
      continue;
    }
    valid.append(text.substr(run_start, i - run_start));
    valid += "\xEF\xBF\xBD";
    run_start = ++i;
  }
  valid.append(text.substr(run_start));
  return valid;
}


std::string_view FailureCodeName(FailureCode code) {
  switch (code) {
    case FailureCode::kUnclassified: return "unclassified";
    case FailureCode::kInvalidJson: return "invalid_json";
    case FailureCode::kInvalidCsv: return "invalid_csv";
    case FailureCode::kCsvFieldCount: return "csv_field_count";
    case FailureCode::kInvalidUtf8: return "invalid_utf8";
    case FailureCode::kRecordTooLarge: return "record_too_large";
    case FailureCode::kNotAnObject: return "not_an_object";
    case FailureCode::kDuplicateField: return "duplicate_field";
    case FailureCode::kNestingTooDeep: return "nesting_too_deep";
    case FailureCode::kMixedList: return "mixed_list";
    case FailureCode::kMissingNamespaceField: return "missing_namespace_field";
    case FailureCode::kMissingKey: return "missing_key";
    case FailureCode::kTypeConflict: return "type_conflict";
    case FailureCode::kUnreadableFile: return "unreadable_file";
    case FailureCode::kUnconvertibleRow: return "unconvertible_row";
  }
  return "unclassified";
}

Deadletter MakeDeadletter(RecordOrigin origin, FailureCode code, std::string reason,
                          std::string_view raw_record) {
  Deadletter deadletter{std::move(origin), std::move(reason), {}, code};
  if (raw_record.size() > kDeadletterRecordMaxBytes) {
    size_t cut = kDeadletterRecordMaxBytes;
    // Back off continuation bytes so the cut never splits a character.
    while (cut > 0 && (static_cast<unsigned char>(raw_record[cut]) & 0xC0) == 0x80) --cut;
    raw_record = raw_record.substr(0, cut);
    deadletter.is_payload_truncated = true;
  }
  deadletter.payload = std::string(raw_record);
  return deadletter;
}

std::string DeadletterId(const Deadletter& deadletter) {
  const RecordOrigin& origin = deadletter.origin;
  // Length-prefixed: a source name may hold any character, a newline included.
  return Sha256Hex(fmt::format("skippr-deadletter-v1\n{}:{}\n{}\n{}\n", origin.source.size(),
                               origin.source, origin.row, origin.line))
      .substr(0, 32);
}

const NamespaceSchema& DeadletterSchema() {
  static const NamespaceSchema schema = BuildDeadletterSchema();
  return schema;
}

DeadletterRows::DeadletterRows() : batch_(EmptyDeadletterBatch()) {}

void DeadletterRows::Append(const std::vector<Deadletter>& deadletters,
                            int64_t processed_unix_micros) {
  std::vector<Column>& columns = batch_.columns;
  for (const Deadletter& deadletter : deadletters) {
    const RecordOrigin& origin = deadletter.origin;
    AppendText(columns[kId], DeadletterId(deadletter));
    deadletter.namespace_name.empty() ? columns[kNamespace].AppendNull()
                                      : AppendText(columns[kNamespace], deadletter.namespace_name);
    deadletter.payload.empty() ? columns[kRecord].AppendNull()
                               : AppendText(columns[kRecord], deadletter.payload);
    columns[kRecordTruncated].Append(Value::Bool(deadletter.is_payload_truncated));
    AppendText(columns[kError], deadletter.reason);
    AppendText(columns[kFailureCode], FailureCodeName(deadletter.failure_code));
    deadletter.event_unix_micros
        ? columns[kEventTime].Append(Value::TimestampTz(*deadletter.event_unix_micros))
        : columns[kEventTime].AppendNull();
    columns[kProcessedTime].Append(Value::TimestampTz(processed_unix_micros));
    AppendText(columns[kSourceUri], origin.source);
    AppendText(columns[kOffsetKey], origin.source);
    const auto positive = [](uint64_t value) {
      return value > 0 ? std::optional<int64_t>(static_cast<int64_t>(value)) : std::nullopt;
    };
    AppendOptionalInteger(columns[kOffsetPos], positive(origin.row));
    AppendOptionalInteger(columns[kLine], positive(origin.line));
    AppendOptionalInteger(columns[kByteOffset],
                          deadletter.byte_offset
                              ? std::optional<int64_t>(static_cast<int64_t>(*deadletter.byte_offset))
                              : std::nullopt);
    ++batch_.num_rows;
  }
}

Batch DeadletterRows::Take() {
  Batch taken = std::exchange(batch_, EmptyDeadletterBatch());
  std::string reason;
  SKIPPR_CHECK_MSG(taken.Validate(&reason), reason.c_str());
  return taken;
}

}  // namespace skippr::schema
