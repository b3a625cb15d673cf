// Internal to iceberg/: typed access to fields of Avro C generic records, by name, in the shapes
// the Iceberg manifest schemas use (optional = a union with null first; a map with int keys = an
// array of key/value records). Both classes keep the first error and turn every later call into a
// no-op, so filling or reading a record is a flat list of calls followed by one status check.
#pragma once

#include <avro.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace skippr::iceberg::internal {

// Fills a record of a schema skipprd wrote itself, so any failure is a bug in that schema:
// Internal.
class RecordWriter {
 public:
  RecordWriter(avro_value_t record, Status* first_error) : record_(record), error_(first_error) {}

  RecordWriter Record(const char* name);  // a required nested record

  void Bool(const char* name, bool value);
  void Int(const char* name, int32_t value);
  void Long(const char* name, int64_t value);
  void String(const char* name, std::string_view value);

  void OptionalBool(const char* name, std::optional<bool> value);
  void OptionalInt(const char* name, std::optional<int32_t> value);
  void OptionalLong(const char* name, std::optional<int64_t> value);
  void OptionalString(const char* name, const std::optional<std::string>& value);
  void OptionalBytes(const char* name, const std::optional<std::string>& value);

  // Optional maps and lists: null when empty.
  void OptionalIdToLongMap(const char* name, const std::map<int32_t, int64_t>& entries);
  void OptionalIdToBytesMap(const char* name, const std::map<int32_t, std::string>& entries);
  void OptionalLongList(const char* name, const std::vector<int64_t>& items);
  void OptionalIntList(const char* name, const std::vector<int32_t>& items);

  // An optional list of `count` records, written even when empty; `fill` fills record i.
  void OptionalRecordList(const char* name, size_t count,
                          const std::function<void(size_t index, RecordWriter& item)>& fill);

 private:
  bool Fail(const char* name, std::string_view action, int rc);
  void Set(const char* name, int rc);  // records a failed avro_value_set_*
  void Bytes(const char* name, std::string_view value);
  bool Append(const char* name, avro_value_t& array, avro_value_t* item);
  bool Field(const char* name, avro_value_t* field);
  // The union's null branch (is_present false, returns false) or its value branch.
  bool Branch(const char* name, bool is_present, avro_value_t* branch);
  template <typename Fill>
  void OptionalArray(const char* name, bool is_present, const Fill& fill);

  avro_value_t record_;
  Status* error_;
};

// Reads a decoded record of a file's own schema, which may come from another Iceberg writer: fields
// are found by name, a missing optional field reads as null, and an int is accepted where a long is
// expected (Avro's promotion). Failures are Corruption naming the field ("manifest_entry.status").
class RecordReader {
 public:
  RecordReader(avro_value_t record, std::string path, Status* first_error)
      : record_(record), path_(std::move(path)), error_(first_error) {}

  RecordReader Record(const char* name);
  size_t FieldCount();

  bool Bool(const char* name);
  int32_t Int(const char* name);
  int64_t Long(const char* name);
  std::string String(const char* name);

  std::optional<bool> OptionalBool(const char* name);
  std::optional<int32_t> OptionalInt(const char* name);
  std::optional<int64_t> OptionalLong(const char* name);
  std::optional<std::string> OptionalString(const char* name);
  std::optional<std::string> OptionalBytes(const char* name);

  // Null and missing read as empty.
  std::map<int32_t, int64_t> IdToLongMap(const char* name);
  std::map<int32_t, std::string> IdToBytesMap(const char* name);
  std::vector<int64_t> LongList(const char* name);
  std::vector<int32_t> IntList(const char* name);
  std::vector<RecordReader> RecordList(const char* name);

 private:
  bool Fail(const char* name, std::string_view problem);
  // The field's value with any union unwrapped; nullopt when it is null or missing (an error when
  // `is_required`).
  std::optional<avro_value_t> Present(const char* name, bool is_required);
  std::optional<int64_t> Integer(const char* name, bool is_required, bool allow_long);
  std::optional<std::string> Text(const char* name, bool is_required, bool is_bytes);
  std::vector<avro_value_t> Items(const char* name);

  avro_value_t record_;
  std::string path_;  // "manifest_entry.data_file", for messages
  Status* error_;
};

}  // namespace skippr::iceberg::internal
