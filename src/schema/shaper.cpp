// Inference and evolution: see schema.hpp and docs/schema.md for the rules this implements.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "config/config.hpp"
#include "core/check.hpp"
#include "schema/names.hpp"
#include "schema/schema.hpp"
#include "schema/text_values.hpp"

namespace skippr::schema {

using internal::EpochIntegerToMicros;

namespace {

constexpr int kMaxNestingDepth = 64;

// ----- checks that make a record untypable --------------------------------------------------

enum class ListShape { kEmpty, kScalars, kObjects, kLists };

ListShape ShapeOfList(const ValueList& items, bool* mixed) {
  ListShape shape = ListShape::kEmpty;
  for (const Value& item : items) {
    if (item.is_null()) continue;
    const ListShape item_shape = item.kind() == Value::Kind::kObject ? ListShape::kObjects
                                 : item.kind() == Value::Kind::kList ? ListShape::kLists
                                                                     : ListShape::kScalars;
    if (shape != ListShape::kEmpty && shape != item_shape) *mixed = true;
    shape = item_shape;
  }
  return shape;
}

// Where a value sits, as a chain up to the record; rendered only for an error message.
struct PathLink {
  const PathLink* parent = nullptr;
  std::string_view name;
};

std::string RenderPath(const PathLink* link) {
  std::vector<std::string_view> parts;
  for (; link != nullptr; link = link->parent) parts.push_back(link->name);
  std::string text;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!text.empty() && *it != "[]") text += ".";
    text += *it;
  }
  return text;
}

uint64_t NameFingerprint(std::string_view name) {
  if (name.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(name[i])); };
  return name.size() << 24 | byte(0) << 16 | byte(name.size() / 2) << 8 | byte(name.size() - 1);
}

// A field named twice in one object: pairwise for the usual small objects, sorted for wide ones.
std::optional<std::string_view> DuplicateName(const ValueObject& object) {
  constexpr size_t kPairwiseLimit = 32;
  if (object.size() <= kPairwiseLimit) {
    // Names are compared pairwise by a cheap fingerprint (length and three bytes) first: ordinary
    // records then need no byte-by-byte comparison.
    std::array<uint64_t, kPairwiseLimit> fingerprints;
    for (size_t i = 0; i < object.size(); ++i) {
      fingerprints[i] = NameFingerprint(object[i].first);
      for (size_t j = 0; j < i; ++j) {
        if (fingerprints[i] == fingerprints[j] && object[i].first == object[j].first) {
          return std::string_view(object[i].first);
        }
      }
    }
    return std::nullopt;
  }
  std::vector<std::string_view> names;
  names.reserve(object.size());
  for (const auto& [name, child] : object) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (size_t i = 1; i < names.size(); ++i) {
    if (names[i] == names[i - 1]) return names[i];
  }
  return std::nullopt;
}

// Why a record cannot be typed, for its deadletter.
struct Rejection {
  FailureCode code;
  std::string reason;
};

std::optional<Rejection> Untypable(const Value& value, int depth, const PathLink* path,
                                   bool keys_may_repeat) {
  if (depth > kMaxNestingDepth) {
    return Rejection{FailureCode::kNestingTooDeep,
                     fmt::format("nested deeper than {} levels at '{}'", kMaxNestingDepth,
                                 RenderPath(path))};
  }
  if (value.kind() == Value::Kind::kObject) {
    if (auto duplicate = keys_may_repeat ? DuplicateName(value.as_object()) : std::nullopt) {
      const std::string where = RenderPath(path);
      return Rejection{FailureCode::kDuplicateField,
                       fmt::format("field '{}' appears twice in one object{}", *duplicate,
                                   where.empty() ? "" : " at '" + where + "'")};
    }
    for (const auto& [name, child] : value.as_object()) {
      const bool is_leaf =
          child.kind() != Value::Kind::kObject && child.kind() != Value::Kind::kList;
      if (is_leaf && depth < kMaxNestingDepth) continue;  // a single value cannot break a rule
      const PathLink link{path, name};
      if (auto rejection = Untypable(child, depth + 1, &link, keys_may_repeat)) return rejection;
    }
  } else if (value.kind() == Value::Kind::kList) {
    bool mixed = false;
    ShapeOfList(value.as_list(), &mixed);
    if (mixed) {
      return Rejection{
          FailureCode::kMixedList,
          fmt::format("list '{}' mixes objects, lists and single values; a column holds one kind",
                      RenderPath(path))};
    }
    const PathLink link{path, "[]"};
    for (const Value& item : value.as_list()) {
      const bool is_leaf = item.kind() != Value::Kind::kObject && item.kind() != Value::Kind::kList;
      if (is_leaf && depth < kMaxNestingDepth) continue;
      if (auto rejection = Untypable(item, depth + 1, &link, keys_may_repeat)) return rejection;
    }
  }
  return std::nullopt;
}

// `{"a": {"b": 1}}` → `{"a.b": 1}`; lists stay as they are.
void FlattenInto(ValueObject& out, const std::string& prefix, ValueObject&& object) {
  for (auto& [name, value] : object) {
    std::string flat_name = prefix.empty() ? name : prefix + "." + name;
    if (value.kind() == Value::Kind::kObject) {
      FlattenInto(out, flat_name, std::move(value.mutable_object()));
    } else {
      out.emplace_back(std::move(flat_name), std::move(value));
    }
  }
}

std::string NamespaceValueText(const Value& value) {
  if (value.kind() == Value::Kind::kString) return value.as_string();
  return value.ToJson();
}

// ----- types of values ----------------------------------------------------------------------

std::optional<std::string> TextOf(const Value& value) {
  using K = Value::Kind;
  switch (value.kind()) {
    case K::kString:
      return value.as_string();
    case K::kBool:
      return value.as_bool() ? "true" : "false";
    case K::kInt:
      return std::to_string(value.as_int());
    case K::kDouble:
      return fmt::format("{}", value.as_double());
    case K::kDecimal:
      return value.ToJson();
    case K::kDate:
      return internal::FormatDate(static_cast<int32_t>(value.as_int()));
    case K::kTimestamp:
      return internal::FormatTimestamp(value.as_int(), false);
    case K::kTimestampTz:
      return internal::FormatTimestamp(value.as_int(), true);
    default:
      return std::nullopt;
  }
}

// A decimal value as a double, only when the double reads back as the same number.
std::optional<double> DecimalAsDouble(const Value& decimal) {
  const std::string text = decimal.ToJson();
  const std::optional<double> real = internal::ParseReal(text);
  if (!real || !internal::DoubleHoldsLiteral(text, *real)) return std::nullopt;
  return real;
}

// The value converted to exactly the kind a column of `type` holds, if it fits; see the table in
// docs/schema.md. Never lossy: a value that would lose information does not fit.
std::optional<Value> ConvertScalar(const Value& value, const LogicalType& type) {
  using K = Value::Kind;
  const K kind = value.kind();
  if (kind == K::kNull) return Value::Null();
  if (kind == K::kObject || kind == K::kList) return std::nullopt;
  const std::string* text = kind == K::kString ? &value.as_string() : nullptr;
  switch (type.id()) {
    case TypeId::kBoolean:
      if (kind == K::kBool) return value;
      if (text && (*text == "true" || *text == "false")) return Value::Bool(*text == "true");
      return std::nullopt;
    case TypeId::kInt:
    case TypeId::kLong: {
      std::optional<int64_t> integer;
      if (kind == K::kInt) integer = value.as_int();
      if (text) integer = internal::ParseInteger(*text);
      if (!integer) return std::nullopt;
      if (type.id() == TypeId::kInt && (*integer < INT32_MIN || *integer > INT32_MAX))
        return std::nullopt;
      return Value::Int(*integer);
    }
    case TypeId::kFloat:
    case TypeId::kDouble:
      // Numbers keep every digit: what a double cannot hold exactly goes to a sibling.
      if (kind == K::kDouble) return value;
      if (kind == K::kInt && internal::IsExactInDouble(value.as_int())) {
        return Value::Double(static_cast<double>(value.as_int()));
      }
      if (kind == K::kDecimal) {
        if (auto real = DecimalAsDouble(value)) return Value::Double(*real);
      }
      if (text) {
        if (auto real = internal::ParseReal(*text);
            real && internal::DoubleHoldsLiteral(*text, *real)) {
          return Value::Double(*real);
        }
      }
      return std::nullopt;
    case TypeId::kDecimal: {
      const int scale = type.decimal_scale();
      std::optional<__int128> unscaled;
      if (kind == K::kDecimal && value.decimal_scale() == scale) {
        unscaled = value.decimal_unscaled();
      } else if (kind == K::kDecimal || kind == K::kInt || kind == K::kDouble ||
                 kind == K::kString) {
        unscaled =
            internal::ParseDecimal(kind == K::kDecimal ? value.ToJson() : *TextOf(value), scale);
      }
      if (!unscaled || !internal::FitsDecimalPrecision(*unscaled, type.decimal_precision())) {
        return std::nullopt;
      }
      return Value::Decimal(*unscaled, static_cast<uint8_t>(type.decimal_precision()),
                            static_cast<uint8_t>(scale));
    }
    case TypeId::kDate:
      if (kind == K::kDate) return value;
      if (text) {
        if (auto days = internal::ParseDate(*text)) return Value::Date(*days);
      }
      return std::nullopt;
    case TypeId::kTime:
      if (kind == K::kInt) return value;
      if (text) {
        if (auto micros = internal::ParseTime(*text)) return Value::Int(*micros);
      }
      return std::nullopt;
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz: {
      std::optional<int64_t> micros;
      if (kind == K::kTimestamp || kind == K::kTimestampTz) micros = value.as_int();
      if (kind == K::kDate) micros = value.as_int() * 86'400'000'000LL;
      if (kind == K::kInt) micros = EpochIntegerToMicros(value.as_int());
      if (text) {
        if (auto parsed = internal::ParseTimestamp(*text)) {
          micros = parsed->micros;
        } else if (auto days = internal::ParseDate(*text)) {
          micros = *days * 86'400'000'000LL;
        }
      }
      if (!micros) return std::nullopt;
      return type.id() == TypeId::kTimestamp ? Value::Timestamp(*micros)
                                             : Value::TimestampTz(*micros);
    }
    case TypeId::kString:
      if (kind == K::kString) return value;
      if (kind == K::kBinary) return std::nullopt;
      if (auto as_text = TextOf(value)) return Value::String(*as_text);
      return std::nullopt;
    case TypeId::kBinary:
    case TypeId::kUuid:
      if (kind == K::kBinary) return value;
      if (text && type.id() == TypeId::kBinary) return Value::Binary(*text);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// The type a field gets when it is first seen with this (non-null) scalar value.
LogicalType ScalarTypeOf(const Value& value, bool infer_epoch_timestamps) {
  using K = Value::Kind;
  switch (value.kind()) {
    case K::kBool:
      return LogicalType::Boolean();
    case K::kInt:
      if (infer_epoch_timestamps && EpochIntegerToMicros(value.as_int()))
        return LogicalType::Timestamp();
      return value.as_int() >= INT32_MIN && value.as_int() <= INT32_MAX ? LogicalType::Int()
                                                                        : LogicalType::Long();
    case K::kDouble:
      return LogicalType::Double();
    case K::kString: {
      const std::string& text = value.as_string();
      if (internal::ParseDate(text)) return LogicalType::Date();
      if (auto parsed = internal::ParseTimestamp(text)) {
        return parsed->has_zone ? LogicalType::TimestampTz() : LogicalType::Timestamp();
      }
      return LogicalType::String();
    }
    case K::kBinary:
      return LogicalType::Binary();
    case K::kDate:
      return LogicalType::Date();
    case K::kTimestamp:
      return LogicalType::Timestamp();
    case K::kTimestampTz:
      return LogicalType::TimestampTz();
    case K::kDecimal:
      return LogicalType::Decimal(38, value.decimal_scale()).value();
    default:
      return LogicalType::String();
  }
}

// Two scalar types seen in one list: the narrowest type holding both.
LogicalType MergeScalarTypes(const LogicalType& a, const LogicalType& b) {
  if (a == b) return a;
  const auto is_integer = [](TypeId id) { return id == TypeId::kInt || id == TypeId::kLong; };
  if (is_integer(a.id()) && is_integer(b.id())) return LogicalType::Long();
  const auto is_number = [&](TypeId id) {
    return is_integer(id) || id == TypeId::kDouble || id == TypeId::kDecimal;
  };
  // Exact numbers stay exact: numbers with a decimal among them meet in a decimal of the larger
  // scale (a double that does not fit it sends the list to a sibling rather than rounding).
  if (is_number(a.id()) && is_number(b.id()) &&
      (a.id() == TypeId::kDecimal || b.id() == TypeId::kDecimal)) {
    const auto scale_of = [](const LogicalType& t) {
      return t.id() == TypeId::kDecimal ? t.decimal_scale() : 0;
    };
    return LogicalType::Decimal(38, std::max(scale_of(a), scale_of(b))).value();
  }
  if (is_number(a.id()) && is_number(b.id())) return LogicalType::Double();
  if ((a.id() == TypeId::kDate || a.id() == TypeId::kTimestamp) &&
      (b.id() == TypeId::kDate || b.id() == TypeId::kTimestamp)) {
    return LogicalType::Timestamp();
  }
  return LogicalType::String();
}

// The suffix naming a sibling field for values of this shape: price_string, tags_list, ...
std::string SiblingSuffix(const Value& value, bool infer_epoch_timestamps) {
  switch (value.kind()) {
    case Value::Kind::kObject:
      return "struct";
    case Value::Kind::kList:
      return "list";
    default: {
      std::string name = ScalarTypeOf(value, infer_epoch_timestamps).ToString();
      const size_t paren = name.find('(');
      return paren == std::string::npos ? name : name.substr(0, paren);
    }
  }
}

// Field id → the name records give that field, where the name rules renamed it
// (NamespaceSchema::source_names).
using SourceNames = std::map<int32_t, std::string>;

// The name records give `field`: its own, unless the name rules renamed it.
const std::string& SourceNameOf(const SourceNames& source_names, const Field& field) {
  if (source_names.empty()) return field.name;
  auto it = source_names.find(field.id);
  return it == source_names.end() ? field.name : it->second;
}

}  // namespace

// Field positions by the name records give them, kept for a namespace's top-level fields across
// records (they are only ever appended to) and built for any other wide object. Not in the
// anonymous namespace: Shaper::NamespaceState, which has external linkage, holds one.
struct FieldIndex {
  std::unordered_map<std::string, size_t> positions;
  size_t indexed_fields = 0;  // fields[0, indexed_fields) are in `positions`

  void CatchUp(const std::vector<Field>& fields, const SourceNames& source_names) {
    for (; indexed_fields < fields.size(); ++indexed_fields) {
      positions.emplace(SourceNameOf(source_names, fields[indexed_fields]), indexed_fields);
    }
  }
};

// ----- Shaper ---------------------------------------------------------------------------------

struct Shaper::NamespaceState {
  NamespaceSchema* schema = nullptr;
  bool is_new = false;
  std::set<int32_t> mutable_field_ids;  // created since the last Seal(): their type may still widen
  // Mutable integer fields that absorbed an integer beyond ±2^53: widening them to double would
  // lose its digits.
  std::set<int32_t> beyond_double_field_ids;
  FieldIndex top_level_index;  // schema->fields by name, for wide records
  internal::FoldedNames top_level_folded_names;  // schema->fields, for the name rules
  std::vector<std::string> changes;
  // Seen, but only ever as null or as an empty list.
  struct NullOnlyField {
    bool is_list = false;  // seen as empty lists
    // A top-level field's declared type (RecordContext::declared_types), which it is created with.
    std::optional<LogicalType> declared;
  };
  std::map<std::vector<std::string>, NullOnlyField> null_only_paths;
  const RecordContext* context = nullptr;  // of the record being absorbed
  uint64_t schema_edits = 0;               // every change ever made, to know when columns lag

  // The rows absorbed since the last TakeBatches(), already columnar: one column per top-level
  // field, in schema order (ShaperOptions::build_columns).
  std::vector<Column> columns;
  // The top-level field of each entry of the record AbsorbObject conformed last, in entry order.
  std::vector<size_t> record_field_indices;
  int64_t column_rows = 0;
  uint64_t columns_conformed_at_edit = 0;
  int64_t previous_batch_rows = 0;  // a guess at how much to reserve
  std::vector<RecordOrigin> origins;  // of each row in `columns` (ShaperOptions::keep_origins)
  // The rows' CDC metadata, once a row of this batch brought some (rows before it, and rows
  // without any, count as inserts).
  std::optional<CdcSidecar> cdc;

  void AppendChange(RowChange* change) {
    if (change == nullptr && !cdc) return;
    if (!cdc) {
      cdc.emplace();
      for (int64_t row = 0; row + 1 < column_rows; ++row) cdc->Append(RowChange{});
    }
    cdc->Append(change != nullptr ? std::move(*change) : RowChange{});
    SKIPPR_DCHECK(cdc->size() == static_cast<size_t>(column_rows));
  }

  int32_t NextFieldId() { return ++schema->last_field_id; }
  LogicalType RenumberedDeclaredType(const LogicalType& type);
  void Changed(std::string what) {
    changes.push_back(std::move(what));
    ++schema_edits;
  }
  void AppendRow(const ValueObject& row);
  // Rows absorbed column by column (AbsorbColumns), kept as the source built them, each column at
  // its field's index and conformed to the schema when taken: no row is copied. Each chunk comes
  // after the rows absorbed before it, which it closes into a chunk of their own.
  struct Chunk {
    std::vector<Column> columns;
    int64_t rows = 0;
    std::optional<CdcSidecar> cdc;
    std::vector<RecordOrigin> origins;
  };
  std::vector<Chunk> chunks;
  // Adds `rows` as a chunk, rows.columns[i] becoming the column of field targets[i] (SIZE_MAX: a
  // column of no values, dropped).
  void AddChunk(ColumnRows& rows, const std::vector<size_t>& targets,
                std::vector<RecordOrigin> row_origins);
  // The rows absorbed one at a time so far, as a chunk.
  void CloseRows();
  void ConformColumns();

  // No two entries of one object fill one column (a value sent to its sibling `<field>_<type>`
  // could meet an entry of that very name): field id → the serial of the last object one of
  // whose entries filled it. Ids are unique at every depth, so nested objects share the table.
  std::vector<uint64_t> filled_by_object;
  std::unordered_map<int32_t, uint64_t> filled_by_object_beyond;  // ids past the table's reach
  uint64_t object_serial = 0;
  void MarkFilled(const Field& field, uint64_t serial);
  bool IsFilled(const Field& field, uint64_t serial) const;

  // The name records give `field`: its own, unless the name rules renamed it (source_names).
  const std::string& KeyOf(const Field& field) const;
  // The field of `fields` records call `key`; `guess` is the index to try first.
  Field* FindByKey(std::vector<Field>& fields, std::string_view key, size_t guess) const;
  // A new field for values records call `key`, named by the name rules, recorded in the history
  // with `purpose` (" for values of ..."); returns it (references into `fields` move with it).
  Field& AddField(std::vector<Field>& fields, const std::string& key, const Value& value,
                  const std::vector<std::string>& path, std::string_view purpose = "");
  // Names `field` (new, not yet in `fields`) for `key`; returns the history note of a rename.
  std::string ApplyNameRules(Field& field, const std::string& key,
                             const std::vector<Field>& fields);
  void AbsorbObject(std::vector<Field>& fields, ValueObject& object,
                    std::vector<std::string>& path);
  // Places a value that does not fit fields[index] (or whose column another entry of the object
  // filled) in a sibling column; returns the index in `fields` of the column that took it.
  size_t PlaceInSibling(std::vector<Field>& fields, size_t index, Value& value,
                        std::vector<std::string>& path, uint64_t serial);
  bool Place(Field& field, Value& value, std::vector<std::string>& path);
  bool PlaceScalar(Field& field, Value& value, const std::vector<std::string>& path,
                   std::string_view name);
  void NoteIntegerPlaced(const Field& field, const Value& value);
  bool PlaceList(Field& field, Value& value, std::vector<std::string>& path);
  Field NewField(const std::string& name, const Value& value, bool top_level);
  void CreateNullOnlyFields();
};

namespace {
// "struct" rather than "struct<>": a new struct's fields are listed as they are added.
std::string ShapeName(const LogicalType& type) {
  if (type.id() == TypeId::kStruct) return "struct";
  if (type.id() == TypeId::kList) return "list<" + ShapeName(type.children()[0].type) + ">";
  return type.ToString();
}

std::string JoinPath(const std::vector<std::string>& path, const std::string& name) {
  std::string text;
  for (const std::string& part : path) text += part + ".";
  return text + name;
}

Field* FindIn(std::vector<Field>& fields, std::string_view name) {
  for (Field& field : fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// The field of `fields` records call `key`, trying fields[guess] first.
Field* FindByKeyIn(std::vector<Field>& fields, std::string_view key, size_t guess,
                   const SourceNames& source_names) {
  if (guess < fields.size() && SourceNameOf(source_names, fields[guess]) == key) {
    return &fields[guess];
  }
  if (source_names.empty()) return FindIn(fields, key);  // every field is called by its name
  for (Field& field : fields) {
    if (SourceNameOf(source_names, field) == key) return &field;
  }
  return nullptr;
}

// Finds the fields of one object's entries by the names records give them: the field after the
// last one found first (records mostly list their fields in schema order), else a scan — or, with
// many fields, an index, so that a record of 100,000 new columns (a CSV header) costs O(n), not
// O(n²).
class FieldLookup {
 public:
  // `kept`: the namespace's index of these fields when they are its top level, else nullptr.
  FieldLookup(std::vector<Field>& fields, const SourceNames& source_names, size_t entries,
              FieldIndex* kept)
      : fields_(fields), source_names_(source_names) {
    constexpr size_t kIndexedFields = 64;
    if (kept != nullptr && fields.size() + entries > kIndexedFields) {
      index_ = kept;
    } else if (entries > kIndexedFields) {
      index_ = &own_index_;
    }
    if (index_ != nullptr) index_->CatchUp(fields_, source_names_);
  }
  Field* Find(const std::string& key) {
    if (index_ == nullptr) return FindByKeyIn(fields_, key, guess_, source_names_);
    if (guess_ < fields_.size() && KeyOf(fields_[guess_]) == key) return &fields_[guess_];
    index_->CatchUp(fields_, source_names_);
    auto it = index_->positions.find(key);
    if (it != index_->positions.end() && KeyOf(fields_[it->second]) != key) {
      *index_ = FieldIndex{};  // the fields were replaced, not appended to: index them afresh
      index_->CatchUp(fields_, source_names_);
      it = index_->positions.find(key);
    }
    if (it == index_->positions.end()) return nullptr;
    return &fields_[it->second];
  }
  void Found(const Field* field) { guess_ = static_cast<size_t>(field - fields_.data()) + 1; }

 private:
  const std::string& KeyOf(const Field& field) const { return SourceNameOf(source_names_, field); }

  std::vector<Field>& fields_;
  const SourceNames& source_names_;
  size_t guess_ = 0;
  FieldIndex own_index_;
  FieldIndex* index_ = nullptr;
};
}  // namespace

// Declared nested types arrive with their own child ids from the source; they get ids here.
LogicalType Shaper::NamespaceState::RenumberedDeclaredType(const LogicalType& type) {
  if (!type.is_nested()) return type;
  std::vector<Field> children = type.children();
  for (Field& child : children) {
    child.id = NextFieldId();
    child.type = RenumberedDeclaredType(child.type);
  }
  if (type.id() == TypeId::kStruct) return LogicalType::Struct(std::move(children));
  if (type.id() == TypeId::kList) return LogicalType::List(std::move(children[0]));
  return LogicalType::Map(std::move(children[0]), std::move(children[1]));
}

Field Shaper::NamespaceState::NewField(const std::string& name, const Value& value,
                                       bool top_level) {
  Field field;
  field.id = NextFieldId();
  field.name = name;
  mutable_field_ids.insert(field.id);
  if (top_level && context->declared_types != nullptr) {
    auto declared = context->declared_types->find(name);
    if (declared != context->declared_types->end()) {
      field.type = RenumberedDeclaredType(declared->second);
      return field;
    }
  }
  if (value.kind() == Value::Kind::kObject) {
    field.type = LogicalType::Struct({});  // its fields are added as the value is placed
  } else if (value.kind() == Value::Kind::kList) {
    bool mixed = false;
    const ListShape shape = ShapeOfList(value.as_list(), &mixed);
    Field element{NextFieldId(), "element", LogicalType::String(), true};
    mutable_field_ids.insert(element.id);
    if (shape == ListShape::kObjects) {
      element.type = LogicalType::Struct({});
    } else if (shape == ListShape::kLists) {
      // A list of lists: the inner element type comes from the first non-empty inner list.
      for (const Value& inner : value.as_list()) {
        if (inner.kind() == Value::Kind::kList && !inner.as_list().empty()) {
          element = NewField("element", inner, false);
          break;
        }
      }
      if (element.type.id() != TypeId::kList) {
        element.type =
            LogicalType::List(Field{NextFieldId(), "element", LogicalType::String(), true});
      }
    } else {
      std::optional<LogicalType> merged;
      for (const Value& item : value.as_list()) {
        if (item.is_null()) continue;
        LogicalType item_type = ScalarTypeOf(item, context->infer_epoch_timestamps);
        merged = merged ? MergeScalarTypes(*merged, item_type) : item_type;
      }
      element.type = merged.value_or(LogicalType::String());
    }
    field.type = LogicalType::List(std::move(element));
  } else {
    field.type = ScalarTypeOf(value, context->infer_epoch_timestamps);
  }
  return field;
}

namespace {
// The value already is what a column of `type` holds: nothing to convert (the common case).
bool IsExactScalar(const Value& value, const LogicalType& type) {
  using K = Value::Kind;
  switch (type.id()) {
    case TypeId::kBoolean:
      return value.kind() == K::kBool;
    case TypeId::kInt:
      return value.kind() == K::kInt && value.as_int() >= INT32_MIN && value.as_int() <= INT32_MAX;
    case TypeId::kLong:
      return value.kind() == K::kInt;
    case TypeId::kFloat:
    case TypeId::kDouble:
      return value.kind() == K::kDouble;
    case TypeId::kString:
      return value.kind() == K::kString;
    case TypeId::kTimestamp:
      return value.kind() == K::kTimestamp;
    case TypeId::kTimestampTz:
      return value.kind() == K::kTimestampTz;
    case TypeId::kDate:
      return value.kind() == K::kDate;
    default:
      return false;
  }
}
}  // namespace

bool Shaper::NamespaceState::PlaceScalar(Field& field, Value& value,
                                         const std::vector<std::string>& path,
                                         std::string_view name) {
  using K = Value::Kind;
  if (IsExactScalar(value, field.type)) {
    NoteIntegerPlaced(field, value);
    return true;
  }
  const TypeId id = field.type.id();
  // Iceberg promotes int → long at any time; a field created in this unit of work may also widen
  // to double, since nothing has been committed with its old type.
  const bool is_integer_field = id == TypeId::kInt || id == TypeId::kLong;
  const bool is_integer_value =
      is_integer_field && (value.kind() == K::kInt || (value.kind() == K::kString &&
                                                       internal::ParseInteger(value.as_string())));
  if (id == TypeId::kInt && is_integer_value) {
    const int64_t integer =
        value.kind() == K::kInt ? value.as_int() : *internal::ParseInteger(value.as_string());
    if (integer < INT32_MIN || integer > INT32_MAX) {
      field.type = LogicalType::Long();
      Changed(fmt::format("promoted {} int → long", JoinPath(path, std::string(name))));
    }
  }
  // Not when an integer absorbed already needs more digits than a double keeps.
  if (is_integer_field && !is_integer_value &&
      (value.kind() == K::kDouble ||
       (value.kind() == K::kString && internal::ParseReal(value.as_string()))) &&
      mutable_field_ids.count(field.id) != 0 && beyond_double_field_ids.count(field.id) == 0) {
    field.type = LogicalType::Double();
    Changed(fmt::format("widened {} to double", JoinPath(path, std::string(name))));
  }
  std::optional<Value> converted = ConvertScalar(value, field.type);
  if (!converted) return false;
  value = std::move(*converted);
  NoteIntegerPlaced(field, value);
  return true;
}

void Shaper::NamespaceState::NoteIntegerPlaced(const Field& field, const Value& value) {
  if (value.kind() == Value::Kind::kInt && !internal::IsExactInDouble(value.as_int()) &&
      mutable_field_ids.count(field.id) != 0) {
    beyond_double_field_ids.insert(field.id);
  }
}

namespace {
constexpr size_t kMaxKeyValueShownBytes = 64;

// "the string \"A-3\"", cut for a deadletter's reason.
std::string DescribeKeyValue(const Value& value) {
  std::string text = value.ToJson();
  if (text.size() > kMaxKeyValueShownBytes) {
    size_t end = kMaxKeyValueShownBytes;
    while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
    text = text.substr(0, end) + "…";
  }
  return fmt::format("the {} {}", ValueKindName(value.kind()), text);
}

// Whether the key column `field` (nullptr: not created yet) takes `value` as it is, converted, or
// by an Iceberg promotion (int → long) — never by going to a sibling or widening to double.
bool KeyColumnTakes(const Field* field, const Value& value, bool infer_epoch_timestamps) {
  using K = Value::Kind;
  if (value.kind() == K::kObject || value.kind() == K::kList) return false;
  if (field == nullptr) {
    const TypeId inferred = ScalarTypeOf(value, infer_epoch_timestamps).id();
    return inferred != TypeId::kFloat && inferred != TypeId::kDouble;
  }
  if (IsExactScalar(value, field->type)) return true;
  const bool is_integer = value.kind() == K::kInt ||
                          (value.kind() == K::kString && internal::ParseInteger(value.as_string()));
  if (field->type.id() == TypeId::kInt && is_integer) return true;  // promoted to long if needed
  return ConvertScalar(value, field->type).has_value();
}

// Why `record` cannot be keyed by options.key_fields in namespace `ns` (nullptr: a namespace not
// seen yet), if it cannot: kMissingKey for a key missing or null, kTypeConflict for one the key
// column cannot take.
std::optional<Rejection> KeyProblem(const NamespaceSchema* ns, const Value& record,
                                    const ShaperOptions& options, const RecordContext& context) {
  for (const std::string& key_field : options.key_fields) {
    const Field* field = ns != nullptr ? ns->FindField(key_field) : nullptr;
    const Value* value =
        record.Find(field != nullptr ? SourceNameOf(ns->source_names, *field) : key_field);
    const std::string key = fmt::format("primary key field '{}' ({})", key_field,
                                        options.key_fields_setting);
    // Discover: a missing or null key, or one no column exists for yet, shapes the schema.
    if (options.key_checks_types_only &&
        (value == nullptr || value->is_null() || field == nullptr)) {
      continue;
    }
    if (value == nullptr || value->is_null()) {
      return Rejection{FailureCode::kMissingKey,
                       fmt::format("{} is {}; every record needs its key", key,
                                   value == nullptr ? "missing" : "null")};
    }
    if (KeyColumnTakes(field, *value, context.infer_epoch_timestamps)) continue;
    if (field == nullptr) {
      return Rejection{FailureCode::kTypeConflict,
                       fmt::format("{} holds {}; a key is a single value, not a float or double",
                                   key, DescribeKeyValue(*value))};
    }
    return Rejection{
        FailureCode::kTypeConflict,
        fmt::format("{} holds {}, which the key column ({}) cannot take; every key must be of "
                    "the key column's type",
                    key, DescribeKeyValue(*value), field->type.ToString())};
  }
  return std::nullopt;
}
}  // namespace

bool Shaper::NamespaceState::PlaceList(Field& field, Value& value, std::vector<std::string>& path) {
  if (value.kind() != Value::Kind::kList) return false;
  Field& element = field.type.mutable_children()[0];
  ValueList& items = value.mutable_list();
  path.push_back(field.name);
  bool fits = true;
  if (element.type.id() == TypeId::kStruct || element.type.id() == TypeId::kList) {
    // Objects always fit a struct element (their fields evolve it); inner lists must fit in turn.
    for (Value& item : items) {
      if (!item.is_null() && !Place(element, item, path)) fits = false;
    }
  } else {
    // Scalars: convert a copy, so that a list that does not fit is left untouched for its sibling.
    ValueList converted = items;
    for (Value& item : converted) {
      if (!item.is_null() && !PlaceScalar(element, item, path, "element")) {
        fits = false;
        break;
      }
    }
    if (fits) items = std::move(converted);
  }
  path.pop_back();
  return fits;
}

bool Shaper::NamespaceState::Place(Field& field, Value& value, std::vector<std::string>& path) {
  switch (field.type.id()) {
    case TypeId::kStruct: {
      if (value.kind() != Value::Kind::kObject) return false;
      path.push_back(field.name);
      AbsorbObject(field.type.mutable_children(), value.mutable_object(), path);
      path.pop_back();
      return true;
    }
    case TypeId::kList:
      return PlaceList(field, value, path);
    case TypeId::kMap: {
      if (value.kind() != Value::Kind::kObject) return false;
      Field& value_field = field.type.mutable_children()[1];
      ValueObject converted = value.as_object();
      for (auto& [key, item] : converted) {
        if (!item.is_null() && !Place(value_field, item, path)) return false;
      }
      value.mutable_object() = std::move(converted);
      return true;
    }
    default:
      return PlaceScalar(field, value, path, field.name);
  }
}

const std::string& Shaper::NamespaceState::KeyOf(const Field& field) const {
  return SourceNameOf(schema->source_names, field);
}

Field* Shaper::NamespaceState::FindByKey(std::vector<Field>& fields, std::string_view key,
                                         size_t guess) const {
  return FindByKeyIn(fields, key, guess, schema->source_names);
}

std::string Shaper::NamespaceState::ApplyNameRules(Field& field, const std::string& key,
                                                   const std::vector<Field>& fields) {
  // Top-level fields keep their index across records; a struct's fields are indexed here.
  internal::FoldedNames struct_names;
  internal::FoldedNames& names =
      &fields == &schema->fields ? top_level_folded_names : struct_names;
  names.CatchUp(fields);
  internal::DecidedName decided = internal::DecideFieldName(key, fields, names, fields.size() + 1);
  if (decided.why.empty()) return "";
  field.name = std::move(decided.name);
  schema->source_names[field.id] = key;
  return fmt::format(", named so for records' '{}': {}", key, decided.why);
}

Field& Shaper::NamespaceState::AddField(std::vector<Field>& fields, const std::string& key,
                                        const Value& value, const std::vector<std::string>& path,
                                        std::string_view purpose) {
  Field field = NewField(key, value, path.empty());
  const std::string renamed = ApplyNameRules(field, key, fields);
  Changed(fmt::format("added {} ({}){}{}", JoinPath(path, field.name), ShapeName(field.type),
                      purpose, renamed));
  fields.push_back(std::move(field));
  return fields.back();
}

namespace {
// Far beyond any real namespace: larger ids (a damaged store) are tracked in a map instead.
constexpr size_t kMaxTableFieldId = 1 << 20;
}  // namespace

void Shaper::NamespaceState::MarkFilled(const Field& field, uint64_t serial) {
  const auto id = static_cast<size_t>(static_cast<uint32_t>(field.id));
  if (id >= kMaxTableFieldId) {
    filled_by_object_beyond[field.id] = serial;
    return;
  }
  if (id >= filled_by_object.size()) {
    filled_by_object.resize(std::max<size_t>(id + 1, 2 * filled_by_object.size()), 0);
  }
  filled_by_object[id] = serial;
}

bool Shaper::NamespaceState::IsFilled(const Field& field, uint64_t serial) const {
  const auto id = static_cast<size_t>(static_cast<uint32_t>(field.id));
  if (id < filled_by_object.size()) return filled_by_object[id] == serial;
  auto it = filled_by_object_beyond.find(field.id);
  return it != filled_by_object_beyond.end() && it->second == serial;
}

void Shaper::NamespaceState::AbsorbObject(std::vector<Field>& fields, ValueObject& object,
                                          std::vector<std::string>& path) {
  // Conformed in place: kept entries move down over dropped nulls and are renamed to their
  // column (a sibling's, or a field the name rules renamed).
  const bool is_record = path.empty();
  if (is_record) record_field_indices.clear();
  const uint64_t serial = ++object_serial;
  size_t kept = 0;
  FieldLookup lookup(fields, schema->source_names, object.size(),
                     is_record ? &top_level_index : nullptr);
  for (size_t i = 0; i < object.size(); ++i) {
    auto& [name, value] = object[i];
    const bool is_empty_list = value.kind() == Value::Kind::kList && value.as_list().empty();
    Field* field = lookup.Find(name);
    if (field == nullptr && (value.is_null() || is_empty_list)) {
      std::vector<std::string> full_path = path;
      full_path.push_back(name);
      NullOnlyField& null_only = null_only_paths[std::move(full_path)];
      null_only.is_list |= is_empty_list;
      if (is_record && context != nullptr && context->declared_types != nullptr) {
        if (auto declared = context->declared_types->find(name);
            declared != context->declared_types->end()) {
          null_only.declared = declared->second;
        }
      }
      continue;  // created at Seal(): as its declared type, else as a string
    }
    if (value.is_null()) continue;  // absent and null read the same in a column
    if (field == nullptr) field = &AddField(fields, name, value, path);
    size_t index = static_cast<size_t>(field - fields.data());
    lookup.Found(field);
    if (!schema->source_names.empty() && name != field->name) name = field->name;
    if (IsFilled(*field, serial) || !Place(*field, value, path)) {
      index = PlaceInSibling(fields, index, value, path, serial);
      name = fields[index].name;
    }
    MarkFilled(fields[index], serial);
    if (is_record) record_field_indices.push_back(index);
    if (kept != i) object[kept] = std::move(object[i]);
    ++kept;
  }
  object.resize(kept);
}

size_t Shaper::NamespaceState::PlaceInSibling(std::vector<Field>& fields, size_t index,
                                              Value& value, std::vector<std::string>& path,
                                              uint64_t serial) {
  // A value of another type goes to the sibling `<field>_<type>`; the field itself is untouched.
  const std::string field_name = fields[index].name;  // `fields` may grow below
  const std::string field_shape = ShapeName(fields[index].type);
  const std::string typed_key =
      field_name + "_" + SiblingSuffix(value, context->infer_epoch_timestamps);
  Field* sibling = FindByKey(fields, typed_key, fields.size());
  if (sibling == nullptr) {
    sibling = &AddField(fields, typed_key, value, path,
                        fmt::format(" for values of {} that are not {}",
                                    JoinPath(path, field_name), field_shape));
  }
  if (!IsFilled(*sibling, serial) && Place(*sibling, value, path)) {
    return static_cast<size_t>(sibling - fields.data());
  }
  // Even the sibling's column is taken (by another shape, a list of other elements say, or by
  // another entry of this object): keep the value losslessly as JSON text in `<field>_json`,
  // else `<field>_json_2`, ... — the first that can hold it.
  Value text = Value::String(value.ToJson());
  for (size_t number = 1;; ++number) {
    // Each attempt either creates a column (which takes the text) or fails on an existing one.
    SKIPPR_CHECK(number <= fields.size() + 1);
    const std::string json_key =
        number == 1 ? field_name + "_json" : fmt::format("{}_json_{}", field_name, number);
    Field* json = FindByKey(fields, json_key, fields.size());
    if (json == nullptr) {
      json = &AddField(fields, json_key, text, path,
                       fmt::format(" for values of {} as JSON text", JoinPath(path, field_name)));
      SKIPPR_CHECK(json->type.id() == TypeId::kString);
    }
    if (!IsFilled(*json, serial) && Place(*json, text, path)) {
      value = std::move(text);
      return static_cast<size_t>(json - fields.data());
    }
  }
}

void Shaper::NamespaceState::CreateNullOnlyFields() {
  for (const auto& [full_path, null_only] : null_only_paths) {
    std::vector<Field>* fields = &schema->fields;
    bool reachable = true;
    for (size_t i = 0; i + 1 < full_path.size(); ++i) {
      Field* parent = FindIn(*fields, full_path[i]);  // the path holds the parents' names
      // A list's path goes on through its "element" (a list of objects), so descend into lists too.
      if (parent == nullptr ||
          (parent->type.id() != TypeId::kStruct && parent->type.id() != TypeId::kList)) {
        reachable = false;
        break;
      }
      fields = &parent->type.mutable_children();
    }
    const std::string& key = full_path.back();
    if (!reachable || FindByKey(*fields, key, 0) != nullptr) continue;
    Field field{NextFieldId(), key, LogicalType::String(), true};
    if (null_only.declared) {
      field.type = RenumberedDeclaredType(*null_only.declared);
    } else if (null_only.is_list) {
      field.type = LogicalType::List(Field{NextFieldId(), "element", LogicalType::String(), true});
    }
    const std::string renamed = ApplyNameRules(field, key, *fields);
    std::vector<std::string> parents(full_path.begin(), full_path.end() - 1);
    Changed(fmt::format("added {} ({}; only {} seen so far){}", JoinPath(parents, field.name),
                        field.type.ToString(), null_only.is_list ? "empty lists" : "nulls",
                        renamed));
    fields->push_back(std::move(field));
  }
  null_only_paths.clear();
}

namespace {
// Brings a column built earlier in this unit of work up to its field's current type. The schema
// only ever grows: structs gain fields (null-padded child columns here), ints are promoted to long
// (same int64 layout) or, while the field is new, widened to double (values rewritten).
void ConformColumn(Column& column, const LogicalType& type) {
  const PhysicalKind wanted = PhysicalKindOf(type.id());
  if (PhysicalKindOf(column.type.id()) == PhysicalKind::kInt64 && wanted == PhysicalKind::kDouble) {
    column.ConvertInt64ToDouble();
  }
  SKIPPR_CHECK_MSG(PhysicalKindOf(column.type.id()) == wanted, "a field changed its column layout");
  const std::vector<Field>& fields = type.children();
  SKIPPR_CHECK(column.children.size() <= fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i == column.children.size()) {
      column.children.emplace_back(fields[i].type);
      column.children.back().PadNullsTo(column.length);  // only structs gain children
    }
    ConformColumn(column.children[i], fields[i].type);
  }
  column.type = type;
}
}  // namespace

void Shaper::NamespaceState::ConformColumns() {
  const std::vector<Field>& fields = schema->fields;
  SKIPPR_CHECK(columns.size() <= fields.size());
  if (columns.empty()) columns.reserve(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i == columns.size()) {
      columns.emplace_back(fields[i].type);
      Column& column = columns.back();
      column.fixed.reserve(previous_batch_rows * FixedWidthBytes(PhysicalKindOf(column.type.id())));
      column.validity.reserve((previous_batch_rows + 7) / 8);
      column.PadNullsTo(column_rows);
    }
    ConformColumn(columns[i], fields[i].type);
  }
  columns_conformed_at_edit = schema_edits;
}

void Shaper::NamespaceState::AppendRow(const ValueObject& row) {
  if (columns_conformed_at_edit != schema_edits || columns.size() != schema->fields.size()) {
    ConformColumns();
  }
  SKIPPR_CHECK(record_field_indices.size() == row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    Column& column = columns[record_field_indices[i]];
    SKIPPR_DCHECK(schema->fields[record_field_indices[i]].name == row[i].first);
    column.PadNullsTo(column_rows);
    column.Append(row[i].second);
  }
  ++column_rows;
}

void Shaper::NamespaceState::CloseRows() {
  if (column_rows == 0) return;
  chunks.push_back({std::move(columns), column_rows, std::move(cdc), std::move(origins)});
  columns.clear();
  column_rows = 0;
  cdc.reset();
  origins.clear();
}

void Shaper::NamespaceState::AddChunk(ColumnRows& rows, const std::vector<size_t>& targets,
                                      std::vector<RecordOrigin> row_origins) {
  CloseRows();
  Chunk chunk;
  chunk.rows = rows.num_rows;
  chunk.columns.reserve(schema->fields.size());
  for (const Field& field : schema->fields) chunk.columns.emplace_back(field.type);
  for (size_t i = 0; i < rows.columns.size(); ++i) {
    if (targets[i] == SIZE_MAX) continue;
    Column& from = rows.columns[i];
    const Field& field = schema->fields[targets[i]];
    // A field of this unit of work that may still widen to double must know of integers beyond
    // what a double holds exactly, as it would from rows one at a time.
    if (PhysicalKindOf(field.type.id()) == PhysicalKind::kInt64 &&
        mutable_field_ids.count(field.id) != 0) {
      for (int64_t row = 0; row < from.length; ++row) {
        if (from.IsValid(row) && !internal::IsExactInDouble(from.Int64At(row))) {
          beyond_double_field_ids.insert(field.id);
          break;
        }
      }
    }
    SKIPPR_CHECK(from.length == rows.num_rows);
    chunk.columns[targets[i]] = std::move(from);
  }
  chunk.cdc = std::move(rows.cdc);
  chunk.origins = std::move(row_origins);
  chunks.push_back(std::move(chunk));
}

Shaper::Shaper(PipelineSchema schema, ShaperOptions options)
    : schema_(std::move(schema)), options_(std::move(options)) {}

Shaper::~Shaper() = default;

Shaper::NamespaceState& Shaper::StateFor(const std::string& namespace_name) {
  auto it = states_.find(namespace_name);
  if (it != states_.end()) return *it->second;
  auto state = std::make_unique<NamespaceState>();
  auto [ns, inserted] = schema_.namespaces.try_emplace(namespace_name);
  if (inserted) ns->second.name = namespace_name;
  state->schema = &ns->second;
  state->is_new = ns->second.schema_id == 0;
  NamespaceState& result = *state;
  states_.emplace(namespace_name, state.get());
  owned_states_.push_back(std::move(state));
  return result;
}

std::string Shaper::NamespaceOf(const RecordContext& context) const {
  if (!options_.namespace_fields.empty()) return "";
  return internal::DecideNamespaceName(config::CleanName(
      context.source_namespace.empty() ? options_.default_namespace : context.source_namespace));
}

std::optional<std::string> Shaper::RouteRecord(const Value& record, const RecordContext& context,
                                               NamespaceState** state, std::string* name) {
  if (options_.namespace_fields.empty()) {
    // Every record of a source namespace goes to the same state: name and look it up once.
    const std::string& raw_namespace =
        context.source_namespace.empty() ? options_.default_namespace : context.source_namespace;
    if (last_state_ != nullptr && last_raw_namespace_ == raw_namespace) {
      *state = last_state_;
      return std::nullopt;
    }
    last_state_ = nullptr;
    last_raw_namespace_ = raw_namespace;
    *name = NamespaceOf(context);
  } else {
    std::string joined;
    for (const std::string& field : options_.namespace_fields) {
      const Value* value = record.Find(field);
      if (value == nullptr || value->is_null()) {
        return fmt::format(
            "namespace field '{}' is missing or null; with transform.namespace_fields every "
            "record needs it",
            field);
      }
      joined += (joined.empty() ? "" : "_") + NamespaceValueText(*value);
    }
    *name = internal::DecideNamespaceName(config::CleanName(joined));
  }
  if (auto it = states_.find(*name); it != states_.end()) *state = it->second;
  if (*state != nullptr && options_.namespace_fields.empty()) last_state_ = *state;
  return std::nullopt;
}

namespace {
// Whether a column of `held` type takes values of `declared` type: as it is (the same type, or a
// narrower one), or widened in place by Iceberg promotions that keep its layout, so that a column
// half-built in this unit of work stays valid. Nested types compare by shape, not by field ids.
bool WidenToDeclared(LogicalType& held, const LogicalType& declared, bool* widened) {
  if (held.id() != declared.id() || !held.is_nested()) {
    if (held == declared || CanPromote(declared, held)) return true;
    if (!CanPromote(held, declared) || PhysicalKindOf(held.id()) != PhysicalKindOf(declared.id())) {
      return false;
    }
    held = declared;
    *widened = true;
    return true;
  }
  const std::vector<Field>& wanted = declared.children();
  if (held.id() != TypeId::kStruct) {  // list: {element}; map: {key, value}
    if (held.children().size() != wanted.size()) return false;
    for (size_t i = 0; i < wanted.size(); ++i) {
      LogicalType child = held.children()[i].type;
      bool child_widened = false;
      if (!WidenToDeclared(child, wanted[i].type, &child_widened)) return false;
      if (child_widened) held.mutable_children()[i].type = std::move(child);
      *widened |= child_widened;
    }
    return true;
  }
  for (const Field& field : wanted) {  // a struct field not held yet is added as values arrive
    for (size_t i = 0; i < held.children().size(); ++i) {
      if (held.children()[i].name != field.name) continue;
      LogicalType child = held.children()[i].type;
      bool child_widened = false;
      if (!WidenToDeclared(child, field.type, &child_widened)) return false;
      if (child_widened) held.mutable_children()[i].type = std::move(child);
      *widened |= child_widened;
    }
  }
  return true;
}
}  // namespace

Status Shaper::ApplyDeclaredTypes(const RecordContext& context) {
  if (!context.declared_types_are_binding || context.declared_types == nullptr ||
      !options_.namespace_fields.empty()) {
    return Status::OK();
  }
  const std::string namespace_name = NamespaceOf(context);
  auto saved = schema_.namespaces.find(namespace_name);
  if (saved == schema_.namespaces.end()) return Status::OK();
  NamespaceSchema& ns = saved->second;
  // Every column checked before any is widened: a refused batch changes nothing.
  std::vector<std::pair<Field*, LogicalType>> widenings;
  for (const auto& [name, declared] : *context.declared_types) {
    Field* field = nullptr;
    for (Field& candidate : ns.fields) {
      if (SourceNameOf(ns.source_names, candidate) == name) field = &candidate;
    }
    if (field == nullptr) continue;  // a new column: added as its values arrive
    LogicalType type = field->type;
    bool widened = false;
    if (!WidenToDeclared(type, declared, &widened)) {
      return Status::Conflict(fmt::format(
          "{}: column '{}' is now {}, but namespace '{}' holds it as {}, and {} is not a "
          "widening of it (int → long, float → double, decimal(p, s) → decimal(p2, s) with p2 >= "
          "p). Nothing from this change on was committed. {}",
          context.source_object.empty() ? "the source" : context.source_object, name,
          declared.ToString(), namespace_name, field->type.ToString(), declared.ToString(),
          context.on_type_change));
    }
    if (widened) widenings.emplace_back(field, std::move(type));
  }
  for (auto& [field, type] : widenings) {
    StateFor(namespace_name)
        .Changed(fmt::format("promoted {} {} → {}", field->name, field->type.ToString(),
                             type.ToString()));
    field->type = std::move(type);
  }
  return Status::OK();
}

std::optional<Deadletter> Shaper::Absorb(Value record, const RecordOrigin& origin,
                                         const RecordContext& context, RowChange* change) {
  std::string namespace_name;  // decided by RouteRecord (unless the state is known already)
  const auto deadletter = [&](FailureCode code, std::string reason) {
    Deadletter rejected = MakeDeadletter(origin, code, std::move(reason), record.ToJson());
    rejected.namespace_name = namespace_name.empty() ? NamespaceOf(context) : namespace_name;
    return rejected;
  };
  if (record.kind() != Value::Kind::kObject) {
    return deadletter(
        FailureCode::kNotAnObject,
        fmt::format("a record must be an object, found {}", ValueKindName(record.kind())));
  }
  if (!context.records_are_flat) {
    if (auto rejection = Untypable(record, 0, nullptr, context.keys_may_repeat)) {
      return deadletter(rejection->code, std::move(rejection->reason));
    }
  }
  if (options_.flatten_events) {
    ValueObject flat;
    FlattenInto(flat, "", std::move(record.mutable_object()));
    record = Value::Object(std::move(flat));
    if (auto rejection = Untypable(record, 0, nullptr, true))
      return deadletter(rejection->code, rejection->reason + " after flattening");
  }

  NamespaceState* state = nullptr;
  if (auto reason = RouteRecord(record, context, &state, &namespace_name)) {
    return deadletter(FailureCode::kMissingNamespaceField, std::move(*reason));
  }
  // Checked before the namespace is created: a deadletter leaves no empty namespace behind.
  if (!options_.key_fields.empty()) {
    auto saved = schema_.namespaces.find(namespace_name);
    const NamespaceSchema* ns = state != nullptr                    ? state->schema
                                : saved != schema_.namespaces.end() ? &saved->second
                                                                    : nullptr;
    if (auto rejection = KeyProblem(ns, record, options_, context)) {
      if (state != nullptr) namespace_name = state->schema->name;
      return deadletter(rejection->code, std::move(rejection->reason));
    }
  }
  if (state == nullptr) {
    state = &StateFor(namespace_name);
    if (options_.namespace_fields.empty()) last_state_ = state;
  }
  if (context.key_fields != nullptr && state->schema->key_fields != *context.key_fields) {
    state->schema->key_fields = *context.key_fields;
    state->Changed(fmt::format("key ({})", fmt::join(state->schema->key_fields, ", ")));
  }
  state->context = &context;
  std::vector<std::string> path;
  state->AbsorbObject(state->schema->fields, record.mutable_object(), path);
  state->context = nullptr;
  if (options_.build_columns) {
    state->AppendRow(record.as_object());
    if (options_.keep_origins) state->origins.push_back(origin);
    state->AppendChange(change);
  }
  ++records_absorbed_;
  return std::nullopt;
}

namespace {
// Whether a column of `column` type appends as it is to a field of type `field`: the same type,
// or one Iceberg promotes to it with the same layout (int → long, decimal(p, s) → decimal(p2, s)),
// nested types by shape, struct fields in the same order.
bool ColumnFitsField(const LogicalType& column, const LogicalType& field) {
  if (!column.is_nested() || column.id() != field.id()) {
    return column == field ||
           (CanPromote(column, field) && PhysicalKindOf(column.id()) == PhysicalKindOf(field.id()));
  }
  const std::vector<Field>& have = column.children();
  const std::vector<Field>& want = field.children();
  if (have.size() != want.size()) return false;
  for (size_t i = 0; i < have.size(); ++i) {
    if (column.id() == TypeId::kStruct && have[i].name != want[i].name) return false;
    if (!ColumnFitsField(have[i].type, want[i].type)) return false;
  }
  return true;
}

bool HasValues(const Column& column) {
  for (int64_t row = 0; row < column.length; ++row) {
    if (column.IsValid(row)) return true;
  }
  return false;
}

bool HasNulls(const Column& column) {
  for (int64_t row = 0; row < column.length; ++row) {
    if (!column.IsValid(row)) return true;
  }
  return false;
}
}  // namespace

Shaper::NamespaceState* Shaper::ColumnTargets(const ColumnRows& rows, const RecordContext& context,
                                              std::vector<size_t>* targets) {
  if (!options_.build_columns || options_.flatten_events || !options_.namespace_fields.empty()) {
    return nullptr;
  }
  const std::string namespace_name = NamespaceOf(context);
  auto saved = schema_.namespaces.find(namespace_name);
  if (saved == schema_.namespaces.end() || saved->second.fields.empty()) return nullptr;
  NamespaceSchema& ns = saved->second;
  if (context.key_fields != nullptr && ns.key_fields != *context.key_fields) return nullptr;
  targets->assign(rows.columns.size(), SIZE_MAX);
  std::vector<bool> taken(ns.fields.size(), false);
  for (size_t i = 0; i < rows.columns.size(); ++i) {
    if (i > 0 && rows.names[i] == rows.names[i - 1]) {
      // Values the declared type cannot hold: a sibling's, which the row path decides.
      if (HasValues(rows.columns[i])) return nullptr;
      continue;
    }
    const Field* field = FindByKeyIn(ns.fields, rows.names[i], i, ns.source_names);
    if (field == nullptr || !ColumnFitsField(rows.columns[i].type, field->type)) return nullptr;
    const auto index = static_cast<size_t>(field - ns.fields.data());
    if (taken[index]) return nullptr;
    taken[index] = true;
    (*targets)[i] = index;
  }
  // A row whose configured key is missing or null is a deadletter, which the row path makes.
  for (const std::string& key_field : options_.key_fields) {
    const Field* field = ns.FindField(key_field);
    if (field == nullptr) return nullptr;
    const auto index = static_cast<size_t>(field - ns.fields.data());
    const auto column = std::find(targets->begin(), targets->end(), index);
    if (column == targets->end() ||
        HasNulls(rows.columns[static_cast<size_t>(column - targets->begin())])) {
      return nullptr;
    }
  }
  return &StateFor(namespace_name);
}

namespace {
std::vector<RecordLayout::Slot> SlotsOf(const std::vector<Field>& fields,
                                        const SourceNames& source_names) {
  std::vector<RecordLayout::Slot> slots;
  slots.reserve(fields.size());
  for (const Field& field : fields) {
    RecordLayout::Slot slot{SourceNameOf(source_names, field), field.type};
    slot.is_plain_key = slot.key.find_first_of("\"\\") == std::string::npos;
    if (field.type.id() == TypeId::kStruct) {
      slot.children = SlotsOf(field.type.children(), source_names);
    }
    slots.push_back(std::move(slot));
  }
  return slots;
}
}  // namespace

std::shared_ptr<const RecordLayout> Shaper::TypedLayout(const RecordContext& context) const {
  if (!options_.build_columns || options_.flatten_events || !options_.namespace_fields.empty()) {
    return nullptr;
  }
  const std::string namespace_name = NamespaceOf(context);
  auto saved = schema_.namespaces.find(namespace_name);
  if (saved == schema_.namespaces.end() || saved->second.fields.empty()) return nullptr;
  const NamespaceSchema& ns = saved->second;
  if (context.key_fields != nullptr && ns.key_fields != *context.key_fields) return nullptr;
  if (auto state = states_.find(namespace_name);
      state != states_.end() &&
      (!state->second->changes.empty() || !state->second->mutable_field_ids.empty())) {
    return nullptr;  // not sealed: its fields may still change type
  }
  std::vector<RecordLayout::Slot> slots = SlotsOf(ns.fields, ns.source_names);
  for (const std::string& key_field : options_.key_fields) {
    const Field* field = ns.FindField(key_field);
    if (field == nullptr) return nullptr;  // every record would be a deadletter: the row path
    slots[static_cast<size_t>(field - ns.fields.data())].is_required = true;
  }
  return std::make_shared<const RecordLayout>(namespace_name, ns.schema_id, std::move(slots));
}

std::vector<Deadletter> Shaper::AbsorbColumns(ColumnRows rows, RecordOrigin origin,
                                              const RecordContext& context) {
  std::vector<Deadletter> deadletters;
  std::vector<size_t> targets;
  if (NamespaceState* state = ColumnTargets(rows, context, &targets)) {
    std::vector<RecordOrigin> row_origins;
    if (options_.keep_origins) {
      row_origins.reserve(static_cast<size_t>(rows.num_rows));
      for (int64_t row = 0; row < rows.num_rows; ++row) {
        origin.row = rows.first_row + static_cast<uint64_t>(row);
        if (!rows.lines.empty()) origin.line = rows.lines[static_cast<size_t>(row)];
        row_origins.push_back(origin);
      }
    }
    records_absorbed_ += static_cast<uint64_t>(rows.num_rows);
    state->AddChunk(rows, targets, std::move(row_origins));
    return deadletters;
  }
  for (int64_t row = 0; row < rows.num_rows; ++row) {
    origin.row = rows.first_row + static_cast<uint64_t>(row);
    if (!rows.lines.empty()) origin.line = rows.lines[static_cast<size_t>(row)];
    std::optional<RowChange> change;
    if (rows.cdc) {
      const auto at = static_cast<size_t>(row);
      change = RowChange{rows.cdc->mutations[at], std::string(rows.cdc->event_ids[at]),
                         std::string(rows.cdc->order_tokens[at]),
                         std::string(rows.cdc->business_keys[at])};
    }
    if (auto deadletter = Absorb(rows.RowAt(row), origin, context, change ? &*change : nullptr)) {
      deadletters.push_back(std::move(*deadletter));
    }
  }
  return deadletters;
}

std::vector<NamespaceChange> Shaper::Seal() {
  std::vector<NamespaceChange> sealed;
  for (auto& [name, state] : states_) {
    state->CreateNullOnlyFields();
    state->mutable_field_ids.clear();
    state->beyond_double_field_ids.clear();
    if (state->changes.empty() && !state->is_new) continue;
    NamespaceSchema& ns = *state->schema;
    ns.schema_id += 1;
    ns.history.push_back({ns.schema_id, state->changes});
    sealed.push_back({name, state->is_new, std::move(state->changes)});
    state->changes.clear();
    state->is_new = false;
  }
  return sealed;
}

std::vector<Batch> Shaper::TakeBatches(std::vector<std::vector<RecordOrigin>>* origins) {
  std::vector<Batch> batches;
  for (auto& [name, state] : states_) {
    if (state->column_rows > 0) state->previous_batch_rows = state->column_rows;
    state->CloseRows();
    for (NamespaceState::Chunk& chunk : state->chunks) {
      const std::vector<Field>& fields = state->schema->fields;
      SKIPPR_CHECK(chunk.columns.size() <= fields.size());
      // Seal() may have added fields (seen only as nulls), and promoted types since.
      for (size_t i = chunk.columns.size(); i < fields.size(); ++i) {
        chunk.columns.emplace_back(fields[i].type);
      }
      for (size_t i = 0; i < fields.size(); ++i) {
        ConformColumn(chunk.columns[i], fields[i].type);
        chunk.columns[i].PadNullsTo(chunk.rows);
      }
      Batch batch;
      batch.namespace_name = name;
      batch.schema_id = state->schema->schema_id;
      batch.fields = fields;
      batch.num_rows = chunk.rows;
      batch.columns = std::move(chunk.columns);
      batch.cdc = std::move(chunk.cdc);
      std::string reason;
      SKIPPR_CHECK_MSG(batch.Validate(&reason), reason.c_str());
      if (origins != nullptr) origins->push_back(std::move(chunk.origins));
      batches.push_back(std::move(batch));
    }
    state->chunks.clear();
  }
  return batches;
}

// ----- small public helpers -------------------------------------------------------------------

const Field* NamespaceSchema::FindField(std::string_view field_name) const {
  for (const Field& field : fields) {
    if (field.name == field_name) return &field;
  }
  return nullptr;
}

namespace {
size_t CountNested(const std::vector<Field>& fields) {
  size_t count = 0;
  for (const Field& field : fields) count += 1 + CountNested(field.type.children());
  return count;
}
}  // namespace

size_t NamespaceSchema::CountFields() const { return CountNested(fields); }

std::optional<Value> NumberFromText(std::string_view literal, std::optional<double> parsed) {
  constexpr size_t kMaxDecimalDigits = 38;
  const bool is_negative = !literal.empty() && literal[0] == '-';
  const std::string_view digits = literal.substr(is_negative ? 1 : 0);
  const bool is_integer =
      !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (is_integer) {
    if (digits[0] == '0' && digits.size() > 1) return std::nullopt;  // "007": an identifier
    if (auto integer = internal::ParseInteger(literal)) return Value::Int(*integer);
    if (digits.size() > kMaxDecimalDigits) return Value::String(std::string(literal));
    return Value::Decimal(*internal::ParseDecimal(literal, 0), kMaxDecimalDigits, 0);
  }
  if (!parsed) parsed = internal::ParseReal(literal);
  if (!parsed) {
    // Beyond a double's range (1e999): no number type holds it, so it keeps its text.
    if (internal::IsNumberLiteral(literal)) return Value::String(std::string(literal));
    return std::nullopt;
  }
  if (internal::DoubleHoldsLiteral(literal, *parsed)) return Value::Double(*parsed);
  if (auto exact = internal::ParseExactDecimal(literal)) {
    return Value::Decimal(exact->unscaled, kMaxDecimalDigits, static_cast<uint8_t>(exact->scale));
  }
  return Value::String(std::string(literal));
}

std::string DescribeDeadletter(const Deadletter& deadletter) {
  const RecordOrigin& origin = deadletter.origin;
  std::string place = origin.source;
  if (origin.line > 0) place += fmt::format(":{}", origin.line);
  if (origin.row > 0) place += fmt::format(" (record {})", origin.row);
  return fmt::format("{}: {}", place, deadletter.reason);
}

}  // namespace skippr::schema
