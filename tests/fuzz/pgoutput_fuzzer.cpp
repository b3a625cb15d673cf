// pgoutput messages as a server (or anything in between) might send them: ParsePgOutput over any
// bytes, the stream prefix cut by SplitStreamedChange, every text value of a parsed tuple through
// the decoder of each type family, the bytes as a binary COPY value of each type read in binary,
// and the message through a spill file and back. Invariants:
//   * no input crashes, reads out of bounds or hangs; a failure is Corruption;
//   * a binary value either lands as one row of its column or gives the text for its sibling;
//   * a streamed change split and re-prefixed is the input again;
//   * a spill file returns exactly the messages written to it, aborted subtransactions left out.
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/batch.hpp"
#include "fuzz/fuzz_support.hpp"
#include "sources/postgres_replication.hpp"
#include "sources/postgres_spill.hpp"
#include "sources/postgres_types.hpp"

namespace skippr::fuzz {
namespace {

using sources::postgres::PgColumnDecoder;
using sources::postgres::PgType;
using sources::postgres::Tuple;
using sources::postgres::TupleValue;

// One decoder per type family the source maps (docs/config.md, "Types").
const std::vector<PgColumnDecoder>& Decoders() {
  static const std::vector<PgColumnDecoder> kDecoders = [] {
    std::vector<PgColumnDecoder> decoders;
    // bool, int2, int4, int8, float4, float8, numeric(12,4), numeric, text, bytea, uuid, date,
    // time, timestamp, timestamptz, interval, jsonb.
    const std::vector<std::pair<uint32_t, int32_t>> scalars = {
        {16, -1},   {21, -1},   {23, -1},   {20, -1},   {700, -1},  {701, -1},
        {1700, ((12 << 16) | 4) + 4},       {1700, -1}, {25, -1},   {17, -1},
        {2950, -1}, {1082, -1}, {1083, -1}, {1114, -1}, {1184, -1}, {1186, -1}, {3802, -1}};
    for (const auto& [oid, modifier] : scalars) {
      PgType type;
      type.oid = oid;
      type.modifier = modifier;
      decoders.emplace_back(type);
    }
    for (uint32_t element : {23u, 25u, 1700u}) {  // int[], text[], numeric[]
      PgType array;
      array.oid = 1;
      array.category = 'A';
      array.element_oid = element;
      decoders.emplace_back(array);
    }
    return decoders;
  }();
  return kDecoders;
}

void DecodeEvery(const Tuple& tuple) {
  for (const TupleValue& value : tuple) {
    if (value.kind != TupleValue::Kind::kText) continue;
    for (const PgColumnDecoder& decoder : Decoders()) (void)decoder.Decode(value.text);
  }
}

void CheckParsed(std::string_view bytes) {
  Result<sources::postgres::PgOutputMessage> message = sources::postgres::ParsePgOutput(bytes);
  if (!message.ok()) {
    CheckCodeIn(message.status(), {StatusCode::kCorruption}, "ParsePgOutput");
    return;
  }
  if (const auto* insert = std::get_if<sources::postgres::InsertMessage>(&*message)) {
    DecodeEvery(insert->new_tuple);
  } else if (const auto* update = std::get_if<sources::postgres::UpdateMessage>(&*message)) {
    DecodeEvery(update->new_tuple);
    if (update->old_tuple) DecodeEvery(*update->old_tuple);
  } else if (const auto* remove = std::get_if<sources::postgres::DeleteMessage>(&*message)) {
    DecodeEvery(remove->old_tuple);
  }
}

// The bytes as the binary send form of every type the snapshot reads in binary.
void DecodeBinary(std::string_view bytes) {
  for (const PgColumnDecoder& decoder : Decoders()) {
    if (!decoder.reads_binary()) continue;
    Column column(decoder.logical_type());
    std::string text;
    Result<bool> appended = decoder.AppendBinaryTo(bytes, column, &text);
    if (!appended.ok()) {
      CheckCodeIn(appended.status(), {StatusCode::kCorruption}, "AppendBinaryTo");
      continue;
    }
    std::string reason;
    FUZZ_CHECK(column.length == (*appended ? 1 : 0) && column.Validate(&reason),
               "a binary value appended other than one valid row");
    FUZZ_CHECK(*appended || !text.empty(), "a binary value neither appended nor given as text");
  }
  (void)sources::postgres::NumericBinaryText(bytes);
}

void FuzzPgOutput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckParsed(bytes);
  DecodeBinary(bytes);

  Result<sources::postgres::StreamedChange> change = sources::postgres::SplitStreamedChange(bytes);
  if (!change.ok()) {
    CheckCodeIn(change.status(), {StatusCode::kCorruption}, "SplitStreamedChange");
    return;
  }
  FUZZ_CHECK(change->message.size() + 4 == bytes.size(), "the split lost or gained bytes");
  FUZZ_CHECK(change->message[0] == bytes[0] && bytes.substr(5) == change->message.substr(1),
             "the split is not the input without its transaction id");
  CheckParsed(change->message);

  // Through a spill file: the change, once as an aborted subtransaction's and once as the top
  // level's, comes back once.
  static const ScratchFile scratch("unused");
  sources::postgres::SpilledTransactions spilled(scratch.directory());
  FUZZ_CHECK(spilled.Reset().ok(), "resetting the spill directory");
  FUZZ_CHECK(spilled.Start(change->xid, true).ok(), "starting a spill file");
  FUZZ_CHECK(spilled.Append(change->xid, change->xid + 1, change->message).ok(), "spilling");
  FUZZ_CHECK(spilled.Append(change->xid, change->xid, change->message).ok(), "spilling");
  FUZZ_CHECK(spilled.Abort(change->xid, change->xid + 1).ok(), "aborting a subtransaction");
  Result<std::unique_ptr<sources::postgres::SpilledTransaction>> committed =
      spilled.Commit(change->xid);
  FUZZ_CHECK(committed.ok(), committed.status().ToString());
  Result<std::optional<std::string>> first = (*committed)->Next();
  FUZZ_CHECK(first.ok() && first->has_value() && **first == change->message,
             "the spilled change does not come back as written");
  Result<std::optional<std::string>> end = (*committed)->Next();
  FUZZ_CHECK(end.ok() && !end->has_value(), "a spill file returns more than was committed");
}

}  // namespace
}  // namespace skippr::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  skippr::fuzz::FuzzPgOutput(data, size);
  return 0;
}
