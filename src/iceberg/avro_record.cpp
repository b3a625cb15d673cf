#include "iceberg/avro_record.hpp"

#include <fmt/format.h>

#include <limits>

#include "iceberg/avro_container.hpp"

namespace skippr::iceberg::internal {

// ----- RecordWriter ------------------------------------------------------------------------------

bool RecordWriter::Fail(const char* name, std::string_view action, int rc) {
  if (error_->ok()) {
    *error_ = Status::Internal(
        fmt::format("cannot {} the Avro field '{}': {}", action, name, AvroError(rc)));
  }
  return false;
}

void RecordWriter::Set(const char* name, int rc) {
  if (rc != 0) Fail(name, "set", rc);
}

bool RecordWriter::Field(const char* name, avro_value_t* field) {
  if (!error_->ok()) return false;
  const int rc = avro_value_get_by_name(&record_, name, field, nullptr);
  return rc == 0 || Fail(name, "find", rc);
}

bool RecordWriter::Branch(const char* name, bool is_present, avro_value_t* branch) {
  avro_value_t field;
  if (!Field(name, &field)) return false;
  int rc = avro_value_set_branch(&field, is_present ? 1 : 0, branch);
  if (rc != 0) return Fail(name, "choose the union branch of", rc);
  if (is_present) return true;
  rc = avro_value_set_null(branch);
  if (rc != 0) Fail(name, "set null", rc);
  return false;  // null: nothing more to fill
}

RecordWriter RecordWriter::Record(const char* name) {
  avro_value_t field{nullptr, nullptr};
  Field(name, &field);
  return RecordWriter(field, error_);  // inert after an error: every call checks error_ first
}

void RecordWriter::Bool(const char* name, bool value) {
  avro_value_t field;
  if (!Field(name, &field)) return;
  Set(name, avro_value_set_boolean(&field, value ? 1 : 0));
}

void RecordWriter::Int(const char* name, int32_t value) {
  avro_value_t field;
  if (!Field(name, &field)) return;
  Set(name, avro_value_set_int(&field, value));
}

void RecordWriter::Long(const char* name, int64_t value) {
  avro_value_t field;
  if (!Field(name, &field)) return;
  Set(name, avro_value_set_long(&field, value));
}

void RecordWriter::String(const char* name, std::string_view value) {
  avro_value_t field;
  if (!Field(name, &field)) return;
  // Avro C wants the terminating NUL counted in the length.
  const std::string terminated(value);
  Set(name, avro_value_set_string_len(&field, terminated.c_str(), terminated.size() + 1));
}

void RecordWriter::OptionalBool(const char* name, std::optional<bool> value) {
  avro_value_t branch;
  if (!Branch(name, value.has_value(), &branch)) return;
  Set(name, avro_value_set_boolean(&branch, *value ? 1 : 0));
}

void RecordWriter::OptionalInt(const char* name, std::optional<int32_t> value) {
  avro_value_t branch;
  if (!Branch(name, value.has_value(), &branch)) return;
  Set(name, avro_value_set_int(&branch, *value));
}

void RecordWriter::OptionalLong(const char* name, std::optional<int64_t> value) {
  avro_value_t branch;
  if (!Branch(name, value.has_value(), &branch)) return;
  Set(name, avro_value_set_long(&branch, *value));
}

void RecordWriter::OptionalString(const char* name, const std::optional<std::string>& value) {
  avro_value_t branch;
  if (!Branch(name, value.has_value(), &branch)) return;
  Set(name, avro_value_set_string_len(&branch, value->c_str(), value->size() + 1));
}

void RecordWriter::OptionalBytes(const char* name, const std::optional<std::string>& value) {
  avro_value_t branch;
  if (!Branch(name, value.has_value(), &branch)) return;
  Set(name, avro_value_set_bytes(&branch, const_cast<char*>(value->data()), value->size()));
}

void RecordWriter::Bytes(const char* name, std::string_view value) {
  avro_value_t field;
  if (!Field(name, &field)) return;
  Set(name, avro_value_set_bytes(&field, const_cast<char*>(value.data()), value.size()));
}

bool RecordWriter::Append(const char* name, avro_value_t& array, avro_value_t* item) {
  const int rc = avro_value_append(&array, item, nullptr);
  return rc == 0 || Fail(name, "append to", rc);
}

template <typename Fill>
void RecordWriter::OptionalArray(const char* name, bool is_present, const Fill& fill) {
  avro_value_t array;
  if (!Branch(name, is_present, &array)) return;
  fill(array);
}

void RecordWriter::OptionalIdToLongMap(const char* name,
                                       const std::map<int32_t, int64_t>& entries) {
  OptionalArray(name, !entries.empty(), [&](avro_value_t& array) {
    for (const auto& [field_id, count] : entries) {
      avro_value_t item;
      if (!Append(name, array, &item)) return;
      RecordWriter entry(item, error_);
      entry.Int("key", field_id);
      entry.Long("value", count);
    }
  });
}

void RecordWriter::OptionalIdToBytesMap(const char* name,
                                        const std::map<int32_t, std::string>& entries) {
  OptionalArray(name, !entries.empty(), [&](avro_value_t& array) {
    for (const auto& [field_id, bytes] : entries) {
      avro_value_t item;
      if (!Append(name, array, &item)) return;
      RecordWriter entry(item, error_);
      entry.Int("key", field_id);
      entry.Bytes("value", bytes);
    }
  });
}

void RecordWriter::OptionalLongList(const char* name, const std::vector<int64_t>& items) {
  OptionalArray(name, !items.empty(), [&](avro_value_t& array) {
    for (const int64_t value : items) {
      avro_value_t item;
      if (!Append(name, array, &item)) return;
      Set(name, avro_value_set_long(&item, value));
    }
  });
}

void RecordWriter::OptionalIntList(const char* name, const std::vector<int32_t>& items) {
  OptionalArray(name, !items.empty(), [&](avro_value_t& array) {
    for (const int32_t value : items) {
      avro_value_t item;
      if (!Append(name, array, &item)) return;
      Set(name, avro_value_set_int(&item, value));
    }
  });
}

void RecordWriter::OptionalRecordList(
    const char* name, size_t count,
    const std::function<void(size_t index, RecordWriter& item)>& fill) {
  OptionalArray(name, /*is_present=*/true, [&](avro_value_t& array) {
    for (size_t i = 0; i < count && error_->ok(); ++i) {
      avro_value_t item;
      if (!Append(name, array, &item)) return;
      RecordWriter item_writer(item, error_);
      fill(i, item_writer);
    }
  });
}

// ----- RecordReader ------------------------------------------------------------------------------

bool RecordReader::Fail(const char* name, std::string_view problem) {
  if (error_->ok()) {
    *error_ = Status::Corruption(fmt::format("field '{}.{}' {}", path_, name, problem));
  }
  return false;
}

std::optional<avro_value_t> RecordReader::Present(const char* name, bool is_required) {
  if (!error_->ok() || record_.iface == nullptr) return std::nullopt;
  avro_value_t value;
  if (avro_value_get_by_name(&record_, name, &value, nullptr) != 0) {
    if (is_required) Fail(name, "is missing from the file's schema");
    return std::nullopt;
  }
  if (avro_value_get_type(&value) == AVRO_UNION) {
    avro_value_t branch;
    if (const int rc = avro_value_get_current_branch(&value, &branch); rc != 0) {
      Fail(name, "has no union branch: " + AvroError(rc));
      return std::nullopt;
    }
    value = branch;
  }
  if (avro_value_get_type(&value) == AVRO_NULL) {
    if (is_required) Fail(name, "is null but required");
    return std::nullopt;
  }
  return value;
}

std::optional<int64_t> RecordReader::Integer(const char* name, bool is_required, bool allow_long) {
  const std::optional<avro_value_t> value = Present(name, is_required);
  if (!value) return std::nullopt;
  avro_value_t field = *value;
  const avro_type_t type = avro_value_get_type(&field);
  if (type == AVRO_INT32) {
    int32_t number = 0;
    avro_value_get_int(&field, &number);
    return number;
  }
  if (type == AVRO_INT64 && allow_long) {
    int64_t number = 0;
    avro_value_get_long(&field, &number);
    return number;
  }
  Fail(name, allow_long ? "is not a long" : "is not an int");
  return std::nullopt;
}

std::optional<std::string> RecordReader::Text(const char* name, bool is_required, bool is_bytes) {
  const std::optional<avro_value_t> value = Present(name, is_required);
  if (!value) return std::nullopt;
  avro_value_t field = *value;
  const avro_type_t type = avro_value_get_type(&field);
  if (type == AVRO_STRING && !is_bytes) {
    const char* text = nullptr;
    size_t size_with_nul = 0;
    avro_value_get_string(&field, &text, &size_with_nul);
    return std::string(text, size_with_nul > 0 ? size_with_nul - 1 : 0);
  }
  if ((type == AVRO_BYTES || type == AVRO_FIXED) && is_bytes) {
    const void* bytes = nullptr;
    size_t size = 0;
    if (type == AVRO_BYTES) {
      avro_value_get_bytes(&field, &bytes, &size);
    } else {
      avro_value_get_fixed(&field, &bytes, &size);
    }
    return std::string(static_cast<const char*>(bytes), size);
  }
  Fail(name, is_bytes ? "is not bytes" : "is not a string");
  return std::nullopt;
}

std::vector<avro_value_t> RecordReader::Items(const char* name) {
  std::vector<avro_value_t> items;
  const std::optional<avro_value_t> value = Present(name, /*is_required=*/false);
  if (!value) return items;
  avro_value_t array = *value;
  if (avro_value_get_type(&array) != AVRO_ARRAY) {
    Fail(name, "is not an array");
    return items;
  }
  size_t count = 0;
  avro_value_get_size(&array, &count);
  items.resize(count);
  for (size_t i = 0; i < count; ++i) avro_value_get_by_index(&array, i, &items[i], nullptr);
  return items;
}

RecordReader RecordReader::Record(const char* name) {
  const std::optional<avro_value_t> value = Present(name, /*is_required=*/true);
  avro_value_t field{nullptr, nullptr};
  if (value && avro_value_get_type(&*value) == AVRO_RECORD) {
    field = *value;
  } else if (value) {
    Fail(name, "is not a record");
  }
  return RecordReader(field, path_ + "." + name, error_);  // inert without a record
}

size_t RecordReader::FieldCount() {
  size_t count = 0;
  if (error_->ok() && record_.iface != nullptr) avro_value_get_size(&record_, &count);
  return count;
}

bool RecordReader::Bool(const char* name) {
  const std::optional<bool> flag = OptionalBool(name);
  if (!flag) Fail(name, "is null or missing but required");
  return flag.value_or(false);
}

int32_t RecordReader::Int(const char* name) {
  return static_cast<int32_t>(
      Integer(name, /*is_required=*/true, /*allow_long=*/false).value_or(0));
}

int64_t RecordReader::Long(const char* name) {
  return Integer(name, /*is_required=*/true, /*allow_long=*/true).value_or(0);
}

std::string RecordReader::String(const char* name) {
  return Text(name, /*is_required=*/true, /*is_bytes=*/false).value_or("");
}

std::optional<bool> RecordReader::OptionalBool(const char* name) {
  const std::optional<avro_value_t> value = Present(name, /*is_required=*/false);
  if (!value) return std::nullopt;
  avro_value_t field = *value;
  int flag = 0;
  if (avro_value_get_type(&field) != AVRO_BOOLEAN || avro_value_get_boolean(&field, &flag) != 0) {
    Fail(name, "is not a boolean");
    return std::nullopt;
  }
  return flag != 0;
}

std::optional<int32_t> RecordReader::OptionalInt(const char* name) {
  const std::optional<int64_t> number = Integer(name, /*is_required=*/false, /*allow_long=*/false);
  return number ? std::optional<int32_t>(static_cast<int32_t>(*number)) : std::nullopt;
}

std::optional<int64_t> RecordReader::OptionalLong(const char* name) {
  return Integer(name, /*is_required=*/false, /*allow_long=*/true);
}

std::optional<std::string> RecordReader::OptionalString(const char* name) {
  return Text(name, /*is_required=*/false, /*is_bytes=*/false);
}

std::optional<std::string> RecordReader::OptionalBytes(const char* name) {
  return Text(name, /*is_required=*/false, /*is_bytes=*/true);
}

std::map<int32_t, int64_t> RecordReader::IdToLongMap(const char* name) {
  std::map<int32_t, int64_t> entries;
  for (const RecordReader& item : RecordList(name)) {
    RecordReader entry = item;
    const int32_t field_id = entry.Int("key");
    if (!entries.emplace(field_id, entry.Long("value")).second) {
      Fail(name, fmt::format("has the key {} twice", field_id));
    }
  }
  return entries;
}

std::map<int32_t, std::string> RecordReader::IdToBytesMap(const char* name) {
  std::map<int32_t, std::string> entries;
  for (const RecordReader& item : RecordList(name)) {
    RecordReader entry = item;
    const int32_t field_id = entry.Int("key");
    std::optional<std::string> bytes = entry.Text("value", /*is_required=*/true, /*is_bytes=*/true);
    if (!entries.emplace(field_id, std::move(bytes).value_or("")).second) {
      Fail(name, fmt::format("has the key {} twice", field_id));
    }
  }
  return entries;
}

std::vector<int64_t> RecordReader::LongList(const char* name) {
  std::vector<int64_t> values;
  for (avro_value_t item : Items(name)) {
    int64_t value = 0;
    if (avro_value_get_type(&item) != AVRO_INT64 || avro_value_get_long(&item, &value) != 0) {
      Fail(name, "has an item that is not a long");
      return {};
    }
    values.push_back(value);
  }
  return values;
}

std::vector<int32_t> RecordReader::IntList(const char* name) {
  std::vector<int32_t> values;
  for (avro_value_t item : Items(name)) {
    int32_t value = 0;
    if (avro_value_get_type(&item) != AVRO_INT32 || avro_value_get_int(&item, &value) != 0) {
      Fail(name, "has an item that is not an int");
      return {};
    }
    values.push_back(value);
  }
  return values;
}

std::vector<RecordReader> RecordReader::RecordList(const char* name) {
  std::vector<RecordReader> records;
  const std::vector<avro_value_t> items = Items(name);
  for (size_t i = 0; i < items.size(); ++i) {
    avro_value_t item = items[i];
    if (avro_value_get_type(&item) != AVRO_RECORD) {
      Fail(name, "has an item that is not a record");
      return {};
    }
    records.emplace_back(item, fmt::format("{}.{}[{}]", path_, name, i), error_);
  }
  return records;
}

}  // namespace skippr::iceberg::internal
