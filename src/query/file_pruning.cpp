// Which landed data files a statement can need (file_pruning.hpp): the filters of its parse tree,
// and the query that decides them over the files' manifest statistics.
#include "query/file_pruning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace skippr::query::detail {

namespace {

using nlohmann::json;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string Text(const json& node, const char* key) {
  auto it = node.find(key);
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool IsNullOrAbsent(const json& node, const char* key) {
  auto it = node.find(key);
  return it == node.end() || it->is_null();
}

// ----- the filters of a WHERE clause ----------------------------------------------------------

// A literal, or a cast of one (`DATE '2024-01-01'` parses as CAST('2024-01-01' AS DATE)).
bool IsConstant(const json& node) {
  if (!node.is_object()) return false;
  const std::string node_class = Text(node, "class");
  if (node_class == "CONSTANT") return true;
  if (node_class == "CAST") return node.contains("child") && IsConstant(node["child"]);
  return false;
}

std::optional<ColumnPath> ColumnOf(const json& node) {
  if (!node.is_object() || Text(node, "class") != "COLUMN_REF") return std::nullopt;
  auto names = node.find("column_names");
  if (names == node.end() || !names->is_array() || names->empty() || names->size() > 3) {
    return std::nullopt;
  }
  ColumnPath path;
  for (const json& name : *names) {
    if (!name.is_string()) return std::nullopt;
    path.push_back(name.get<std::string>());
  }
  return path;
}

FileFilter Atom(FileFilter::Kind kind, ColumnPath column, std::vector<json> constants = {}) {
  FileFilter atom;
  atom.kind = kind;
  atom.column = std::move(column);
  atom.constants = std::move(constants);
  return atom;
}

// `column <op> constant` in either order; the operator as seen from the column.
std::optional<FileFilter> ComparisonFilter(const json& node) {
  static const std::map<std::string, std::pair<std::string, std::string>> kOperators = {
      {"COMPARE_EQUAL", {"=", "="}},
      {"COMPARE_LESSTHAN", {"<", ">"}},
      {"COMPARE_LESSTHANOREQUALTO", {"<=", ">="}},
      {"COMPARE_GREATERTHAN", {">", "<"}},
      {"COMPARE_GREATERTHANOREQUALTO", {">=", "<="}}};
  auto op = kOperators.find(Text(node, "type"));
  if (op == kOperators.end() || !node.contains("left") || !node.contains("right")) {
    return std::nullopt;
  }
  const json& left = node["left"];
  const json& right = node["right"];
  std::optional<ColumnPath> column = ColumnOf(left);
  std::string comparison = op->second.first;
  const json* constant = &right;
  if (!column) {
    column = ColumnOf(right);
    comparison = op->second.second;
    constant = &left;
  }
  if (!column || !IsConstant(*constant)) return std::nullopt;
  FileFilter atom = Atom(FileFilter::Kind::kCompare, std::move(*column), {*constant});
  atom.comparison = comparison;
  return atom;
}

std::optional<FileFilter> OperatorFilter(const json& node) {
  const std::string type = Text(node, "type");
  auto children = node.find("children");
  if (children == node.end() || !children->is_array() || children->empty()) return std::nullopt;
  std::optional<ColumnPath> column = ColumnOf((*children)[0]);
  if (!column) return std::nullopt;
  if (type == "OPERATOR_IS_NULL" && children->size() == 1) {
    return Atom(FileFilter::Kind::kIsNull, std::move(*column));
  }
  if (type == "OPERATOR_IS_NOT_NULL" && children->size() == 1) {
    return Atom(FileFilter::Kind::kIsNotNull, std::move(*column));
  }
  if (type != "COMPARE_IN" || children->size() < 2) return std::nullopt;
  std::vector<json> constants(children->begin() + 1, children->end());
  for (const json& constant : constants) {
    if (!IsConstant(constant)) return std::nullopt;
  }
  return Atom(FileFilter::Kind::kIn, std::move(*column), std::move(constants));
}

// The part of an expression a file's statistics can decide; nullopt when nothing of it can be.
std::optional<FileFilter> FilterOf(const json& node) {
  if (!node.is_object()) return std::nullopt;
  const std::string node_class = Text(node, "class");
  if (node_class == "CONJUNCTION") {
    const std::string type = Text(node, "type");
    auto children = node.find("children");
    if (children == node.end() || !children->is_array()) return std::nullopt;
    FileFilter junction;
    junction.kind = type == "CONJUNCTION_AND" ? FileFilter::Kind::kAnd : FileFilter::Kind::kOr;
    if (type != "CONJUNCTION_AND" && type != "CONJUNCTION_OR") return std::nullopt;
    for (const json& child : *children) {
      std::optional<FileFilter> filter = FilterOf(child);
      // AND: a part that decides nothing is left out. OR: it makes the whole undecidable.
      if (filter) {
        junction.children.push_back(std::move(*filter));
      } else if (junction.kind == FileFilter::Kind::kOr) {
        return std::nullopt;
      }
    }
    if (junction.children.empty()) return std::nullopt;
    if (junction.children.size() == 1) return std::move(junction.children.front());
    return junction;
  }
  if (node_class == "COMPARISON") return ComparisonFilter(node);
  if (node_class == "BETWEEN") {
    std::optional<ColumnPath> column =
        node.contains("input") ? ColumnOf(node["input"]) : std::nullopt;
    if (!column || !node.contains("lower") || !node.contains("upper") ||
        !IsConstant(node["lower"]) || !IsConstant(node["upper"])) {
      return std::nullopt;
    }
    return Atom(FileFilter::Kind::kBetween, std::move(*column), {node["lower"], node["upper"]});
  }
  if (node_class == "OPERATOR") return OperatorFilter(node);
  return std::nullopt;
}

// ----- the table references of a statement -----------------------------------------------------

// Joins through which a WHERE filter on one side only removes result rows that the filter would
// remove anyway. Not ASOF (the nearest match would change), POSITIONAL (positions would shift) or
// lateral joins.
bool PassesFilters(const json& join) {
  static const std::set<std::string> kRefTypes = {"REGULAR", "CROSS", "NATURAL"};
  static const std::set<std::string> kJoinTypes = {"INNER", "LEFT", "RIGHT",
                                                   "OUTER", "SEMI", "ANTI"};
  return kRefTypes.contains(Text(join, "ref_type")) && kJoinTypes.contains(Text(join, "join_type"));
}

// The base tables a FROM reads directly, through joins that pass filters.
void DirectTables(const json& from, std::vector<const json*>& tables) {
  if (!from.is_object()) return;
  const std::string type = Text(from, "type");
  if (type == "BASE_TABLE") {
    tables.push_back(&from);
  } else if (type == "JOIN" && PassesFilters(from)) {
    if (from.contains("left")) DirectTables(from["left"], tables);
    if (from.contains("right")) DirectTables(from["right"], tables);
  }
}

struct Assignment {
  const FileFilter* filter = nullptr;
  bool is_only_table = false;
};

// Every SELECT's filter, assigned to the tables its FROM reads directly.
void AssignFilters(const json& node, std::vector<std::unique_ptr<FileFilter>>& filters,
                   std::map<const json*, Assignment>& assigned) {
  if (node.is_array()) {
    for (const json& item : node) AssignFilters(item, filters, assigned);
    return;
  }
  if (!node.is_object()) return;
  if (Text(node, "type") == "SELECT_NODE" && node.contains("from_table") &&
      !IsNullOrAbsent(node, "where_clause") && IsNullOrAbsent(node, "sample")) {
    std::optional<FileFilter> filter = FilterOf(node["where_clause"]);
    if (filter) {
      filters.push_back(std::make_unique<FileFilter>(std::move(*filter)));
      std::vector<const json*> tables;
      DirectTables(node["from_table"], tables);
      const bool is_only_table = Text(node["from_table"], "type") == "BASE_TABLE";
      for (const json* table : tables) assigned[table] = {filters.back().get(), is_only_table};
    }
  }
  for (const auto& [key, value] : node.items()) AssignFilters(value, filters, assigned);
}

TableReference ReferenceOf(const json& table, const std::map<const json*, Assignment>& assigned) {
  TableReference reference{Text(table, "catalog_name"), Text(table, "schema_name"),
                           Text(table, "table_name")};
  const std::string alias = Text(table, "alias");
  reference.has_alias = !alias.empty();
  reference.binding = alias.empty() ? reference.table : alias;
  auto found = assigned.find(&table);
  // A sample, renamed columns or time travel make its rows other than the table's.
  const auto renames = table.find("column_name_alias");
  const bool is_plain = IsNullOrAbsent(table, "sample") && IsNullOrAbsent(table, "at_clause") &&
                        (renames == table.end() || !renames->is_array() || renames->empty());
  if (found != assigned.end() && is_plain) {
    reference.filter = *found->second.filter;
    reference.is_only_table = found->second.is_only_table;
  }
  return reference;
}

// ----- deciding a filter over file statistics -------------------------------------------------

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = byte < 0x80           ? 1
                          : (byte >> 5) == 0x6  ? 2
                          : (byte >> 4) == 0xe  ? 3
                          : (byte >> 3) == 0x1e ? 4
                                                : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

// A bound as a value of the column's type; Null when it is not one (text that is not UTF-8, NaN).
Value UsableBound(const Value& bound, const LogicalType& type) {
  if (bound.kind() == Value::Kind::kString && !IsValidUtf8(bound.as_string())) return Value::Null();
  if (bound.kind() == Value::Kind::kDouble && std::isnan(bound.as_double())) return Value::Null();
  if (!ValueFitsColumn(bound, type)) return Value::Null();
  return bound;
}

Value CountValue(const std::optional<int64_t>& count) {
  return count ? Value::Int(*count) : Value::Null();
}

const Field* FieldNamed(const std::vector<Field>& fields, const std::string& name) {
  for (const Field& field : fields) {
    if (Lower(field.name) == Lower(name)) return &field;
  }
  return nullptr;
}

// Turns the filters of one table's references into SQL over its files' statistics: column
// `lo_<i>`, `hi_<i>`, `vc_<i>` (values), `nc_<i>` (nulls), `xc_<i>` (NaNs) for the i-th column
// used.
class FilterTranslator {
 public:
  FilterTranslator(const TableSource& table, const ConstantRenderer& render,
                   const PruningOptions& options)
      : table_(table), render_(render), options_(options) {}

  // SQL true for the files the reference may need; nullopt: every file.
  std::optional<std::string> Translate(const TableReference& reference) {
    if (!reference.filter) return std::nullopt;
    reference_ = &reference;
    return Predicate(*reference.filter);
  }

  const std::vector<const Field*>& used_fields() const { return used_; }

 private:
  std::optional<std::string> Predicate(const FileFilter& filter) {
    if (filter.kind == FileFilter::Kind::kAnd || filter.kind == FileFilter::Kind::kOr) {
      std::vector<std::string> parts;
      for (const FileFilter& child : filter.children) {
        std::optional<std::string> part = Predicate(child);
        if (part) {
          parts.push_back("(" + *part + ")");
        } else if (filter.kind == FileFilter::Kind::kOr) {
          return std::nullopt;
        }
      }
      if (parts.empty()) return std::nullopt;
      return fmt::format(
          "{}", fmt::join(parts, filter.kind == FileFilter::Kind::kAnd ? " AND " : " OR "));
    }
    return AtomPredicate(filter);
  }

  // The field a column path names in this reference (nullptr when it may be another table's, a
  // struct's field, or a column without usable statistics).
  const Field* Resolve(const ColumnPath& path) const {
    const std::vector<Field>& fields = table_.fields;
    const TableReference& reference = *reference_;
    const Field* field = nullptr;
    if (path.size() == 1) {
      if (reference.is_only_table) field = FieldNamed(fields, path[0]);
    } else if (FieldNamed(fields, path[0]) == nullptr) {  // else `s.a` may be a struct's field
      if (path.size() == 2 && Lower(path[0]) == Lower(reference.binding)) {
        field = FieldNamed(fields, path[1]);
      } else if (path.size() == 3 && !reference.has_alias &&
                 Lower(path[0]) == Lower(reference.schema) &&
                 Lower(path[1]) == Lower(reference.table)) {
        field = FieldNamed(fields, path[2]);
      }
    }
    if (field == nullptr || !HasColumnBounds(field->type)) return nullptr;
    if (field->type.id() == TypeId::kString && !options_.compares_text_bytewise) return nullptr;
    return field;
  }

  size_t Use(const Field* field) {
    auto it = std::find(used_.begin(), used_.end(), field);
    if (it != used_.end()) return static_cast<size_t>(it - used_.begin());
    used_.push_back(field);
    return used_.size() - 1;
  }

  // Text columns keep their byte order only against text: another constant would make DuckDB
  // compare them as numbers or dates.
  static bool FitsColumn(const json& constant, const Field& field) {
    if (field.type.id() != TypeId::kString) return true;
    return Text(constant, "class") == "CONSTANT" && constant.contains("value") &&
           constant["value"].contains("type") && Text(constant["value"]["type"], "id") == "VARCHAR";
  }

  std::optional<std::vector<std::string>> Constants(const FileFilter& atom, const Field& field) {
    // Each constant is rendered by a query of its own: a long IN list is left to DuckDB.
    constexpr size_t kMostConstants = 256;
    if (atom.constants.size() > kMostConstants) return std::nullopt;
    std::vector<std::string> texts;
    for (const json& constant : atom.constants) {
      if (!FitsColumn(constant, field)) return std::nullopt;
      std::optional<std::string> text = render_(constant);
      if (!text) return std::nullopt;
      texts.push_back("(" + *text + ")");
    }
    return texts;
  }

  std::optional<std::string> AtomPredicate(const FileFilter& atom) {
    const Field* field = Resolve(atom.column);
    if (field == nullptr) return std::nullopt;
    const size_t i = Use(field);
    // Unknown statistics decide nothing: every comparison is wrapped in coalesce(..., true).
    const std::string has_values = fmt::format("coalesce(vc_{0} > nc_{0}, true)", i);
    if (atom.kind == FileFilter::Kind::kIsNull) {
      // Without an outer join's missing matches only a file holding a null can yield one.
      if (!reference_->is_only_table) return std::nullopt;
      return fmt::format("coalesce(nc_{} > 0, true)", i);
    }
    if (atom.kind == FileFilter::Kind::kIsNotNull) return has_values;
    std::optional<std::vector<std::string>> constants = Constants(atom, *field);
    if (!constants) return std::nullopt;
    const std::string lo = fmt::format("lo_{}", i);
    const std::string hi = fmt::format("hi_{}", i);
    std::string bounds;
    if (atom.kind == FileFilter::Kind::kCompare) {
      const std::string& c = constants->front();
      if (atom.comparison == "=") bounds = fmt::format("{0} <= {2} AND {1} >= {2}", lo, hi, c);
      if (atom.comparison == "<") bounds = fmt::format("{} < {}", lo, c);
      if (atom.comparison == "<=") bounds = fmt::format("{} <= {}", lo, c);
      if (atom.comparison == ">") bounds = fmt::format("{} > {}", hi, c);
      if (atom.comparison == ">=") bounds = fmt::format("{} >= {}", hi, c);
    } else if (atom.kind == FileFilter::Kind::kBetween) {
      bounds = fmt::format("{} >= {} AND {} <= {}", hi, (*constants)[0], lo, (*constants)[1]);
    } else {
      std::vector<std::string> any;
      for (const std::string& c : *constants) {
        any.push_back(fmt::format("({0} <= {2} AND {1} >= {2})", lo, hi, c));
      }
      bounds = fmt::format("{}", fmt::join(any, " OR "));
    }
    if (bounds.empty()) return std::nullopt;
    std::string predicate = fmt::format("{} AND coalesce({}, true)", has_values, bounds);
    // Bounds leave NaN out, and DuckDB orders NaN above every number.
    if (field->type.id() == TypeId::kFloat || field->type.id() == TypeId::kDouble) {
      predicate = fmt::format("coalesce(xc_{} > 0, true) OR ({})", i, predicate);
    }
    return predicate;
  }

  const TableSource& table_;
  const ConstantRenderer& render_;
  const PruningOptions& options_;
  const TableReference* reference_ = nullptr;
  std::vector<const Field*> used_;
};

}  // namespace

std::optional<std::vector<TableReference>> ParseTableReferences(const json& tree) {
  if (!tree.is_object() || tree.value("error", true) || !tree.contains("statements")) {
    return std::nullopt;
  }
  std::vector<std::unique_ptr<FileFilter>> filters;
  std::map<const json*, Assignment> assigned;
  AssignFilters(tree, filters, assigned);

  std::set<std::string> ctes;
  std::vector<TableReference> references;
  std::function<void(const json&)> walk = [&](const json& node) {
    if (node.is_array()) {
      for (const json& item : node) walk(item);
      return;
    }
    if (!node.is_object()) return;
    if (Text(node, "type") == "BASE_TABLE" && node.contains("table_name")) {
      references.push_back(ReferenceOf(node, assigned));
    }
    if (auto cte_map = node.find("cte_map"); cte_map != node.end() && cte_map->is_object()) {
      if (auto map = cte_map->find("map"); map != cte_map->end() && map->is_array()) {
        for (const json& entry : *map) {
          if (entry.is_object() && entry.contains("key") && entry["key"].is_string()) {
            ctes.insert(Lower(entry["key"].get<std::string>()));
          }
        }
      }
    }
    for (const auto& [key, value] : node.items()) walk(value);
  };
  walk(tree);
  std::erase_if(references, [&](const TableReference& reference) {
    return reference.catalog.empty() && reference.schema.empty() &&
           ctes.contains(Lower(reference.table));
  });
  return references;
}

std::optional<FilePruning> PlanFilePruning(const TableSource& table,
                                           const std::vector<const TableReference*>& references,
                                           const ConstantRenderer& render,
                                           const PruningOptions& options) {
  const std::vector<LandedFile>& files = table.landed.data_files;
  if (files.empty() || references.empty()) return std::nullopt;
  FilterTranslator translator(table, render, options);
  std::vector<std::string> needs;
  for (const TableReference* reference : references) {
    std::optional<std::string> predicate = translator.Translate(*reference);
    if (!predicate) return std::nullopt;
    needs.push_back("(" + *predicate + ")");
  }
  FilePruning pruning;
  pruning.where = fmt::format("{}", fmt::join(needs, " OR "));
  Batch& statistics = pruning.statistics;
  int32_t id = 1;
  statistics.fields.push_back({id++, "f", LogicalType::Long(), false});
  const std::vector<const Field*>& used = translator.used_fields();
  for (size_t i = 0; i < used.size(); ++i) {
    statistics.fields.push_back({id++, fmt::format("lo_{}", i), used[i]->type, true});
    statistics.fields.push_back({id++, fmt::format("hi_{}", i), used[i]->type, true});
    for (const char* count : {"vc", "nc", "xc"}) {
      statistics.fields.push_back(
          {id++, fmt::format("{}_{}", count, i), LogicalType::Long(), true});
    }
  }
  for (const Field& field : statistics.fields) statistics.columns.emplace_back(field.type);
  const ColumnStatistics unknown;
  for (size_t f = 0; f < files.size(); ++f) {
    size_t column = 0;
    statistics.columns[column++].Append(Value::Int(static_cast<int64_t>(f)));
    for (const Field* field : used) {
      auto found = files[f].column_statistics.find(field->id);
      const ColumnStatistics& stats =
          found == files[f].column_statistics.end() ? unknown : found->second;
      statistics.columns[column++].Append(UsableBound(stats.lower, field->type));
      statistics.columns[column++].Append(UsableBound(stats.upper, field->type));
      statistics.columns[column++].Append(CountValue(stats.value_count));
      statistics.columns[column++].Append(CountValue(stats.null_count));
      statistics.columns[column++].Append(CountValue(stats.nan_count));
    }
  }
  statistics.num_rows = static_cast<int64_t>(files.size());
  return pruning;
}

}  // namespace skippr::query::detail
