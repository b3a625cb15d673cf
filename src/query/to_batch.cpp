// A DuckDB query result read back into a columnar Batch (Engine::RunToBatch): the inverse of
// wal_scan's Fill, for SQL that reshapes batches (transform.ops) and must hand a Batch on.
#include <duckdb.h>
#include <fmt/format.h>

#include <cstring>

#include "core/check.hpp"
#include "query/query.hpp"

namespace skippr::query {

namespace detail {
std::string DuckTypeName(duckdb_logical_type type);  // engine.cpp
}  // namespace detail

namespace {

// How one DuckDB column (or nested child) maps onto a Batch column, decided once per result.
struct ColumnMap {
  duckdb_type duck_type = DUCKDB_TYPE_INVALID;
  duckdb_type decimal_storage = DUCKDB_TYPE_INVALID;  // DECIMAL: the integer type holding it
  LogicalType type = LogicalType::String();
  std::vector<ColumnMap> children;  // struct fields; list: element; map: key, value
};

struct TypeHandle {
  duckdb_logical_type type;
  explicit TypeHandle(duckdb_logical_type t) : type(t) {}
  ~TypeHandle() { duckdb_destroy_logical_type(&type); }
  TypeHandle(const TypeHandle&) = delete;
  TypeHandle& operator=(const TypeHandle&) = delete;
};

Status Unsupported(const std::string& column, duckdb_logical_type type) {
  return Status::InvalidArgument(fmt::format(
      "column '{}' has DuckDB type {}, which skipprd cannot store; CAST it to one of {}", column,
      detail::DuckTypeName(type), PrimitiveTypeNames()));
}

Result<ColumnMap> MapType(const std::string& column, duckdb_logical_type type) {
  ColumnMap map;
  map.duck_type = duckdb_get_type_id(type);
  switch (map.duck_type) {
    case DUCKDB_TYPE_BOOLEAN:
      map.type = LogicalType::Boolean();
      break;
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_UTINYINT:
    case DUCKDB_TYPE_USMALLINT:
      map.type = LogicalType::Int();
      break;
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_UINTEGER:
      map.type = LogicalType::Long();
      break;
    case DUCKDB_TYPE_FLOAT:
      map.type = LogicalType::Float();
      break;
    case DUCKDB_TYPE_DOUBLE:
      map.type = LogicalType::Double();
      break;
    case DUCKDB_TYPE_DECIMAL: {
      map.decimal_storage = duckdb_decimal_internal_type(type);
      SKIPPR_ASSIGN_OR_RETURN(
          map.type, LogicalType::Decimal(duckdb_decimal_width(type), duckdb_decimal_scale(type)));
      break;
    }
    case DUCKDB_TYPE_DATE:
      map.type = LogicalType::Date();
      break;
    case DUCKDB_TYPE_TIME:
      map.type = LogicalType::Time();
      break;
    case DUCKDB_TYPE_TIMESTAMP:
    case DUCKDB_TYPE_TIMESTAMP_S:
    case DUCKDB_TYPE_TIMESTAMP_MS:
    case DUCKDB_TYPE_TIMESTAMP_NS:
      map.type = LogicalType::Timestamp();
      break;
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      map.type = LogicalType::TimestampTz();
      break;
    case DUCKDB_TYPE_VARCHAR:
    case DUCKDB_TYPE_SQLNULL:
      map.type = LogicalType::String();
      break;  // NULL: all rows null
    case DUCKDB_TYPE_BLOB:
      map.type = LogicalType::Binary();
      break;
    case DUCKDB_TYPE_UUID:
      map.type = LogicalType::Uuid();
      break;
    case DUCKDB_TYPE_STRUCT: {
      std::vector<Field> fields;
      const idx_t count = duckdb_struct_type_child_count(type);
      for (idx_t i = 0; i < count; ++i) {
        char* raw_name = duckdb_struct_type_child_name(type, i);
        Field field;
        field.name = raw_name ? raw_name : "";
        duckdb_free(raw_name);
        TypeHandle child(duckdb_struct_type_child_type(type, i));
        SKIPPR_ASSIGN_OR_RETURN(ColumnMap child_map,
                                MapType(column + "." + field.name, child.type));
        field.type = child_map.type;
        fields.push_back(std::move(field));
        map.children.push_back(std::move(child_map));
      }
      map.type = LogicalType::Struct(std::move(fields));
      break;
    }
    case DUCKDB_TYPE_LIST: {
      TypeHandle element(duckdb_list_type_child_type(type));
      SKIPPR_ASSIGN_OR_RETURN(ColumnMap element_map, MapType(column + ".element", element.type));
      map.type = LogicalType::List(Field{0, "element", element_map.type, true});
      map.children.push_back(std::move(element_map));
      break;
    }
    case DUCKDB_TYPE_MAP: {
      TypeHandle key(duckdb_map_type_key_type(type));
      TypeHandle value(duckdb_map_type_value_type(type));
      if (duckdb_get_type_id(key.type) != DUCKDB_TYPE_VARCHAR) return Unsupported(column, type);
      SKIPPR_ASSIGN_OR_RETURN(ColumnMap key_map, MapType(column + ".key", key.type));
      SKIPPR_ASSIGN_OR_RETURN(ColumnMap value_map, MapType(column + ".value", value.type));
      map.type = LogicalType::Map(Field{0, "key", key_map.type, false},
                                  Field{0, "value", value_map.type, true});
      map.children.push_back(std::move(key_map));
      map.children.push_back(std::move(value_map));
      break;
    }
    default:
      return Unsupported(column, type);
  }
  return map;
}

void PushValidity(Column& column, bool is_valid) {
  if ((column.length >> 3) >= static_cast<int64_t>(column.validity.size())) {
    column.validity.push_back(0);
  }
  if (is_valid)
    column.validity[column.length >> 3] |= static_cast<uint8_t>(1u << (column.length & 7));
}

template <typename T>
T At(duckdb_vector vector, idx_t row) {
  T value;
  std::memcpy(&value, static_cast<const char*>(duckdb_vector_get_data(vector)) + row * sizeof(T),
              sizeof(T));
  return value;
}

void PushFixed(Column& column, const void* bytes, size_t size) {
  const auto* begin = static_cast<const uint8_t*>(bytes);
  column.fixed.insert(column.fixed.end(), begin, begin + size);
}

void PushInt64(Column& column, int64_t value) { PushFixed(column, &value, 8); }

// An integer-like DuckDB value as int64 (the Batch's fixed layout for int, long and dates).
int64_t IntegerAt(duckdb_type type, duckdb_vector vector, idx_t row) {
  switch (type) {
    case DUCKDB_TYPE_TINYINT:
      return At<int8_t>(vector, row);
    case DUCKDB_TYPE_SMALLINT:
      return At<int16_t>(vector, row);
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_DATE:
      return At<int32_t>(vector, row);
    case DUCKDB_TYPE_UTINYINT:
      return At<uint8_t>(vector, row);
    case DUCKDB_TYPE_USMALLINT:
      return At<uint16_t>(vector, row);
    case DUCKDB_TYPE_UINTEGER:
      return At<uint32_t>(vector, row);
    case DUCKDB_TYPE_TIMESTAMP_S:
      return At<int64_t>(vector, row) * 1'000'000;
    case DUCKDB_TYPE_TIMESTAMP_MS:
      return At<int64_t>(vector, row) * 1'000;
    case DUCKDB_TYPE_TIMESTAMP_NS:
      return At<int64_t>(vector, row) / 1'000;
    default:
      return At<int64_t>(vector, row);  // BIGINT, TIME, TIMESTAMP, TIMESTAMP_TZ
  }
}

void WriteBigEndian64(uint64_t value, unsigned char* bytes) {
  for (int i = 7; i >= 0; --i) {
    bytes[i] = static_cast<unsigned char>(value & 0xff);
    value >>= 8;
  }
}

void PushBytes(Column& column, std::string_view bytes) {
  column.bytes.append(bytes);
  column.offsets.push_back(static_cast<int64_t>(column.bytes.size()));
}

void AppendRows(Column& column, const ColumnMap& map, duckdb_vector vector, idx_t begin, idx_t end);

// One valid value of a non-nested column.
void AppendScalar(Column& column, const ColumnMap& map, duckdb_vector vector, idx_t row) {
  switch (map.type.id()) {
    case TypeId::kBoolean:
      column.fixed.push_back(At<bool>(vector, row) ? 1 : 0);
      break;
    case TypeId::kFloat: {
      const double value = At<float>(vector, row);
      PushFixed(column, &value, 8);
      break;
    }
    case TypeId::kDouble: {
      const double value = At<double>(vector, row);
      PushFixed(column, &value, 8);
      break;
    }
    case TypeId::kDecimal: {
      // Batch: 16-byte little-endian two's complement; DuckDB's hugeint {lower, upper} has that
      // layout, narrower storage is sign-extended.
      if (map.decimal_storage == DUCKDB_TYPE_HUGEINT) {
        const auto value = At<duckdb_hugeint>(vector, row);
        PushFixed(column, &value.lower, 8);
        PushFixed(column, &value.upper, 8);
      } else {
        const int64_t low = IntegerAt(map.decimal_storage, vector, row);
        const int64_t high = low < 0 ? -1 : 0;
        PushFixed(column, &low, 8);
        PushFixed(column, &high, 8);
      }
      break;
    }
    case TypeId::kString:
    case TypeId::kBinary: {
      auto* strings = static_cast<duckdb_string_t*>(duckdb_vector_get_data(vector));
      PushBytes(column, std::string_view(duckdb_string_t_data(&strings[row]),
                                         duckdb_string_t_length(strings[row])));
      break;
    }
    case TypeId::kUuid: {
      // wal_scan's Fill in reverse: the top bit flipped back, then both halves big-endian.
      const auto value = At<duckdb_hugeint>(vector, row);
      unsigned char bytes[16];
      WriteBigEndian64(static_cast<uint64_t>(value.upper) ^ (uint64_t{1} << 63), bytes);
      WriteBigEndian64(value.lower, bytes + 8);
      PushBytes(column, std::string_view(reinterpret_cast<const char*>(bytes), 16));
      break;
    }
    default:
      PushInt64(column, IntegerAt(map.duck_type, vector, row));
      break;
  }
}

void AppendNested(Column& column, const ColumnMap& map, duckdb_vector vector, idx_t row) {
  switch (map.type.id()) {
    case TypeId::kStruct:
      for (size_t c = 0; c < map.children.size(); ++c) {
        AppendRows(column.children[c], map.children[c], duckdb_struct_vector_get_child(vector, c),
                   row, row + 1);
      }
      break;
    case TypeId::kList:
    case TypeId::kMap: {
      const auto entry = At<duckdb_list_entry>(vector, row);
      duckdb_vector child = duckdb_list_vector_get_child(vector);
      if (map.type.id() == TypeId::kList) {
        AppendRows(column.children[0], map.children[0], child, entry.offset,
                   entry.offset + entry.length);
      } else {  // a MAP is a list of STRUCT(key, value)
        for (size_t c = 0; c < 2; ++c) {
          AppendRows(column.children[c], map.children[c], duckdb_struct_vector_get_child(child, c),
                     entry.offset, entry.offset + entry.length);
        }
      }
      column.offsets.push_back(column.children[0].length);
      break;
    }
    default:
      SKIPPR_CHECK(false);
  }
}

void AppendRows(Column& column, const ColumnMap& map, duckdb_vector vector, idx_t begin,
                idx_t end) {
  const uint64_t* validity = duckdb_vector_get_validity(vector);
  for (idx_t row = begin; row < end; ++row) {
    const bool is_valid =
        map.duck_type != DUCKDB_TYPE_SQLNULL &&
        (validity == nullptr || duckdb_validity_row_is_valid(const_cast<uint64_t*>(validity), row));
    if (!is_valid) {
      column.AppendNull();
      continue;
    }
    PushValidity(column, true);
    if (map.type.is_nested()) {
      AppendNested(column, map, vector, row);
    } else {
      AppendScalar(column, map, vector, row);
    }
    ++column.length;
  }
}

}  // namespace

namespace detail {

// Converts the chunks of one result into Batches; the column maps are decided once, from the
// result's column types.
class ChunkConverter {
 public:
  static Result<ChunkConverter> ForResult(duckdb_result& result) {
    ChunkConverter converter;
    const idx_t columns = duckdb_column_count(&result);
    for (idx_t c = 0; c < columns; ++c) {
      Field field;
      field.name = duckdb_column_name(&result, c);
      TypeHandle type(duckdb_column_logical_type(&result, c));
      SKIPPR_ASSIGN_OR_RETURN(ColumnMap map, MapType(field.name, type.type));
      field.type = map.type;
      converter.fields_.push_back(std::move(field));
      converter.maps_.push_back(std::move(map));
    }
    return converter;
  }

  const std::vector<Field>& fields() const { return fields_; }

  Batch EmptyBatch() const {
    Batch batch;
    batch.fields = fields_;
    for (const Field& field : fields_) batch.columns.emplace_back(field.type);
    return batch;
  }

  // Appends a chunk's rows to `batch` (made by EmptyBatch).
  void Append(duckdb_data_chunk chunk, Batch& batch) const {
    const idx_t size = duckdb_data_chunk_get_size(chunk);
    for (size_t c = 0; c < maps_.size(); ++c) {
      AppendRows(batch.columns[c], maps_[c], duckdb_data_chunk_get_vector(chunk, c), 0, size);
    }
    batch.num_rows += static_cast<int64_t>(size);
  }

 private:
  std::vector<Field> fields_;
  std::vector<ColumnMap> maps_;
};

Result<Batch> ResultToBatch(duckdb_result& result) {
  SKIPPR_ASSIGN_OR_RETURN(const ChunkConverter converter, ChunkConverter::ForResult(result));
  Batch batch = converter.EmptyBatch();
  while (true) {
    duckdb_data_chunk chunk = duckdb_fetch_chunk(result);
    if (chunk == nullptr) break;
    converter.Append(chunk, batch);
    duckdb_destroy_data_chunk(&chunk);
  }
  std::string reason;
  SKIPPR_CHECK_MSG(batch.Validate(&reason), reason.c_str());
  return batch;
}

// A statement's streaming result, read as Batches of whole chunks.
class StreamingBatches final : public BatchStream {
 public:
  StreamingBatches(duckdb_pending_result pending, duckdb_result result, ChunkConverter converter,
                   std::vector<std::string> header, std::vector<std::string> column_types)
      : pending_(pending),
        result_(result),
        converter_(std::move(converter)),
        header_(std::move(header)),
        column_types_(std::move(column_types)) {}
  ~StreamingBatches() override {
    duckdb_destroy_result(&result_);
    duckdb_destroy_pending(&pending_);
  }

  const std::vector<std::string>& header() const override { return header_; }
  const std::vector<std::string>& column_types() const override { return column_types_; }
  const std::vector<Field>& fields() const override { return converter_.fields(); }

  Result<std::optional<Batch>> Next(int64_t max_rows) override {
    if (is_done_) return std::optional<Batch>();
    Batch batch = converter_.EmptyBatch();
    while (batch.num_rows < max_rows) {
      duckdb_data_chunk chunk = duckdb_fetch_chunk(result_);
      if (chunk == nullptr) {
        is_done_ = true;
        if (const char* error = duckdb_result_error(&result_); error != nullptr) {
          return Status::InvalidArgument(error);
        }
        break;
      }
      converter_.Append(chunk, batch);
      duckdb_destroy_data_chunk(&chunk);
    }
    std::string reason;
    SKIPPR_CHECK_MSG(batch.Validate(&reason), reason.c_str());
    if (batch.num_rows == 0 && is_done_) return std::optional<Batch>();
    return std::optional<Batch>(std::move(batch));
  }

 private:
  duckdb_pending_result pending_;
  duckdb_result result_;
  const ChunkConverter converter_;
  std::vector<std::string> header_;
  std::vector<std::string> column_types_;
  bool is_done_ = false;
};

Result<std::unique_ptr<BatchStream>> StreamResultAsBatches(duckdb_pending_result pending,
                                                           duckdb_result result,
                                                           std::vector<std::string> header,
                                                           std::vector<std::string> column_types) {
  Result<ChunkConverter> converter = ChunkConverter::ForResult(result);
  if (!converter.ok()) {
    duckdb_destroy_result(&result);
    duckdb_destroy_pending(&pending);
    return converter.status();
  }
  return std::unique_ptr<BatchStream>(new StreamingBatches(pending, result, std::move(*converter),
                                                            std::move(header),
                                                            std::move(column_types)));
}

// Whether skipprd has a column for a value of this type (else the stream reads it as text).
bool HasBatchColumn(duckdb_logical_type type) { return MapType("", type).ok(); }

}  // namespace detail

}  // namespace skippr::query
