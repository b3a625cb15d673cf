// Schema discovery and evolution (reference §7): records from any source are routed to namespaces
// (one namespace becomes one table), their fields inferred deterministically, and each namespace's
// schema evolved as new shapes arrive — new fields added, values that fit kept, a value of another
// type sent to a sibling field `<field>_<type>`. Field ids are stable and never reused.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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
  // The source's own key of the namespace's rows (a PostgreSQL table's primary key), in key order;
  // empty when the source has none. Query and the CDC apply keep the latest row per key.
  std::vector<std::string> key_fields;

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
// zeros, decimals and exponents become numbers (as NumberFromText reads them); everything else
// stays a string (dates and timestamps are recognised later, from any string). An empty cell is
// null.
Value ValueFromText(std::string_view text);

// A number literal (-?digits[.digits][e±digits], as JSON writes numbers) read without losing a
// digit: an integer within int64 is kInt; a longer integer of at most 38 digits is a decimal
// (38, 0); a decimal or exponent number is kDouble when the double reads back as the same number,
// else an exact decimal (38, its scale) when 38 digits hold it; a number no type holds exactly
// stays its text (kString). nullopt when `literal` is not a number. `parsed`: the literal as the
// caller already parsed it to a double (simdjson), to save parsing it again.
std::optional<Value> NumberFromText(std::string_view literal,
                                    std::optional<double> parsed = std::nullopt);

// ----- typed reading (docs/schema.md, "Typed reading") -------------------------------------
// A source that knows the namespace its records go to may decode them straight into columns
// (ColumnRows) instead of one Value per record, for every record that fits the namespace's fields
// as they are; any other record it hands over as a Value, for the shaper to decide.

// A scalar as the source's syntax gives it, before a field gives it a type: a JSON null, true or
// false, number or string, or a CSV cell as ValueFromText reads it. `text` points into the
// source's buffer.
struct ScalarToken {
  enum class Kind : uint8_t {
    kNull,
    kBool,
    kInt,     // within int64
    kDouble,  // a number a double holds exactly, as NumberFromText reads it
    kString,
    kOther,   // a number only a decimal (or text) holds
  };
  Kind kind = Kind::kNull;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string_view text;

  // A CSV cell: what ValueFromText makes of it, without copying a string.
  static ScalarToken OfText(std::string_view text);
  // A JSON number literal as NumberFromText reads it; nullopt when `literal` is not one by JSON's
  // grammar (the DOM parser would refuse the record).
  static std::optional<ScalarToken> OfJsonNumber(std::string_view literal);
  static ScalarToken OfString(std::string_view text) { return {Kind::kString, false, 0, 0, text}; }
  static ScalarToken OfBool(bool value) { return {Kind::kBool, value, 0, 0, {}}; }
  static ScalarToken Null() { return {}; }
};

// Appends `token` to `column` (of `type`, a scalar type) when the shaper would place its value in
// a field of that type unchanged or by the same lossless conversion Shaper::Absorb makes (a date
// string into a date column, an integer into a double one): true. False, appending nothing, when
// the shaper would have to decide more (a sibling column, an int → long promotion).
bool AppendScalarToken(Column& column, const LogicalType& type, const ScalarToken& token);

// One namespace's fields as records name them, for a source decoding records into columns: every
// top-level field (struct fields nested the same way) with the key records give it and its type.
// Built by Shaper::TypedLayout from a sealed schema, immutable, shared across threads.
class RecordLayout {
 public:
  struct Slot {
    std::string key;  // the name records give the field (NamespaceSchema::source_names)
    LogicalType type;
    bool is_required = false;  // a configured primary key field: no row goes without a value
    // No '"' or '\\' in `key`: a JSON reader may match it against a key's raw bytes.
    bool is_plain_key = false;
    std::vector<Slot> children;  // a struct's fields
  };

  RecordLayout(std::string namespace_name, int32_t schema_id, std::vector<Slot> fields);
  const std::string& namespace_name() const { return namespace_name_; }
  int32_t schema_id() const { return schema_id_; }
  const std::vector<Slot>& fields() const { return fields_; }
  // The position among `slots` of the one records name `key`, trying `guess` first (records
  // usually name fields in the same order); SIZE_MAX when there is none.
  static size_t Find(const std::vector<Slot>& slots, std::string_view key, size_t guess);

 private:
  std::string namespace_name_;
  int32_t schema_id_;
  std::vector<Slot> fields_;
};

// Where a record came from, for deadletters: `source` is a file path (or the source's name), `line`
// the 1-based line where the record starts (0 when the format has no lines), `row` the 1-based
// record number within the source.
struct RecordOrigin {
  std::string source;
  uint64_t line = 0;
  uint64_t row = 0;
};

// ----- deadletters (docs/formats/deadletters.md) ----------------------------------------------

// The reserved namespace of deadletter slices in the WAL and of the table <pipeline>.deadletters;
// no data namespace may take this name (the name rules rename one so named `deadletters_data`).
inline constexpr std::string_view kDeadlettersNamespace = "deadletters";

// Why a record became a deadletter: a fixed vocabulary, stored by name in the failure_code column.
// Append new codes at the end; a name, once written, never changes meaning.
enum class FailureCode : uint8_t {
  kUnclassified,           // a site that names no code
  kInvalidJson,            // a JSON line, array or element that does not parse
  kInvalidCsv,             // a CSV record that cannot be split (an unterminated quote)
  kCsvFieldCount,          // a CSV row with more or fewer fields than the header
  kInvalidUtf8,            // text that is not UTF-8
  kRecordTooLarge,         // a record over the 16 MiB record limit
  kNotAnObject,            // a record that is a list or a single value
  kDuplicateField,         // one field twice in one object
  kNestingTooDeep,         // nested deeper than 64 levels
  kMixedList,              // a list mixing objects, lists and single values
  kMissingNamespaceField,  // transform.namespace_fields names a field the record lacks
  kMissingKey,             // a primary-key field missing or null
  kTypeConflict,           // a value that cannot take its column's type (a primary key's)
  kUnreadableFile,         // a whole file that is empty, binary or not in its format
  kUnconvertibleRow,       // a typed row (Parquet) that has no record form
};
std::string_view FailureCodeName(FailureCode code);  // "invalid_json", ...

// A deadletter keeps at most this much of the raw record (cut at a UTF-8 character boundary).
inline constexpr size_t kDeadletterRecordMaxBytes = 1 << 20;

struct Deadletter {
  RecordOrigin origin;
  std::string reason;
  std::string payload;  // the raw record (or its JSON form), at most kDeadletterRecordMaxBytes
  FailureCode failure_code = FailureCode::kUnclassified;
  bool is_payload_truncated = false;  // the record was longer than `payload`
  // The namespace the record was headed for; empty when it is not known (it is decided by a
  // transform.namespace_fields value the record did not yield).
  std::string namespace_name;
  std::optional<uint64_t> byte_offset;        // of the record's first byte, where the source knows it
  std::optional<int64_t> event_unix_micros;   // the event's own time, where the source gives one
};
// `text` with every byte that starts no valid UTF-8 sequence replaced by U+FFFD (RFC 3629: no
// overlong forms or surrogates): DuckDB, Parquet and Iceberg strings must be UTF-8, and names taken
// from files (CSV headers, Parquet columns) and deadletter records often are not.
std::string ValidUtf8(std::string_view text);

// A deadletter keeping `raw_record` as its payload, cut to kDeadletterRecordMaxBytes.
Deadletter MakeDeadletter(RecordOrigin origin, FailureCode code, std::string reason,
                          std::string_view raw_record);
std::string DescribeDeadletter(const Deadletter& deadletter);  // "file.json:12 (row 11): reason"
// Stable across re-reads of the same record: 32 hex digits of SHA-256 over its source, row and
// line (docs/formats/deadletters.md).
std::string DeadletterId(const Deadletter& deadletter);

// The fixed schema of deadletter rows: field ids never change; a column added later takes the next
// id and the next schema id.
const NamespaceSchema& DeadletterSchema();

// Deadletters as rows of the deadletters namespace, built column by column for one WAL commit.
class DeadletterRows {
 public:
  DeadletterRows();
  // Appends one row per deadletter, all processed at `processed_unix_micros`.
  void Append(const std::vector<Deadletter>& deadletters, int64_t processed_unix_micros);
  int64_t rows() const { return batch_.num_rows; }
  // The rows so far as one Batch of DeadletterSchema(); starts again empty.
  Batch Take();

 private:
  Batch batch_;
};

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
  // The source's key of that namespace (NamespaceSchema::key_fields); null when it has none.
  const std::vector<std::string>* key_fields = nullptr;
  // False when the format cannot repeat a key within one object (CSV headers are made unique, typed
  // sources build their objects): the duplicate-key check is skipped.
  bool keys_may_repeat = true;
  // True when every record is an object of unique names holding single values or lists of single
  // values of one kind (CSV rows, database rows): nothing in it can break a typing rule, so the
  // per-record check is skipped.
  bool records_are_flat = false;
  // The declared types are the source's own column types (a database table's), binding for the
  // namespace: Shaper::ApplyDeclaredTypes widens a column by an Iceberg promotion and stops the
  // pass on any other change, rather than sending the column's values to a sibling. The message
  // names `source_object` ("PostgreSQL table public.orders") and says `on_type_change` (what to do).
  bool declared_types_are_binding = false;
  std::string source_object;
  std::string on_type_change;
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
  // `change` (CDC sources) rides with the row into its batch's CDC sidecar.
  std::optional<Deadletter> Absorb(Value record, const RecordOrigin& origin,
                                   const RecordContext& context, RowChange* change = nullptr);

  // Absorbs rows a source decoded into typed columns (ColumnRows), `origin` naming their
  // partition. When the namespace has a field for every column already, of a type that holds the
  // column's, the columns are appended as they are — no row is taken apart. Otherwise (a new
  // namespace or column, values headed for a sibling, a key missing, namespace_fields routing)
  // each row is absorbed as the record ColumnRows::RowAt gives, exactly as Absorb would. Returns
  // the rows that could not be typed.
  std::vector<Deadletter> AbsorbColumns(ColumnRows rows, RecordOrigin origin,
                                        const RecordContext& context);

  // For a context with binding declared types (RecordContext::declared_types_are_binding), before
  // its records are absorbed: each declared type the namespace's column does not have already is
  // held as it is when narrower (int in a long column), widens the column when Iceberg promotes it
  // and the column keeps its layout (int → long, float → double, decimal(p, s) → decimal(p2, s)),
  // and is otherwise
  // Conflict naming the source object, the column and both types — a column's values never
  // move to a sibling because its source changed type. OK for other contexts and for namespaces
  // not seen yet.
  Status ApplyDeclaredTypes(const RecordContext& context);

  // Ends a unit of work (a discover run, a batch about to be committed): fields seen only as null
  // are created as strings, every changed namespace gets the next schema id and a history entry,
  // and fields created so far can no longer change type except by Iceberg promotions.
  std::vector<NamespaceChange> Seal();

  // The rows absorbed since the last call, as one Batch per namespace conformed to the current
  // schema (call Seal() first so the schema ids are final).
  // With keep_origins, `origins` (when given) receives each batch's row origins, in parallel.
  std::vector<Batch> TakeBatches(std::vector<std::vector<RecordOrigin>>* origins = nullptr);

  // The layout records of `context` may be decoded into (RecordLayout), when every such record
  // goes to one namespace the shaper already holds fields for and the shaper takes such records'
  // columns as they are; null otherwise (transform.namespace_fields, flatten_events, discover).
  // Call it after Seal(): it describes the sealed schema.
  std::shared_ptr<const RecordLayout> TypedLayout(const RecordContext& context) const;

  // The namespace every record in `context` goes to, when no transform.namespace_fields value
  // decides it (empty otherwise): where a record that could not be read was headed.
  std::string NamespaceOf(const RecordContext& context) const;

  const PipelineSchema& schema() const { return schema_; }
  uint64_t records_absorbed() const { return records_absorbed_; }

 private:
  struct NamespaceState;
  NamespaceState& StateFor(const std::string& namespace_name);
  // The namespace state `rows` append to column by column, each column's field in `targets`
  // (SIZE_MAX: a column of no values); null when they must be absorbed row by row.
  NamespaceState* ColumnTargets(const ColumnRows& rows, const RecordContext& context,
                                std::vector<size_t>* targets);
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
