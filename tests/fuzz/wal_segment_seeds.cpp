// Writes the wal_segment fuzz target's seeds: real segments from EncodeSegment, over batches the
// shaper builds from records of every kind (nested structs and lists, decimals, binary, dates,
// timestamps, nulls) and one CDC batch. Run by hand when the segment format changes, after keeping
// the old version's files as <name>_v<version>.seg (segment_test decodes them against the new):
//   build/tests/fuzz/wal_segment_seeds tests/fuzz/wal_segment/seeds
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "schema/schema.hpp"
#include "wal/segment.hpp"

namespace skippr::fuzz {
namespace {

Value Obj(ValueObject fields) { return Value::Object(std::move(fields)); }

Value RichRecord(int row) {
  const auto maybe = [&](Value value) { return row % 3 == 2 ? Value::Null() : std::move(value); };
  ValueList stops;
  for (int s = 0; s < row % 3; ++s) {
    stops.push_back(Obj({{"seq", Value::Int(row * 10 + s)}, {"note", Value::String("n")}}));
  }
  return Obj({
      {"flag", maybe(Value::Bool(row % 2 == 0))},
      {"id", Value::Int(row - 2)},
      {"ratio", maybe(Value::Double(row / 8.0))},
      {"price", maybe(Value::Decimal(12345 + row, 10, 2))},
      {"day", maybe(Value::Date(19000 + row))},
      {"at", maybe(Value::Timestamp(1'704'067'200'000'000 + row))},
      {"at_utc", maybe(Value::TimestampTz(1'704'067'200'000'000 - row))},
      {"name", maybe(Value::String(std::string(row % 4, 'a') + "\xc3\xa9"))},
      {"blob", maybe(Value::Binary(std::string("\0\x01\xff", 3)))},
      {"station", Obj({{"id", maybe(Value::Int(100 + row))}, {"label", Value::String("s")}})},
      {"stops", Value::List(std::move(stops))},
      {"scores", maybe(Value::List({Value::Double(1.5), Value::Null()}))},
  });
}

std::vector<Batch> Shape(const std::vector<std::pair<std::string, std::vector<Value>>>& records) {
  schema::Shaper shaper({}, {.default_namespace = "rides",
                             .namespace_fields = {"kind"},
                             .build_columns = true});
  for (const auto& [ns, values] : records) {
    for (const Value& value : values) {
      ValueObject object = value.as_object();
      object.emplace_back("kind", Value::String(ns));
      shaper.Absorb(Value::Object(std::move(object)), {"seed", 1, 1}, {});
    }
  }
  shaper.Seal();
  return shaper.TakeBatches();
}

Batch CdcBatch() {
  std::vector<Batch> batches =
      Shape({{"orders", {Obj({{"order_id", Value::Int(1)}, {"status", Value::String("paid")}}),
                         Obj({{"order_id", Value::Int(2)}, {"status", Value::Null()}})}}});
  Batch batch = std::move(batches.at(0));
  batch.cdc = CdcSidecar{{Mutation::kInsert, Mutation::kDelete},
                         {"lsn/1", "lsn/2"},
                         {std::string("\0\x01", 2), std::string("\0\x02", 2)},
                         {"order:1", ""}};
  return batch;
}

void Write(const std::string& directory, const std::string& name, const std::vector<Batch>& batches) {
  wal::SegmentHeader header{.instance_id = "0123456789abcdef0123456789abcdef",
                            .pipeline = "rides",
                            .segment_id = 7,
                            .sequence = 3,
                            .created_unix_micros = 1'704'067'200'000'000,
                            .source_positions = R"({"a.jsonl":{"byte_offset":12}})"};
  const wal::SegmentBytes bytes = wal::EncodeSegment(header, batches);
  std::ofstream(directory + "/" + name, std::ios::binary).write(bytes.data(), bytes.size());
  std::printf("%s: %zu bytes, %zu slices\n", name.c_str(), bytes.size(), batches.size());
}

}  // namespace
}  // namespace skippr::fuzz

int main(int argc, char** argv) {
  using namespace skippr;
  using namespace skippr::fuzz;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <seeds directory>\n", argv[0]);
    return 2;
  }
  const std::string directory = argv[1];
  Write(directory, "empty.seg", {});
  Write(directory, "one_slice.seg",
        Shape({{"users", {Obj({{"id", Value::Int(1)}, {"email", Value::String("a@b")}})}}}));
  std::vector<Value> rich;
  for (int row = 0; row < 5; ++row) rich.push_back(RichRecord(row));
  Write(directory, "all_kinds.seg", Shape({{"rides", rich}}));
  Write(directory, "two_namespaces.seg",
        Shape({{"a", {Obj({{"x", Value::Int(1)}})}}, {"b", {Obj({{"y", Value::String("z")}})}}}));
  Write(directory, "cdc.seg", {CdcBatch()});
  return 0;
}
