#include "core/batch.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/check.hpp"

namespace skippr {

PhysicalKind PhysicalKindOf(TypeId type) {
  switch (type) {
    case TypeId::kBoolean: return PhysicalKind::kBool;
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kDate:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz: return PhysicalKind::kInt64;
    case TypeId::kFloat:
    case TypeId::kDouble: return PhysicalKind::kDouble;
    case TypeId::kDecimal: return PhysicalKind::kDecimal128;
    case TypeId::kString:
    case TypeId::kBinary:
    case TypeId::kUuid: return PhysicalKind::kBytes;
    case TypeId::kStruct: return PhysicalKind::kStruct;
    case TypeId::kList: return PhysicalKind::kList;
    case TypeId::kMap: return PhysicalKind::kMap;
  }
  return PhysicalKind::kBytes;
}

size_t FixedWidthBytes(PhysicalKind kind) {
  switch (kind) {
    case PhysicalKind::kBool: return 1;
    case PhysicalKind::kInt64:
    case PhysicalKind::kDouble: return 8;
    case PhysicalKind::kDecimal128: return 16;
    default: return 0;
  }
}

namespace {
bool HasOffsets(PhysicalKind kind) {
  return kind == PhysicalKind::kBytes || kind == PhysicalKind::kList || kind == PhysicalKind::kMap;
}
}  // namespace

Column::Column(LogicalType column_type) : type(std::move(column_type)) {
  const PhysicalKind kind = PhysicalKindOf(type.id());
  if (HasOffsets(kind)) offsets.push_back(0);
  for (const Field& child : type.children()) children.emplace_back(child.type);
}

int64_t Column::Int64At(int64_t row) const {
  int64_t value;
  std::memcpy(&value, fixed.data() + row * 8, 8);
  return value;
}

double Column::DoubleAt(int64_t row) const {
  double value;
  std::memcpy(&value, fixed.data() + row * 8, 8);
  return value;
}

std::pair<uint64_t, int64_t> Column::Decimal128At(int64_t row) const {
  uint64_t low;
  int64_t high;
  std::memcpy(&low, fixed.data() + row * 16, 8);
  std::memcpy(&high, fixed.data() + row * 16 + 8, 8);
  return {low, high};
}

namespace {
void SetValidity(std::vector<uint8_t>& validity, int64_t row, bool valid) {
  if ((row >> 3) >= static_cast<int64_t>(validity.size())) validity.push_back(0);
  if (valid) validity[row >> 3] |= static_cast<uint8_t>(1u << (row & 7));
}

void AppendFixed(std::vector<uint8_t>& fixed, const void* bytes, size_t size) {
  const auto* first = static_cast<const uint8_t*>(bytes);
  fixed.insert(fixed.end(), first, first + size);  // no zero-fill before the copy
}
}  // namespace

void Column::AppendNull() {
  const PhysicalKind kind = PhysicalKindOf(type.id());
  SetValidity(validity, length, false);
  fixed.resize(fixed.size() + FixedWidthBytes(kind), 0);
  if (HasOffsets(kind)) offsets.push_back(offsets.back());
  if (kind == PhysicalKind::kStruct) {
    for (Column& child : children) child.AppendNull();
  }
  ++length;
}

void Column::Append(const Value& value) {
  if (value.is_null()) {
    AppendNull();
    return;
  }
  SKIPPR_DCHECK(ValueFitsColumn(value, type));
  const PhysicalKind kind = PhysicalKindOf(type.id());
  SetValidity(validity, length, true);
  switch (kind) {
    case PhysicalKind::kBool: fixed.push_back(value.as_bool() ? 1 : 0); break;
    case PhysicalKind::kInt64: {
      const int64_t v = value.as_int();
      AppendFixed(fixed, &v, 8);
      break;
    }
    case PhysicalKind::kDouble: {
      const double v = value.kind() == Value::Kind::kDouble ? value.as_double()
                                                            : static_cast<double>(value.as_int());
      AppendFixed(fixed, &v, 8);
      break;
    }
    case PhysicalKind::kDecimal128: {
      const auto unscaled = static_cast<unsigned __int128>(value.decimal_unscaled());
      const auto low = static_cast<uint64_t>(unscaled);
      const auto high = static_cast<int64_t>(unscaled >> 64);
      AppendFixed(fixed, &low, 8);
      AppendFixed(fixed, &high, 8);
      break;
    }
    case PhysicalKind::kBytes:
      bytes += value.as_string();
      offsets.push_back(static_cast<int64_t>(bytes.size()));
      break;
    case PhysicalKind::kStruct: {
      const std::vector<Field>& fields = type.children();
      for (size_t i = 0; i < fields.size(); ++i) {
        const Value* child = value.Find(fields[i].name);
        if (child == nullptr) {
          children[i].AppendNull();
        } else {
          children[i].Append(*child);
        }
      }
      break;
    }
    case PhysicalKind::kList:
      for (const Value& item : value.as_list()) children[0].Append(item);
      offsets.push_back(children[0].length);
      break;
    case PhysicalKind::kMap:
      for (const auto& [key, item] : value.as_object()) {
        children[0].Append(Value::String(key));
        children[1].Append(item);
      }
      offsets.push_back(children[0].length);
      break;
  }
  ++length;
}

void Column::AppendDecimal(__int128 unscaled) {
  SKIPPR_DCHECK(PhysicalKindOf(type.id()) == PhysicalKind::kDecimal128);
  SetValidity(validity, length, true);
  const auto bits = static_cast<unsigned __int128>(unscaled);
  const auto low = static_cast<uint64_t>(bits);
  const auto high = static_cast<int64_t>(bits >> 64);
  AppendFixed(fixed, &low, 8);
  AppendFixed(fixed, &high, 8);
  ++length;
}

uint8_t* Column::AppendNullFixedRows(int64_t rows) {
  const size_t width = FixedWidthBytes(PhysicalKindOf(type.id()));
  SKIPPR_CHECK(width > 0 && rows >= 0);
  const size_t first = fixed.size();
  SKIPPR_DCHECK(first == static_cast<size_t>(length) * width);
  fixed.resize(first + static_cast<size_t>(rows) * width, 0);
  length += rows;
  // Bits past the old end already read 0; the new bytes do too.
  validity.resize(static_cast<size_t>((length + 7) / 8), 0);
  return fixed.data() + first;
}

void Column::AppendValidityByte() { validity.push_back(0); }

void Column::AppendStructRows(int64_t rows) {
  SKIPPR_DCHECK(PhysicalKindOf(type.id()) == PhysicalKind::kStruct && rows >= 0);
  for (int64_t row = length; row < length + rows; ++row) SetValidity(validity, row, true);
  length += rows;
  for ([[maybe_unused]] const Column& child : children) SKIPPR_DCHECK(child.length == length);
}

namespace {
// Appends `count` validity bits of `from` after the first `length` bits of `to`.
void AppendValidity(std::vector<uint8_t>& to, int64_t length, const std::vector<uint8_t>& from,
                    int64_t count) {
  if (count == 0) return;
  const auto from_bytes = static_cast<size_t>((count + 7) / 8);
  if ((length & 7) == 0) {
    to.insert(to.end(), from.begin(), from.begin() + static_cast<std::ptrdiff_t>(from_bytes));
    if ((count & 7) != 0) to.back() &= static_cast<uint8_t>((1u << (count & 7)) - 1);
    return;
  }
  to.resize(static_cast<size_t>((length + count + 7) / 8), 0);
  for (int64_t i = 0; i < count; ++i) {
    if ((from[static_cast<size_t>(i >> 3)] >> (i & 7)) & 1) {
      const int64_t bit = length + i;
      to[static_cast<size_t>(bit >> 3)] |= static_cast<uint8_t>(1u << (bit & 7));
    }
  }
}
}  // namespace

void Column::AppendColumn(const Column& other) {
  const PhysicalKind kind = PhysicalKindOf(type.id());
  SKIPPR_CHECK_MSG(PhysicalKindOf(other.type.id()) == kind &&
                       other.children.size() == children.size(),
                   "appending a column of another layout");
  AppendValidity(validity, length, other.validity, other.length);
  fixed.insert(fixed.end(), other.fixed.begin(), other.fixed.end());
  if (HasOffsets(kind)) {
    // Rebased: the other column's offsets start at 0, its rows here at what this one holds.
    const int64_t base = offsets.back();
    offsets.reserve(offsets.size() + static_cast<size_t>(other.length));
    for (int64_t row = 1; row <= other.length; ++row) offsets.push_back(base + other.offsets[row]);
  }
  bytes.append(other.bytes);
  for (size_t i = 0; i < children.size(); ++i) children[i].AppendColumn(other.children[i]);
  length += other.length;
}

void Column::PadNullsTo(int64_t rows) {
  while (length < rows) AppendNull();
}

void Column::TruncateTo(int64_t rows) {
  SKIPPR_CHECK(rows >= 0);
  const PhysicalKind kind = PhysicalKindOf(type.id());
  if (rows >= length) {
    // A struct row is appended after its children: they may hold a row it does not have yet.
    if (kind == PhysicalKind::kStruct) {
      for (Column& child : children) child.TruncateTo(rows);
    }
    return;
  }
  validity.resize(static_cast<size_t>((rows + 7) / 8));
  // Bits past the end must read 0: SetValidity only ever sets bits.
  if ((rows & 7) != 0) validity.back() &= static_cast<uint8_t>((1u << (rows & 7)) - 1);
  fixed.resize(static_cast<size_t>(rows) * FixedWidthBytes(kind));
  if (HasOffsets(kind)) {
    offsets.resize(static_cast<size_t>(rows) + 1);
    if (kind == PhysicalKind::kBytes) bytes.resize(static_cast<size_t>(offsets.back()));
  }
  if (!children.empty()) {
    const int64_t child_rows = kind == PhysicalKind::kStruct ? rows : offsets.back();
    for (Column& child : children) child.TruncateTo(child_rows);
  }
  length = rows;
}

void Column::ConvertInt64ToDouble() {
  for (int64_t row = 0; row < length; ++row) {
    const double v = static_cast<double>(Int64At(row));
    std::memcpy(fixed.data() + row * 8, &v, 8);
  }
  // The bytes are doubles now; an int/long type would read them back (and append) as integers.
  type = LogicalType::Double();
}

Value Column::ValueAt(int64_t row) const {
  if (!IsValid(row)) return Value::Null();
  switch (type.id()) {
    case TypeId::kBoolean: return Value::Bool(BoolAt(row));
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kTime: return Value::Int(Int64At(row));
    case TypeId::kDate: return Value::Date(static_cast<int32_t>(Int64At(row)));
    case TypeId::kTimestamp: return Value::Timestamp(Int64At(row));
    case TypeId::kTimestampTz: return Value::TimestampTz(Int64At(row));
    case TypeId::kFloat:
    case TypeId::kDouble: return Value::Double(DoubleAt(row));
    case TypeId::kDecimal: {
      const auto [low, high] = Decimal128At(row);
      return Value::Decimal(static_cast<__int128>(static_cast<unsigned __int128>(high) << 64 | low),
                            static_cast<uint8_t>(type.decimal_precision()),
                            static_cast<uint8_t>(type.decimal_scale()));
    }
    case TypeId::kString: return Value::String(std::string(BytesAt(row)));
    case TypeId::kBinary:
    case TypeId::kUuid: return Value::Binary(std::string(BytesAt(row)));
    case TypeId::kStruct: {
      ValueObject object;
      for (size_t i = 0; i < children.size(); ++i) {
        object.emplace_back(type.children()[i].name, children[i].ValueAt(row));
      }
      return Value::Object(std::move(object));
    }
    case TypeId::kList: {
      ValueList items;
      for (int64_t i = offsets[row]; i < offsets[row + 1]; ++i) items.push_back(children[0].ValueAt(i));
      return Value::List(std::move(items));
    }
    case TypeId::kMap: {
      ValueObject object;
      for (int64_t i = offsets[row]; i < offsets[row + 1]; ++i) {
        object.emplace_back(std::string(children[0].BytesAt(i)), children[1].ValueAt(i));
      }
      return Value::Object(std::move(object));
    }
  }
  return Value::Null();
}

bool Column::Validate(std::string* reason) const {
  const PhysicalKind kind = PhysicalKindOf(type.id());
  const auto fail = [&](std::string text) {
    if (reason) *reason = fmt::format("{} column: {}", type.ToString(), text);
    return false;
  };
  if (static_cast<int64_t>(validity.size()) != (length + 7) / 8) return fail("validity size");
  if (fixed.size() != static_cast<size_t>(length) * FixedWidthBytes(kind)) return fail("fixed size");
  if (HasOffsets(kind)) {
    if (static_cast<int64_t>(offsets.size()) != length + 1 || offsets[0] != 0) return fail("offsets");
    for (int64_t i = 0; i < length; ++i) {
      if (offsets[i] > offsets[i + 1]) return fail("offsets decrease");
    }
    const int64_t end = offsets.back();
    if (kind == PhysicalKind::kBytes && end != static_cast<int64_t>(bytes.size())) return fail("bytes");
    if (kind != PhysicalKind::kBytes) {
      for (const Column& child : children) {
        if (child.length != end) return fail("child length");
      }
    }
  }
  if (kind == PhysicalKind::kStruct) {
    for (const Column& child : children) {
      if (child.length != length) return fail("struct child length");
    }
  }
  for (const Column& child : children) {
    if (!child.Validate(reason)) return false;
  }
  return true;
}

bool ValueFitsColumn(const Value& value, const LogicalType& type) {
  using K = Value::Kind;
  if (value.is_null()) return true;
  switch (type.id()) {
    case TypeId::kBoolean: return value.kind() == K::kBool;
    case TypeId::kInt:
      return value.kind() == K::kInt && value.as_int() >= INT32_MIN && value.as_int() <= INT32_MAX;
    case TypeId::kLong:
    case TypeId::kTime: return value.kind() == K::kInt;
    case TypeId::kFloat:
    case TypeId::kDouble: return value.kind() == K::kDouble || value.kind() == K::kInt;
    case TypeId::kDecimal:
      return value.kind() == K::kDecimal && value.decimal_scale() == type.decimal_scale();
    case TypeId::kDate: return value.kind() == K::kDate;
    case TypeId::kTimestamp: return value.kind() == K::kTimestamp;
    case TypeId::kTimestampTz: return value.kind() == K::kTimestampTz;
    case TypeId::kString: return value.kind() == K::kString;
    case TypeId::kBinary:
    case TypeId::kUuid: return value.kind() == K::kBinary;
    case TypeId::kStruct: {
      if (value.kind() != K::kObject) return false;
      for (const Field& field : type.children()) {
        const Value* child = value.Find(field.name);
        if (child != nullptr && !ValueFitsColumn(*child, field.type)) return false;
      }
      return true;
    }
    case TypeId::kList: {
      if (value.kind() != K::kList) return false;
      for (const Value& item : value.as_list()) {
        if (!ValueFitsColumn(item, type.children()[0].type)) return false;
      }
      return true;
    }
    case TypeId::kMap: {
      if (value.kind() != K::kObject) return false;
      for (const auto& [key, item] : value.as_object()) {
        if (!ValueFitsColumn(item, type.children()[1].type)) return false;
      }
      return true;
    }
  }
  return false;
}

void PackedStrings::Append(const PackedStrings& other) {
  const auto base = static_cast<int64_t>(bytes_.size());
  bytes_.append(other.bytes_);
  offsets_.reserve(offsets_.size() + other.size());
  for (size_t i = 1; i < other.offsets_.size(); ++i) offsets_.push_back(base + other.offsets_[i]);
}

void CdcSidecar::Append(const CdcSidecar& other) {
  mutations.insert(mutations.end(), other.mutations.begin(), other.mutations.end());
  event_ids.Append(other.event_ids);
  order_tokens.Append(other.order_tokens);
  business_keys.Append(other.business_keys);
}

Value ColumnRows::RowAt(int64_t row) const {
  ValueObject object;
  object.reserve(columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    // A name's second column (the strings its type cannot hold) fills in where the first is null.
    if (i > 0 && names[i] == names[i - 1]) {
      if (object.back().second.is_null()) object.back().second = columns[i].ValueAt(row);
      continue;
    }
    object.emplace_back(names[i], columns[i].ValueAt(row));
  }
  return Value::Object(std::move(object));
}

uint64_t Column::DataBytes() const {
  uint64_t bytes_held = validity.size() + fixed.size() + offsets.size() * sizeof(int64_t) +
                        bytes.size();
  for (const Column& child : children) bytes_held += child.DataBytes();
  return bytes_held;
}

namespace {
uint64_t DataBytesOf(const std::vector<Column>& columns) {
  uint64_t bytes_held = 0;
  for (const Column& column : columns) bytes_held += column.DataBytes();
  return bytes_held;
}
}  // namespace

uint64_t Batch::DataBytes() const { return DataBytesOf(columns); }

uint64_t ColumnRows::DataBytes() const { return DataBytesOf(columns); }

Value Batch::RowAt(int64_t row) const {
  ValueObject object;
  for (size_t i = 0; i < columns.size(); ++i) object.emplace_back(fields[i].name, columns[i].ValueAt(row));
  return Value::Object(std::move(object));
}

bool Batch::Validate(std::string* reason) const {
  if (fields.size() != columns.size()) {
    if (reason) *reason = "fields and columns differ in number";
    return false;
  }
  for (const Column& column : columns) {
    if (column.length != num_rows) {
      if (reason) *reason = fmt::format("a column has {} rows, the batch {}", column.length, num_rows);
      return false;
    }
    if (!column.Validate(reason)) return false;
  }
  if (cdc && static_cast<int64_t>(cdc->mutations.size()) != num_rows) {
    if (reason) *reason = "CDC sidecar length differs from the batch";
    return false;
  }
  return true;
}

}  // namespace skippr
