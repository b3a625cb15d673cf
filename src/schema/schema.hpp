// Schema discovery and evolution (reference §7): records from any source are routed to namespaces
// (one namespace becomes one table), their fields inferred deterministically, and each namespace's
// schema evolved as new shapes arrive — new fields added, values that fit kept, a value of another
// type sent to a sibling field `<field>_<type>`. Field ids are stable and never reused.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "core/status.hpp"
#include "core/types.hpp"
#include "core/value.hpp"
#include "store/store.hpp"

namespace skippr::schema {

// Name rules (docs/schema.md, "Names"), decided when a name is first seen, before any commit.
inline constexpr size_t kMaxFieldNameBytes = 255;
inline constexpr size_t kMaxNamespaceNameBytes = 128;
// The pipeline's deadletter table; a data namespace of that name is renamed `deadletters_data`.
inline constexpr std::string_view kDeadlettersNamespace = "deadletters";
// What an empty namespace name (an empty namespace_fields value) becomes.
inline constexpr std::string_view kUnnamedNamespace = "unnamed";

struct SchemaVersion {
  int32_t schema_id = 0;
  std::vector<std::string> changes;  // "added amount (double)", "promoted id int → long", ...
};

struct NamespaceSchema {
  std::string name;
  int32_t schema_id = 0;      // 0 = never saved; each saved change increments it
  int32_t last_field_id = 0;  // highest id ever assigned in this namespace (ids are never reused)
  std::vector<Field> fields;
  std::vector<SchemaVersion> history;
  // Field id → the name records give that field, for fields whose name differs from it (the name
  // rules renamed it: `V` → `V_2` beside `v`). Kept with the schema so the rename is the same in
  // every batch and run.
  std::map<int32_t, std::string> source_names;

  const Field* FindField(std::string_view field_name) const;
  // Number of fields including nested ones (struct children, list elements, map keys/values).
  size_t CountFields() const;
};

struct PipelineSchema {
  std::map<std::string, NamespaceSchema> namespaces;
};

// Iceberg's JSON schema form ({"type":"struct","schema-id":..,"fields":[{"id","name","required",
// "type"}]}) — also how the schema family stores fields, so the lake writes the same thing.
nlohmann::json FieldsToIcebergJson(const std::vector<Field>& fields, int32_t schema_id);
Result<std::vector<Field>> FieldsFromIcebergJson(const nlohmann::json& schema_json);
nlohmann::json TypeToIcebergJson(const LogicalType& type);

// Persistence in the store's `schema` family (docs/formats/store.md): one key per namespace.
Result<PipelineSchema> LoadSchema(const store::ReadTransaction& transaction);
Result<PipelineSchema> LoadSchema(const store::WriteTransaction& transaction);
Status SaveNamespace(store::WriteTransaction& transaction, const NamespaceSchema& ns);
Status DeleteNamespace(store::WriteTransaction& transaction, const std::string& namespace_name);
// With transform.ops the saved schema above is the ops' OUTPUT (what the WAL, query and the lake
// read); the shape the shaper evolves from records, their INPUT, is kept under keys of its own.
Result<PipelineSchema> LoadInputSchema(const store::ReadTransaction& transaction);
Status SaveInputNamespace(store::WriteTransaction& transaction, const NamespaceSchema& ns);

// Whether names written by a person (`metadata apply`) already follow the name rules: a namespace
// and fields the shaper would keep as they are. InvalidArgument naming the first that does not.
Status CheckNames(const std::string& namespace_name, const std::vector<Field>& fields);

// How a CSV cell (or other untyped text) reads as a value: booleans, integers without leading
// zeros, decimals and exponents become numbers; everything else stays a string (dates and
// timestamps are recognised later, from any string). An empty cell is null.
Value ValueFromText(std::string_view text);

// Where a record came from, for deadletters: `source` is a file path (or the source's name), `line`
// the 1-based line where the record starts (0 when the format has no lines), `row` the 1-based
// record number within the source.
struct RecordOrigin {
  std::string source;
  uint64_t line = 0;
  uint64_t row = 0;
};

struct Deadletter {
  RecordOrigin origin;
  std::string reason;
  std::string payload;  // the record (or the start of its raw text), at most 1 KiB
};
std::string DescribeDeadletter(const Deadletter& deadletter);  // "file.json:12 (row 11): reason"

struct ShaperOptions {
  std::string default_namespace;              // used without namespace_fields: the pipeline's name
  std::vector<std::string> namespace_fields;  // transform.namespace_fields
  bool flatten_events = false;                // transform.flatten_events
  bool build_columns = false;                 // append conformed rows to columns for TakeBatches()
  bool keep_origins = false;  // with build_columns: remember each row's origin for TakeBatches()
  // The source's primary_key: a record whose key field is missing, null, or holds a value the key
  // column cannot take is a deadletter (a merge by key would otherwise merge distinct records).
  // `key_fields_setting` names where it is set, for the deadletter's reason.
  std::vector<std::string> key_fields;
  std::string key_fields_setting;
  // Discover: only a key value the existing key column cannot take is a deadletter (it would make
  // a sibling `<key>_<type>`). Records without a key, or with a key of a shape no key may have,
  // still shape the schema, so that a pass can refuse such a key before reading.
  bool key_checks_types_only = false;
};

// What a source knows about a record beyond its value.
struct RecordContext {
  // Integers with 10–11 digits (Unix seconds from 2010) or 13 (Unix ms 2010–2040) become timestamps
  // when a field is first seen — for formats whose integers carry no declared meaning (JSON, CSV).
  bool infer_epoch_timestamps = true;
  // Declared types of top-level fields (Parquet's schema), used when a field is first seen.
  const std::map<std::string, LogicalType>* declared_types = nullptr;
  // The source's own namespace for the record (a table name), used without namespace_fields.
  std::string source_namespace;
  // False when the format cannot repeat a key within one object (CSV headers are made unique, typed
  // sources build their objects): the duplicate-key check is skipped.
  bool keys_may_repeat = true;
  // True when every record is an object of single values with unique names (CSV rows): nothing in
  // it can break a typing rule, so the per-record check is skipped.
  bool records_are_flat = false;
};

struct NamespaceChange {
  std::string namespace_name;
  bool is_new_namespace = false;
  std::vector<std::string> changes;
};

// Routes records to namespaces and evolves their schemas, keeping conformed rows when asked.
class Shaper {
 public:
  Shaper(PipelineSchema schema, ShaperOptions options);
  ~Shaper();
  Shaper(const Shaper&) = delete;
  Shaper& operator=(const Shaper&) = delete;

  // Absorbs one record (an object). Returns a Deadletter instead when the record cannot be typed
  // (not an object, duplicate keys, nesting deeper than 64, a list mixing objects and values, a
  // missing namespace field, a primary key field missing, null or of another type); the schema is
  // then unchanged.
  std::optional<Deadletter> Absorb(Value record, const RecordOrigin& origin,
                                   const RecordContext& context);

  // Ends a unit of work (a discover run, a batch about to be committed): fields seen only as null
  // are created as strings, every changed namespace gets the next schema id and a history entry,
  // and fields created so far can no longer change type except by Iceberg promotions.
  std::vector<NamespaceChange> Seal();

  // The rows absorbed since the last call, as one Batch per namespace conformed to the current
  // schema (call Seal() first so the schema ids are final).
  // With keep_origins, `origins` (when given) receives each batch's row origins, in parallel.
  std::vector<Batch> TakeBatches(std::vector<std::vector<RecordOrigin>>* origins = nullptr);

  const PipelineSchema& schema() const { return schema_; }
  uint64_t records_absorbed() const { return records_absorbed_; }

 private:
  struct NamespaceState;
  NamespaceState& StateFor(const std::string& namespace_name);
  // The record's namespace: its state when there is one already (`state`), else its decided name
  // (`name`). A deadletter reason when a namespace field is missing.
  std::optional<std::string> RouteRecord(const Value& record, const RecordContext& context,
                                         NamespaceState** state, std::string* name);

  PipelineSchema schema_;
  ShaperOptions options_;
  std::map<std::string, NamespaceState*> states_;
  std::vector<std::unique_ptr<NamespaceState>> owned_states_;
  std::string last_raw_namespace_;  // the namespace of the previous record, before cleaning
  NamespaceState* last_state_ = nullptr;
  uint64_t records_absorbed_ = 0;
};

}  // namespace skippr::schema
