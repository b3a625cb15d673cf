// wal_scan(pipeline VARCHAR, namespace VARCHAR [, with_change_columns := BOOLEAN]): a DuckDB table
// function that fills output vectors directly from the columnar buffers of Batches, projecting each
// batch onto the table's current schema by field id; the change columns (query.hpp) number the rows
// in batch order and mark CDC deletes. Batches are read while the scan runs, each by the thread
// that claims it.
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "query/query.hpp"
#include "query/scan_counters.hpp"

namespace skippr::query::detail {

using SourceLookup =
    std::function<std::shared_ptr<const TableSource>(const std::string&, const std::string&)>;

namespace {

// The threads a scan of a streaming list may run on; DuckDB gives it at most its own.
constexpr idx_t kStreamingScanThreads = 64;

// ---------------------------------------------------------------------------------------------
// Types

struct LogicalTypeHandle {
  duckdb_logical_type type = nullptr;
  explicit LogicalTypeHandle(duckdb_logical_type t) : type(t) {}
  ~LogicalTypeHandle() {
    if (type != nullptr) duckdb_destroy_logical_type(&type);
  }
  LogicalTypeHandle(const LogicalTypeHandle&) = delete;
  LogicalTypeHandle& operator=(const LogicalTypeHandle&) = delete;
};

duckdb_logical_type ToDuckType(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kBoolean: return duckdb_create_logical_type(DUCKDB_TYPE_BOOLEAN);
    case TypeId::kInt: return duckdb_create_logical_type(DUCKDB_TYPE_INTEGER);
    case TypeId::kLong: return duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
    case TypeId::kFloat: return duckdb_create_logical_type(DUCKDB_TYPE_FLOAT);
    case TypeId::kDouble: return duckdb_create_logical_type(DUCKDB_TYPE_DOUBLE);
    case TypeId::kDecimal:
      return duckdb_create_decimal_type(static_cast<uint8_t>(type.decimal_precision()),
                                        static_cast<uint8_t>(type.decimal_scale()));
    case TypeId::kDate: return duckdb_create_logical_type(DUCKDB_TYPE_DATE);
    case TypeId::kTime: return duckdb_create_logical_type(DUCKDB_TYPE_TIME);
    case TypeId::kTimestamp: return duckdb_create_logical_type(DUCKDB_TYPE_TIMESTAMP);
    case TypeId::kTimestampTz: return duckdb_create_logical_type(DUCKDB_TYPE_TIMESTAMP_TZ);
    case TypeId::kString: return duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
    case TypeId::kBinary: return duckdb_create_logical_type(DUCKDB_TYPE_BLOB);
    case TypeId::kUuid: return duckdb_create_logical_type(DUCKDB_TYPE_UUID);
    case TypeId::kStruct: {
      const std::vector<Field>& fields = type.children();
      std::vector<duckdb_logical_type> types;
      std::vector<const char*> names;
      for (const Field& field : fields) {
        types.push_back(ToDuckType(field.type));
        names.push_back(field.name.c_str());
      }
      duckdb_logical_type result =
          duckdb_create_struct_type(types.data(), names.data(), static_cast<idx_t>(types.size()));
      for (duckdb_logical_type& t : types) duckdb_destroy_logical_type(&t);
      return result;
    }
    case TypeId::kList: {
      LogicalTypeHandle element(ToDuckType(type.children()[0].type));
      return duckdb_create_list_type(element.type);
    }
    case TypeId::kMap: {
      LogicalTypeHandle key(ToDuckType(type.children()[0].type));
      LogicalTypeHandle value(ToDuckType(type.children()[1].type));
      return duckdb_create_map_type(key.type, value.type);
    }
  }
  return duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
}

// Whether a batch column of type `from` can be read as the table's type `to` (same type, or a
// widening the scan casts). Nested types are checked child by child (struct children by id).
bool Readable(const LogicalType& from, const LogicalType& to, std::string* why) {
  const auto fail = [&] {
    if (why) *why = fmt::format("a batch holds {} where the table has {}", from.ToString(), to.ToString());
    return false;
  };
  const PhysicalKind from_kind = PhysicalKindOf(from.id());
  switch (to.id()) {
    case TypeId::kBoolean:
    case TypeId::kDate:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kString:
    case TypeId::kBinary:
    case TypeId::kUuid:
      return from.id() == to.id() ? true : fail();
    case TypeId::kInt:
      return from.id() == TypeId::kInt ? true : fail();
    case TypeId::kLong:
      return (from.id() == TypeId::kInt || from.id() == TypeId::kLong) ? true : fail();
    case TypeId::kFloat:
      return from.id() == TypeId::kFloat ? true : fail();
    case TypeId::kDouble:
      // float→double; int/long→double too (a field that widened while its batch was being built).
      return (from_kind == PhysicalKind::kDouble || from.id() == TypeId::kInt ||
              from.id() == TypeId::kLong)
                 ? true
                 : fail();
    case TypeId::kDecimal:
      return (from.id() == TypeId::kDecimal && from.decimal_scale() == to.decimal_scale() &&
              from.decimal_precision() <= to.decimal_precision())
                 ? true
                 : fail();
    case TypeId::kStruct: {
      if (from.id() != TypeId::kStruct) return fail();
      for (const Field& target : to.children()) {
        for (const Field& source : from.children()) {
          if (source.id == target.id && !Readable(source.type, target.type, why)) return false;
        }
      }
      return true;
    }
    case TypeId::kList:
      if (from.id() != TypeId::kList) return fail();
      return Readable(from.children()[0].type, to.children()[0].type, why);
    case TypeId::kMap:
      if (from.id() != TypeId::kMap) return fail();
      return Readable(from.children()[0].type, to.children()[0].type, why) &&
             Readable(from.children()[1].type, to.children()[1].type, why);
  }
  return fail();
}

// ---------------------------------------------------------------------------------------------
// Filling vectors

// Marks rows [offset, offset + count) of `out` NULL, recursively for struct children (DuckDB expects
// a NULL struct's children NULL too) and with empty list entries.
void FillNull(duckdb_vector out, const LogicalType& type, idx_t offset, idx_t count) {
  duckdb_vector_ensure_validity_writable(out);
  uint64_t* validity = duckdb_vector_get_validity(out);
  for (idx_t i = 0; i < count; ++i) duckdb_validity_set_row_invalid(validity, offset + i);
  switch (type.id()) {
    case TypeId::kStruct:
      for (idx_t c = 0; c < type.children().size(); ++c) {
        FillNull(duckdb_struct_vector_get_child(out, c), type.children()[c].type, offset, count);
      }
      break;
    case TypeId::kList:
    case TypeId::kMap: {
      auto* entries = static_cast<duckdb_list_entry*>(duckdb_vector_get_data(out));
      const idx_t size = duckdb_list_vector_get_size(out);
      for (idx_t i = 0; i < count; ++i) entries[offset + i] = {size, 0};
      break;
    }
    default: break;
  }
}

// Copies validity of source rows [row, row + count) to out rows [offset, offset + count).
// Whether rows [row, row + count) of `src` are all valid: whole bytes of the bitmap at a time.
bool AllValid(const Column& src, int64_t row, idx_t count) {
  int64_t at = row;
  const int64_t end = row + static_cast<int64_t>(count);
  for (; at < end && (at & 7) != 0; ++at) {
    if (!src.IsValid(at)) return false;
  }
  for (; at + 8 <= end; at += 8) {
    if (src.validity[static_cast<size_t>(at >> 3)] != 0xff) return false;
  }
  for (; at < end; ++at) {
    if (!src.IsValid(at)) return false;
  }
  return true;
}

void FillValidity(duckdb_vector out, const Column& src, int64_t row, idx_t offset, idx_t count) {
  const bool any_null = !AllValid(src, row, count);
  uint64_t* validity = duckdb_vector_get_validity(out);
  if (!any_null && validity == nullptr) return;  // no mask: every row valid
  duckdb_vector_ensure_validity_writable(out);
  validity = duckdb_vector_get_validity(out);
  for (idx_t i = 0; i < count; ++i) {
    duckdb_validity_set_row_validity(validity, offset + i, src.IsValid(row + static_cast<int64_t>(i)));
  }
}

template <typename T>
T* DataOf(duckdb_vector out) {
  return static_cast<T*>(duckdb_vector_get_data(out));
}

// `value` as DuckDB's string_t, not copied: one of at most 12 bytes inline (DuckDB's own layout);
// a longer one by its 4-byte prefix and a pointer to the batch's bytes. The scan's thread holds
// the batch until it is asked for its next chunk, which DuckDB does only once it has consumed this
// one; whatever DuckDB keeps past that (a collection, a hash table, a result) it copies, as it
// must for the pages its own scans point into.
duckdb_string_t StringOf(std::string_view value) {
  SKIPPR_CHECK_MSG(value.size() <= UINT32_MAX, "a DuckDB string holds less than 4 GiB");
  duckdb_string_t string{};
  string.value.inlined.length = static_cast<uint32_t>(value.size());
  if (value.size() <= sizeof(string.value.inlined.inlined)) {
    std::memcpy(string.value.inlined.inlined, value.data(), value.size());
  } else {
    std::memcpy(string.value.pointer.prefix, value.data(), sizeof(string.value.pointer.prefix));
    string.value.pointer.ptr = const_cast<char*>(value.data());  // DuckDB reads it only
  }
  return string;
}

uint64_t BigEndian64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | bytes[i];
  return value;
}

// Writes source rows [row, row + count) of `src` (type checked Readable against `type`) into out rows
// [offset, offset + count). Returns false with `error` set on data the table type cannot hold.
bool Fill(duckdb_vector out, const LogicalType& type, const Column& src, int64_t row, idx_t offset,
          idx_t count, std::string* error);

// Fills a LIST/MAP vector: entries from src.offsets, the elements into the child vector after what it
// holds already.
bool FillListLike(duckdb_vector out, const LogicalType& type, const Column& src, int64_t row,
                  idx_t offset, idx_t count, std::string* error) {
  const int64_t first = src.offsets[row];
  const int64_t last = src.offsets[row + static_cast<int64_t>(count)];
  const idx_t base = duckdb_list_vector_get_size(out);
  const idx_t total = static_cast<idx_t>(last - first);
  if (duckdb_list_vector_reserve(out, base + total) != DuckDBSuccess) {
    *error = "could not reserve list space";
    return false;
  }
  auto* entries = DataOf<duckdb_list_entry>(out);
  for (idx_t i = 0; i < count; ++i) {
    const int64_t begin = src.offsets[row + static_cast<int64_t>(i)];
    const int64_t end = src.offsets[row + static_cast<int64_t>(i) + 1];
    entries[offset + i] = {base + static_cast<idx_t>(begin - first), static_cast<idx_t>(end - begin)};
  }
  duckdb_vector child = duckdb_list_vector_get_child(out);
  if (total > 0) {
    if (type.id() == TypeId::kList) {
      if (!Fill(child, type.children()[0].type, src.children[0], first, base, total, error)) return false;
    } else {
      // MAP is LIST(STRUCT(key, value)); entries are never NULL.
      uint64_t* validity = duckdb_vector_get_validity(child);
      if (validity != nullptr) {
        for (idx_t i = 0; i < total; ++i) duckdb_validity_set_row_valid(validity, base + i);
      }
      if (!Fill(duckdb_struct_vector_get_child(child, 0), type.children()[0].type, src.children[0],
                first, base, total, error) ||
          !Fill(duckdb_struct_vector_get_child(child, 1), type.children()[1].type, src.children[1],
                first, base, total, error)) {
        return false;
      }
    }
  }
  duckdb_list_vector_set_size(out, base + total);
  FillValidity(out, src, row, offset, count);
  return true;
}

bool Fill(duckdb_vector out, const LogicalType& type, const Column& src, int64_t row, idx_t offset,
          idx_t count, std::string* error) {
  const PhysicalKind src_kind = PhysicalKindOf(src.type.id());
  const uint8_t* fixed = src.fixed.data();
  switch (type.id()) {
    case TypeId::kBoolean: {
      bool* data = DataOf<bool>(out) + offset;
      for (idx_t i = 0; i < count; ++i) data[i] = fixed[row + i] != 0;
      break;
    }
    case TypeId::kInt:
    case TypeId::kDate: {  // int64 → int32 (int values and day numbers fit)
      int32_t* data = DataOf<int32_t>(out) + offset;
      for (idx_t i = 0; i < count; ++i) {
        int64_t v;
        std::memcpy(&v, fixed + (row + i) * 8, 8);
        data[i] = static_cast<int32_t>(v);
      }
      break;
    }
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      std::memcpy(DataOf<int64_t>(out) + offset, fixed + row * 8, count * 8);
      break;
    case TypeId::kFloat: {
      float* data = DataOf<float>(out) + offset;
      for (idx_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, fixed + (row + i) * 8, 8);
        data[i] = static_cast<float>(v);
      }
      break;
    }
    case TypeId::kDouble:
      if (src_kind == PhysicalKind::kDouble) {
        std::memcpy(DataOf<double>(out) + offset, fixed + row * 8, count * 8);
      } else {  // int/long batch column read as double
        double* data = DataOf<double>(out) + offset;
        for (idx_t i = 0; i < count; ++i) {
          int64_t v;
          std::memcpy(&v, fixed + (row + i) * 8, 8);
          data[i] = static_cast<double>(v);
        }
      }
      break;
    case TypeId::kDecimal: {
      // Batch: 16-byte little-endian two's complement. DuckDB: int16/int32/int64 by width, else
      // hugeint {lower, upper} — the same bytes on little-endian machines.
      const int precision = type.decimal_precision();
      const uint8_t* base = fixed + row * 16;
      if (precision > 18) {
        std::memcpy(DataOf<duckdb_hugeint>(out) + offset, base, count * 16);
        break;
      }
      const auto low = [&](idx_t i) {
        int64_t v;
        std::memcpy(&v, base + i * 16, 8);
        return v;
      };
      if (precision <= 4) {
        int16_t* data = DataOf<int16_t>(out) + offset;
        for (idx_t i = 0; i < count; ++i) data[i] = static_cast<int16_t>(low(i));
      } else if (precision <= 9) {
        int32_t* data = DataOf<int32_t>(out) + offset;
        for (idx_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(low(i));
      } else {
        int64_t* data = DataOf<int64_t>(out) + offset;
        for (idx_t i = 0; i < count; ++i) data[i] = low(i);
      }
      break;
    }
    case TypeId::kString:
    case TypeId::kBinary: {
      const char* bytes = src.bytes.data();
      auto* data = DataOf<duckdb_string_t>(out) + offset;
      for (idx_t i = 0; i < count; ++i) {
        const int64_t r = row + static_cast<int64_t>(i);
        if (!src.IsValid(r)) continue;
        data[i] = StringOf(std::string_view(
            bytes + src.offsets[r], static_cast<size_t>(src.offsets[r + 1] - src.offsets[r])));
      }
      break;
    }
    case TypeId::kUuid: {
      // DuckDB's UUID: a hugeint of the 16 bytes read big-endian, with the top bit flipped so that
      // signed order is byte order.
      auto* data = DataOf<duckdb_hugeint>(out) + offset;
      for (idx_t i = 0; i < count; ++i) {
        const int64_t r = row + static_cast<int64_t>(i);
        if (!src.IsValid(r)) continue;
        if (src.offsets[r + 1] - src.offsets[r] != 16) {
          *error = fmt::format("a uuid value holds {} bytes, not 16", src.offsets[r + 1] - src.offsets[r]);
          return false;
        }
        const auto* b = reinterpret_cast<const unsigned char*>(src.bytes.data() + src.offsets[r]);
        data[i].upper = static_cast<int64_t>(BigEndian64(b) ^ (uint64_t{1} << 63));
        data[i].lower = BigEndian64(b + 8);
      }
      break;
    }
    case TypeId::kStruct: {
      const std::vector<Field>& targets = type.children();
      const std::vector<Field>& sources = src.type.children();
      for (size_t c = 0; c < targets.size(); ++c) {
        duckdb_vector child = duckdb_struct_vector_get_child(out, c);
        size_t found = sources.size();
        for (size_t s = 0; s < sources.size(); ++s) {
          if (sources[s].id == targets[c].id) {
            found = s;
            break;
          }
        }
        if (found == sources.size()) {
          FillNull(child, targets[c].type, offset, count);
        } else if (!Fill(child, targets[c].type, src.children[found], row, offset, count, error)) {
          return false;
        }
      }
      break;
    }
    case TypeId::kList:
    case TypeId::kMap: return FillListLike(out, type, src, row, offset, count, error);
  }
  FillValidity(out, src, row, offset, count);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The table function

struct BindData {
  std::shared_ptr<const TableSource> source;
  bool has_change_columns = false;  // with_change_columns := true
  AtomicScanCounters* counters = nullptr;
};

// The function's extra info: where tables come from, and the engine's counters.
struct ScanContext {
  SourceLookup lookup;
  AtomicScanCounters* counters;
};

// Shared by the threads of one scan: which columns DuckDB wants, where each batch's rows start in
// the scan's numbering, and the next batch to claim. Batches are read by the thread that claims
// them, one at a time per thread: a scan holds the batches being scanned, never the table.
struct ScanState {
  std::vector<idx_t> projected;        // output vector i ← target field projected[i]
  FieldSelection fields = FieldSelection::All();  // the projected target fields, by id
  std::vector<int64_t> first_ordinals;  // per batch: the scan's row number of its first row
  std::atomic<size_t> next_batch{0};
  std::mutex next_streamed_mutex;  // a streaming list hands out one batch at a time
};

// One thread's batch: rows [next_row, num_rows) are still to be emitted.
struct ThreadState {
  std::shared_ptr<const Batch> batch;
  size_t index = 0;
  std::vector<int> plan;  // per target field: the batch column index, or -1 (reads NULL)
  int64_t next_row = 0;
  bool exhausted() const { return batch == nullptr || next_row >= batch->num_rows; }
};

// The change columns follow the table's fields: their indexes after the last field.
enum ChangeColumn : idx_t {
  kOrdinal = 0,
  kDeleted = 1,
  kOrderToken = 2,
  kTruncate = 3,
  kLanded = 4,
  kChangeColumns = 5
};

bool GetBoolNamedParameter(duckdb_bind_info info, const char* name) {
  duckdb_value value = duckdb_bind_get_named_parameter(info, name);
  if (value == nullptr) return false;
  const bool result = !duckdb_is_null_value(value) && duckdb_get_bool(value);
  duckdb_destroy_value(&value);
  return result;
}

// Fills kLanded for rows [row, row + count) of `batch`: whether `source`'s landed table holds the
// change already (TableSource::landed_token).
Status FillLanded(duckdb_vector out, const TableSource& source, const Batch& batch, int64_t row,
                  idx_t count) {
  bool* data = DataOf<bool>(out);
  const bool has_tokens = source.landed_token || !source.landed_truncate_token.empty();
  for (idx_t i = 0; i < count; ++i) {
    data[i] = false;
    if (!has_tokens || !batch.cdc.has_value()) continue;
    const auto at = static_cast<size_t>(row) + i;
    const std::string_view token = batch.cdc->order_tokens[at];
    if (token.empty()) continue;  // a change without an order is always applied
    if (!source.landed_truncate_token.empty() && token <= source.landed_truncate_token) {
      data[i] = true;
      continue;
    }
    const std::string_view business_key = batch.cdc->business_keys[at];
    if (!source.landed_token || business_key.empty()) continue;
    SKIPPR_ASSIGN_OR_RETURN(const std::string landed, source.landed_token(business_key));
    data[i] = !landed.empty() && token <= landed;
  }
  return Status::OK();
}

// Fills a change column for rows [row, row + count) of `batch`, the first of which is the scan's
// row `ordinal`.
void FillChangeColumn(duckdb_vector out, idx_t column, const Batch& batch, int64_t row,
                      int64_t ordinal, idx_t count) {
  if (column == kOrdinal) {
    int64_t* data = DataOf<int64_t>(out);
    for (idx_t i = 0; i < count; ++i) data[i] = ordinal + static_cast<int64_t>(i);
    return;
  }
  if (column == kOrderToken) {
    // Batches without a CDC sidecar have none: an empty token, ordered by the ordinal alone.
    for (idx_t i = 0; i < count; ++i) {
      const std::string_view token = batch.cdc.has_value()
                                         ? batch.cdc->order_tokens[static_cast<size_t>(row) + i]
                                         : std::string_view();
      duckdb_vector_assign_string_element_len(out, i, token.data(), token.size());
    }
    return;
  }
  bool* data = DataOf<bool>(out);
  for (idx_t i = 0; i < count; ++i) {
    // Batches without a CDC sidecar are inserts (upserts under a key). A truncate row is no row
    // of the table either.
    const Mutation mutation = batch.cdc.has_value()
                                  ? batch.cdc->mutations[static_cast<size_t>(row) + i]
                                  : Mutation::kInsert;
    data[i] = column == kTruncate ? mutation == Mutation::kTruncate
                                  : mutation == Mutation::kDelete || mutation == Mutation::kTruncate;
  }
}

std::string GetStringParameter(duckdb_bind_info info, idx_t index) {
  duckdb_value value = duckdb_bind_get_parameter(info, index);
  std::string text;
  if (value != nullptr) {
    if (!duckdb_is_null_value(value)) {
      char* chars = duckdb_get_varchar(value);
      if (chars != nullptr) {
        text = chars;
        duckdb_free(chars);
      }
    }
    duckdb_destroy_value(&value);
  }
  return text;
}

void Bind(duckdb_bind_info info) {
  const auto* context = static_cast<const ScanContext*>(duckdb_bind_get_extra_info(info));
  const std::string pipeline = GetStringParameter(info, 0);
  const std::string namespace_name = GetStringParameter(info, 1);
  std::shared_ptr<const TableSource> source = context->lookup(pipeline, namespace_name);
  if (source == nullptr) {
    duckdb_bind_set_error(
        info, fmt::format("wal_scan: no table {}.{} is registered", pipeline, namespace_name).c_str());
    return;
  }
  if (source->fields.empty()) {
    duckdb_bind_set_error(info, fmt::format("table {}.{} has no columns", pipeline, namespace_name).c_str());
    return;
  }
  for (const Field& field : source->fields) {
    LogicalTypeHandle type(ToDuckType(field.type));
    duckdb_bind_add_result_column(info, field.name.c_str(), type.type);
  }
  const bool has_change_columns = GetBoolNamedParameter(info, "with_change_columns");
  if (has_change_columns) {
    LogicalTypeHandle ordinal(duckdb_create_logical_type(DUCKDB_TYPE_BIGINT));
    duckdb_bind_add_result_column(info, std::string(kOrdinalColumn).c_str(), ordinal.type);
    LogicalTypeHandle deleted(duckdb_create_logical_type(DUCKDB_TYPE_BOOLEAN));
    duckdb_bind_add_result_column(info, std::string(kDeletedColumn).c_str(), deleted.type);
    LogicalTypeHandle token(duckdb_create_logical_type(DUCKDB_TYPE_BLOB));
    duckdb_bind_add_result_column(info, std::string(kOrderTokenColumn).c_str(), token.type);
    duckdb_bind_add_result_column(info, std::string(kTruncateColumn).c_str(), deleted.type);
    duckdb_bind_add_result_column(info, std::string(kLandedColumn).c_str(), deleted.type);
  }
  duckdb_bind_set_bind_data(info, new BindData{std::move(source), has_change_columns, context->counters},
                            [](void* data) { delete static_cast<BindData*>(data); });
}

void Init(duckdb_init_info info) {
  const auto* bind = static_cast<const BindData*>(duckdb_init_get_bind_data(info));
  const TableSource& source = *bind->source;
  auto state = std::make_unique<ScanState>();
  const idx_t projected = duckdb_init_get_column_count(info);
  std::vector<int32_t> field_ids;
  for (idx_t i = 0; i < projected; ++i) {
    const idx_t column = duckdb_init_get_column_index(info, i);
    state->projected.push_back(column);
    if (column < source.fields.size()) field_ids.push_back(source.fields[column].id);
  }
  // Only the columns the statement uses are decoded (a count(*) decodes none).
  state->fields = FieldSelection::Only(std::move(field_ids));
  if (!source.batches.read && !source.batches.row_counts.empty()) {
    duckdb_init_set_error(info, "wal_scan: the table has no batch reader");
    return;
  }
  if (source.batches.is_streaming()) {
    if (bind->has_change_columns) {
      duckdb_init_set_error(info, "wal_scan: a streamed table has no change columns");
      return;
    }
    // As many threads as DuckDB gives: each takes the next batch as it arrives.
    duckdb_init_set_max_threads(info, kStreamingScanThreads);
    duckdb_init_set_init_data(info, state.release(),
                              [](void* data) { delete static_cast<ScanState*>(data); });
    return;
  }
  int64_t rows = 0;
  for (const int64_t count : source.batches.row_counts) {
    state->first_ordinals.push_back(rows);
    rows += count;
  }
  // Several threads claim batches where the plan lets them (DuckDB runs a scan whose rows must
  // keep their order, a plain SELECT, on one thread, which claims the batches in order); the
  // ordinal change column numbers rows from the row counts, whichever thread reads them.
  duckdb_init_set_max_threads(info, std::max<idx_t>(1, source.batches.row_counts.size()));
  duckdb_init_set_init_data(info, state.release(), [](void* data) { delete static_cast<ScanState*>(data); });
}

void LocalInit(duckdb_init_info info) {
  duckdb_init_set_init_data(info, new ThreadState(),
                            [](void* data) { delete static_cast<ThreadState*>(data); });
}

// The column of `batch` each target field reads (-1: none, it reads NULL), or why the batch cannot
// be read as the table.
Result<std::vector<int>> PlanBatch(const TableSource& source, const Batch& batch) {
  std::vector<int> plan(source.fields.size(), -1);
  for (size_t f = 0; f < source.fields.size(); ++f) {
    for (size_t c = 0; c < batch.fields.size() && c < batch.columns.size(); ++c) {
      if (batch.fields[c].id != source.fields[f].id) continue;
      std::string why;
      if (!Readable(batch.columns[c].type, source.fields[f].type, &why)) {
        return Status::InvalidArgument(fmt::format("reading {}.{} column {}: {}", source.pipeline,
                                                   source.namespace_name, source.fields[f].name,
                                                   why));
      }
      plan[f] = static_cast<int>(c);
      break;
    }
  }
  return plan;
}

std::string CannotRead(const TableSource& source, std::string_view why) {
  return fmt::format("table {}.{} cannot be read: {}", source.pipeline, source.namespace_name, why);
}

// Makes `batch` (number `index` of the scan) the thread's batch.
Status TakeBatch(const BindData& bind, std::shared_ptr<const Batch> batch, size_t index,
                 ThreadState& thread) {
  const TableSource& source = *bind.source;
  if (batch->cdc && batch->cdc->mutations.size() != static_cast<size_t>(batch->num_rows)) {
    return Status::Corruption(CannotRead(source, fmt::format("a batch of {} rows has {} CDC mutations",
                                                             batch->num_rows,
                                                             batch->cdc->mutations.size())));
  }
  SKIPPR_ASSIGN_OR_RETURN(thread.plan, PlanBatch(source, *batch));
  bind.counters->batches.fetch_add(1, std::memory_order_relaxed);
  bind.counters->columns.fetch_add(static_cast<int64_t>(batch->columns.size()),
                                   std::memory_order_relaxed);
  thread.batch = std::move(batch);
  thread.index = index;
  thread.next_row = 0;
  return Status::OK();
}

// The next batch with rows of a streaming list into `thread`; false after the last.
Result<bool> ClaimStreamedBatch(const BindData& bind, ScanState& state, ThreadState& thread) {
  const TableSource& source = *bind.source;
  std::lock_guard lock(state.next_streamed_mutex);
  while (true) {
    Result<std::shared_ptr<const Batch>> next = source.batches.next();
    if (!next.ok()) return Status(next.status().code(), CannotRead(source, next.status().message()));
    if (*next == nullptr) {
      thread.batch.reset();
      return false;
    }
    if ((*next)->num_rows == 0) continue;
    const size_t index = state.next_batch.fetch_add(1, std::memory_order_relaxed);
    SKIPPR_RETURN_IF_ERROR(TakeBatch(bind, std::move(next).value(), index, thread));
    return true;
  }
}

// Claims and reads the next batch with rows into `thread`; false at the end of the scan.
Result<bool> ClaimBatch(const BindData& bind, ScanState& state, ThreadState& thread) {
  const TableSource& source = *bind.source;
  if (source.batches.is_streaming()) return ClaimStreamedBatch(bind, state, thread);
  while (true) {
    const size_t index = state.next_batch.fetch_add(1, std::memory_order_relaxed);
    if (index >= source.batches.row_counts.size()) {
      thread.batch.reset();
      return false;
    }
    const int64_t expected_rows = source.batches.row_counts[index];
    if (expected_rows == 0) continue;
    Result<std::shared_ptr<const Batch>> read = source.batches.read(index, state.fields);
    if (!read.ok()) return Status(read.status().code(), CannotRead(source, read.status().message()));
    std::shared_ptr<const Batch> batch = std::move(read).value();
    if (batch == nullptr || batch->num_rows != expected_rows) {
      return Status::Corruption(
          CannotRead(source, fmt::format("batch {} has {} rows where {} were listed", index,
                                         batch == nullptr ? 0 : batch->num_rows, expected_rows)));
    }
    SKIPPR_RETURN_IF_ERROR(TakeBatch(bind, std::move(batch), index, thread));
    return true;
  }
}

// Fills `out` (the output vector of target field `field`, or of a change column) with `count`
// rows of the thread's batch from its next row. False with `error` set on data the table type
// cannot hold.
bool FillOutput(duckdb_vector out, const BindData& bind, const ScanState& state,
                const ThreadState& thread, idx_t field, idx_t count, std::string* error) {
  const std::vector<Field>& fields = bind.source->fields;
  const Batch& batch = *thread.batch;
  if (bind.has_change_columns && field == fields.size() + kLanded) {
    Status filled = FillLanded(out, *bind.source, batch, thread.next_row, count);
    if (!filled.ok()) {
      *error = fmt::format("reading {}.{}: the landed order tokens: {}", bind.source->pipeline,
                           bind.source->namespace_name, filled.message());
    }
    return filled.ok();
  }
  if (bind.has_change_columns && field >= fields.size() && field < fields.size() + kChangeColumns) {
    FillChangeColumn(out, field - fields.size(), batch, thread.next_row,
                     state.first_ordinals[thread.index] + thread.next_row, count);
    return true;
  }
  if (field >= fields.size()) {
    // A column DuckDB asked for that is none of ours (a row id for count(*)): leave it NULL.
    duckdb_vector_ensure_validity_writable(out);
    uint64_t* validity = duckdb_vector_get_validity(out);
    for (idx_t i = 0; i < count; ++i) duckdb_validity_set_row_invalid(validity, i);
    return true;
  }
  const int column = thread.plan[field];
  if (column < 0) {
    FillNull(out, fields[field].type, 0, count);
    return true;
  }
  if (!Fill(out, fields[field].type, batch.columns[column], thread.next_row, 0, count, error)) {
    *error = fmt::format("reading {}.{} column {}: {}", bind.source->pipeline,
                         bind.source->namespace_name, fields[field].name, *error);
    return false;
  }
  return true;
}

void Scan(duckdb_function_info info, duckdb_data_chunk output) {
  const auto* bind = static_cast<const BindData*>(duckdb_function_get_bind_data(info));
  auto* state = static_cast<ScanState*>(duckdb_function_get_init_data(info));
  auto* thread = static_cast<ThreadState*>(duckdb_function_get_local_init_data(info));
  const auto fail = [&](const std::string& message) {
    duckdb_function_set_error(info, message.c_str());
  };
  if (thread->exhausted()) {
    Result<bool> claimed = ClaimBatch(*bind, *state, *thread);
    if (!claimed.ok()) {
      bind->counters->failure.Record(claimed.status());
      return fail(std::string(claimed.status().message()));
    }
    if (!*claimed) {
      duckdb_data_chunk_set_size(output, 0);
      return;
    }
  }
  const idx_t count = std::min<idx_t>(duckdb_vector_size(),
                                      static_cast<idx_t>(thread->batch->num_rows - thread->next_row));
  const idx_t vectors = duckdb_data_chunk_get_column_count(output);
  for (idx_t v = 0; v < vectors; ++v) {
    const idx_t field = v < state->projected.size() ? state->projected[v] : v;
    std::string error;
    if (!FillOutput(duckdb_data_chunk_get_vector(output, v), *bind, *state, *thread, field, count,
                    &error)) {
      return fail(error);
    }
  }
  thread->next_row += static_cast<int64_t>(count);
  duckdb_data_chunk_set_size(output, count);
}

}  // namespace

Status RegisterWalScan(duckdb_connection connection, SourceLookup lookup,
                       AtomicScanCounters* counters) {
  duckdb_table_function function = duckdb_create_table_function();
  duckdb_table_function_set_name(function, "wal_scan");
  {
    LogicalTypeHandle varchar(duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR));
    duckdb_table_function_add_parameter(function, varchar.type);
    duckdb_table_function_add_parameter(function, varchar.type);
    LogicalTypeHandle boolean(duckdb_create_logical_type(DUCKDB_TYPE_BOOLEAN));
    duckdb_table_function_add_named_parameter(function, "with_change_columns", boolean.type);
  }
  duckdb_table_function_set_extra_info(function, new ScanContext{std::move(lookup), counters},
                                       [](void* data) { delete static_cast<ScanContext*>(data); });
  duckdb_table_function_set_bind(function, Bind);
  duckdb_table_function_set_init(function, Init);
  duckdb_table_function_set_local_init(function, LocalInit);
  duckdb_table_function_set_function(function, Scan);
  duckdb_table_function_supports_projection_pushdown(function, true);
  const duckdb_state state = duckdb_register_table_function(connection, function);
  duckdb_destroy_table_function(&function);
  if (state != DuckDBSuccess) return Status::Internal("could not register the wal_scan table function");
  return Status::OK();
}

}  // namespace skippr::query::detail
