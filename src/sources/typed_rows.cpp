#include "sources/typed_rows.hpp"

#include <cstdint>
#include <cstring>

#include "core/check.hpp"

namespace skippr::sources::internal {

namespace {

using simdjson::ondemand::json_type;
using ScalarToken = schema::ScalarToken;

bool IsJsonSpace(char byte) { return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r'; }

// raw_json_token() may end with the whitespace that follows the number.
std::string_view TrimTrailingSpace(std::string_view token) {
  while (!token.empty() && IsJsonSpace(token.back())) token.remove_suffix(1);
  return token;
}

bool IsNested(const LogicalType& type) { return type.is_nested(); }

std::unique_ptr<simdjson::ondemand::parser> MakeParser() {
  auto parser = std::make_unique<simdjson::ondemand::parser>();
#ifdef SIMDJSON_THREADS_ENABLED
  // A document stream would parse its next batch on a thread of its own; a run is one batch.
  parser->threaded = false;
#endif
  return parser;
}

template <typename Word>
Word LoadWord(const char* bytes) {
  Word word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

// The longest key compared inline: within SIMDJSON_PADDING, so reading this many bytes from
// anywhere in a document stays inside its buffer.
constexpr size_t kInlineKeyBytes = 16;
static_assert(kInlineKeyBytes < simdjson::SIMDJSON_PADDING);

// Whether the `size` (at most kInlineKeyBytes) bytes at `a` and `b` are the same: two
// overlapping word loads, where memcmp is a call.
bool SameShortBytes(const char* a, const char* b, size_t size) {
  SKIPPR_DCHECK(size <= kInlineKeyBytes);
  if (size >= 8) {
    return LoadWord<uint64_t>(a) == LoadWord<uint64_t>(b) &&
           LoadWord<uint64_t>(a + size - 8) == LoadWord<uint64_t>(b + size - 8);
  }
  if (size >= 4) {
    return LoadWord<uint32_t>(a) == LoadWord<uint32_t>(b) &&
           LoadWord<uint32_t>(a + size - 4) == LoadWord<uint32_t>(b + size - 4);
  }
  for (size_t i = 0; i < size; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// raw_json_string::unsafe_is_equal (`key` holds no quote or backslash: a plain key), with the
// short keys most records have compared inline rather than by a memcmp call per field.
bool KeyEquals(simdjson::ondemand::raw_json_string raw_key, std::string_view key) {
  if (key.size() > kInlineKeyBytes) return raw_key.unsafe_is_equal(key);
  const char* raw = raw_key.raw();
  return SameShortBytes(raw, key.data(), key.size()) && raw[key.size()] == '"';
}

const char* SkipJsonSpace(const char* begin, const char* end) {
  while (begin < end && IsJsonSpace(*begin)) ++begin;
  return begin;
}

}  // namespace

// A run of JSON lines and where its parse has reached. It must not move: the iterator points into
// the stream.
struct TypedRows::JsonLinesRun {
  std::string_view lines;
  simdjson::ondemand::document_stream documents;
  simdjson::ondemand::document_stream::iterator next;  // the next line's document
};

TypedRows::TypedRows(std::shared_ptr<const schema::RecordLayout> layout)
    : layout_(std::move(layout)), parser_(MakeParser()) {
  for (const Slot& slot : layout_->fields()) slots_.push_back(&slot);
  Reset(nullptr);
}

TypedRows::TypedRows(std::shared_ptr<const schema::RecordLayout> layout,
                     std::vector<const Slot*> slots)
    : layout_(std::move(layout)),
      slots_(std::move(slots)),
      parser_(MakeParser()) {
  Reset(nullptr);
}

TypedRows::TypedRows(TypedRows&&) noexcept = default;
TypedRows& TypedRows::operator=(TypedRows&&) noexcept = default;
TypedRows::~TypedRows() = default;

std::optional<TypedRows> TypedRows::ForHeader(std::shared_ptr<const schema::RecordLayout> layout,
                                              const std::vector<std::string>& header) {
  const std::vector<Slot>& fields = layout->fields();
  std::vector<const Slot*> slots;
  for (size_t i = 0; i < header.size(); ++i) {
    const size_t index = schema::RecordLayout::Find(fields, header[i], i);
    if (index == SIZE_MAX) return std::nullopt;
    slots.push_back(&fields[index]);
  }
  for (const Slot& field : fields) {
    if (field.is_required && std::find(slots.begin(), slots.end(), &field) == slots.end()) {
      return std::nullopt;
    }
  }
  return TypedRows(std::move(layout), std::move(slots));
}

bool TypedRows::AppendJson(std::string_view padded_text, uint64_t line) {
  EndJsonLines();
  simdjson::ondemand::document document;
  simdjson::ondemand::object object;
  bool fits = !parser_
                   ->iterate(padded_text.data(), padded_text.size(),
                             padded_text.size() + simdjson::SIMDJSON_PADDING)
                   .get(document) &&
              !document.get_object().get(object) &&
              AppendObject(object, layout_->fields(), rows_.columns);
  // Nothing may follow the object: the DOM parser refuses such a line.
  fits = fits && document.current_location().error() == simdjson::OUT_OF_BOUNDS;
  return EndRow(fits, line);
}

void TypedRows::StartJsonLines(std::string_view padded_lines) {
  SKIPPR_CHECK(padded_lines.size() <= kMaxJsonLinesRunBytes);
  json_lines_.reset();
  if (padded_lines.empty()) return;
  SKIPPR_DCHECK(padded_lines.data()[padded_lines.size()] == '\n');
  auto run = std::make_unique<JsonLinesRun>();
  run->lines = padded_lines;
  // One batch of the stream holds the whole run (it is never cut between batches), and every run
  // asks for the same capacity, so the parser keeps its buffers from run to run.
  if (parser_->iterate_many(padded_lines.data(), padded_lines.size(), kMaxJsonLinesRunBytes)
          .get(run->documents)) {
    return;
  }
  run->next = run->documents.begin();
  if (run->next != run->documents.end()) json_lines_ = std::move(run);
}

void TypedRows::EndJsonLines() { json_lines_.reset(); }

bool TypedRows::AppendJsonLine(std::string_view text, uint64_t line) {
  SKIPPR_CHECK(json_lines_ != nullptr);
  JsonLinesRun& run = *json_lines_;
  SKIPPR_DCHECK(text.data() >= run.lines.data() &&
                text.data() + text.size() <= run.lines.data() + run.lines.size());
  if (!AppendRunDocument(run, text)) {
    // Never step past a document read in part: the stream would walk off its structure.
    EndJsonLines();
    return EndRow(false, line);
  }
  ++run.next;
  if (!(run.next != run.documents.end())) EndJsonLines();
  return EndRow(true, line);
}

// Whether the run's next document is `text` alone, as an object that fits (appended, then).
bool TypedRows::AppendRunDocument(JsonLinesRun& run, std::string_view text) {
  simdjson::ondemand::document_reference document;
  simdjson::ondemand::object object;
  if ((*run.next).get(document)) return false;  // the run's stage 1 failed: bad UTF-8, ...
  const char* text_end = text.data() + text.size();
  if (run.lines.data() + run.next.current_index() != SkipJsonSpace(text.data(), text_end)) {
    return false;  // not where this line's value starts: the line holds no document of its own
  }
  if (document.get_object().get(object) || !AppendObject(object, layout_->fields(), rows_.columns)) {
    return false;
  }
  // The object ended on this line and nothing else is on it: the next document starts on a later
  // line, with only line ends and blanks between this line's end and it. Past the run's last
  // document the stream cannot tell (it leaves an unfinished document at the end unparsed, which
  // may be on this line): that line is left to AppendJson.
  const char* next_document = nullptr;
  if (document.current_location().get(next_document)) return false;
  return next_document >= text_end && SkipJsonSpace(text_end, next_document) == next_document;
}

bool TypedRows::AppendCells(const std::vector<std::string_view>& cells, uint64_t line) {
  SKIPPR_DCHECK(cells.size() == slots_.size());
  bool fits = true;
  for (size_t i = 0; i < cells.size() && fits; ++i) {
    const ScalarToken token = ScalarToken::OfText(cells[i]);
    const Slot& slot = *slots_[i];
    fits = !(token.kind == ScalarToken::Kind::kNull && slot.is_required) && !IsNested(slot.type) &&
           schema::AppendScalarToken(rows_.columns[i], slot.type, token);
  }
  return EndRow(fits, line);
}

bool TypedRows::AppendObject(simdjson::ondemand::object& object, const std::vector<Slot>& slots,
                             std::vector<Column>& columns) {
  size_t position = 0;
  for (auto member : object) {
    simdjson::ondemand::field field;
    if (std::move(member).get(field)) return false;
    // Records mostly name fields in the layout's order, without escapes: the raw bytes decide.
    size_t index = position;
    if (index >= slots.size() || !slots[index].is_plain_key ||
        !KeyEquals(field.key(), slots[index].key)) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return false;
      index = schema::RecordLayout::Find(slots, key, position);
    }
    ++position;
    // A key the layout lacks is a new field; one seen twice a duplicate (a deadletter).
    if (index == SIZE_MAX || columns[index].length > row_) return false;
    simdjson::ondemand::value value = field.value();
    if (!AppendValue(value, slots[index], columns[index])) return false;
  }
  return CloseRow(slots, columns);
}

// Each case appends from a token of its own, built in place: the value iterator and the token are
// passed by reference, not copied through the stack on every value.
bool TypedRows::AppendValue(simdjson::ondemand::value& value, const Slot& slot, Column& column) {
  json_type type;
  if (value.type().get(type)) return false;
  if (type == json_type::object) {
    simdjson::ondemand::object object;
    if (slot.type.id() != TypeId::kStruct || value.get_object().get(object) ||
        !AppendObject(object, slot.children, column.children)) {
      return false;
    }
    column.AppendStructRow();
    return true;
  }
  if (type == json_type::null) {
    bool is_null = false;
    if (value.is_null().get(is_null) || !is_null || slot.is_required) return false;
    column.AppendNull();
    return true;
  }
  // Lists take the Value path; a scalar never fits a nested field.
  if (type == json_type::array || IsNested(slot.type)) return false;
  switch (type) {
    case json_type::string: {
      std::string_view text;
      return !value.get_string().get(text) &&
             schema::AppendScalarToken(column, slot.type, ScalarToken::OfString(text));
    }
    case json_type::number: {
      const std::optional<ScalarToken> number =
          ScalarToken::OfJsonNumber(TrimTrailingSpace(value.raw_json_token()));
      return number && schema::AppendScalarToken(column, slot.type, *number);
    }
    case json_type::boolean: {
      bool boolean = false;
      return !value.get_bool().get(boolean) &&
             schema::AppendScalarToken(column, slot.type, ScalarToken::OfBool(boolean));
    }
    default:
      return false;
  }
}

bool TypedRows::CloseRow(const std::vector<Slot>& slots, std::vector<Column>& columns) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].length > row_) continue;
    if (slots[i].is_required) return false;
    columns[i].AppendNull();
  }
  return true;
}

bool TypedRows::EndRow(bool fits, uint64_t line) {
  if (!fits) {
    for (Column& column : rows_.columns) column.TruncateTo(row_);
    return false;
  }
  for ([[maybe_unused]] const Column& column : rows_.columns) {
    SKIPPR_DCHECK(column.length == row_ + 1);
  }
  rows_.lines.push_back(line);
  rows_.num_rows = ++row_;
  return true;
}

void TypedRows::EndRows(int64_t count) {
  for ([[maybe_unused]] const Column& column : rows_.columns) {
    SKIPPR_DCHECK(column.length == row_ + count);
  }
  rows_.lines.resize(rows_.lines.size() + static_cast<size_t>(count), 0);
  row_ += count;
  rows_.num_rows = row_;
}

ColumnRows TypedRows::Take(uint64_t first_row) {
  ColumnRows taken = std::move(rows_);
  taken.first_row = first_row;
  Reset(&taken);
  return taken;
}

namespace {
// Room for a quarter more than `previous` held, so that a batch's columns (about as large as the
// last one) grow without copying.
template <typename Buffer>
void ReserveMoreThan(Buffer& buffer, size_t previous_size) {
  buffer.reserve(previous_size + previous_size / 4);
}

void ReserveLike(Column& column, const Column& previous) {
  ReserveMoreThan(column.validity, previous.validity.size());
  ReserveMoreThan(column.fixed, previous.fixed.size());
  ReserveMoreThan(column.offsets, previous.offsets.size());
  ReserveMoreThan(column.bytes, previous.bytes.size());
  for (size_t i = 0; i < column.children.size() && i < previous.children.size(); ++i) {
    ReserveLike(column.children[i], previous.children[i]);
  }
}
}  // namespace

void TypedRows::Reset(const ColumnRows* previous) {
  rows_ = ColumnRows();
  row_ = 0;
  for (const Slot* slot : slots_) {
    rows_.names.push_back(slot->key);
    rows_.columns.emplace_back(slot->type);
  }
  if (previous == nullptr) return;
  for (size_t i = 0; i < rows_.columns.size(); ++i) {
    ReserveLike(rows_.columns[i], previous->columns[i]);
  }
  ReserveMoreThan(rows_.lines, previous->lines.size());
}

}  // namespace skippr::sources::internal
