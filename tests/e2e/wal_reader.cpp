#include "e2e/wal_reader.hpp"

#include <gtest/gtest.h>

#include "store/store.hpp"
#include "wal/wal.hpp"

namespace skippr::testing {

WalRows ReadWalRows(const std::string& state_dir,
                    const std::function<void(const std::string&, const Value&)>& visit) {
  WalRows result;
  auto store = store::Store::Open(store::StoreOptions{state_dir + "/store"});
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return result;
  auto read = (*store)->BeginRead();
  EXPECT_TRUE(read.ok());
  auto segments = wal::LiveSegments(*read);
  EXPECT_TRUE(segments.ok()) << segments.status().message();
  if (!segments.ok()) return result;
  for (const wal::SegmentEntry& entry : *segments) {
    auto reader = wal::OpenSegment(state_dir + "/wal", entry);
    EXPECT_TRUE(reader.ok()) << reader.status().message();
    if (!reader.ok()) continue;
    ++result.segments;
    for (const wal::SliceInfo& slice : reader->slices()) {
      auto batch = reader->ReadSlice(slice.ordinal);
      EXPECT_TRUE(batch.ok()) << batch.status().message();
      if (!batch.ok()) continue;
      for (int64_t row = 0; row < batch->num_rows; ++row) visit(batch->namespace_name, batch->RowAt(row));
      result.rows += batch->num_rows;
    }
  }
  return result;
}

}  // namespace skippr::testing
