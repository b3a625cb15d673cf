// pipeline/: how sync decides when to commit, and what a keyed CDC landing leaves out.
#include <gtest/gtest.h>

#include <cstdlib>

#include "pipeline/landing.hpp"
#include "pipeline/pipeline.hpp"
#include "support/temp_dir.hpp"

namespace skippr::pipeline {
namespace {

class BufferThresholdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"BUFFER_THRESHOLD_BYTES", "BUFFER_THRESHOLD_SECONDS", "WAL_BYTES_PER_FILE",
                             "WAL_MAX_DELAY_SECONDS"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { SetUp(); }
  config::PipelineConfig pipeline_;
};

TEST_F(BufferThresholdsTest, Defaults) {
  const BufferThresholds thresholds = ResolveBufferThresholds(pipeline_);
  EXPECT_EQ(thresholds.bytes, 10u << 20);
  EXPECT_EQ(thresholds.seconds, 60);
}

TEST_F(BufferThresholdsTest, PipelineSettingsWinOverTheEnvironment) {
  setenv("BUFFER_THRESHOLD_BYTES", "8000000", 1);
  setenv("BUFFER_THRESHOLD_SECONDS", "5", 1);
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).bytes, 8000000u);
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).seconds, 5);
  pipeline_.buffer_threshold_bytes = 6000000;
  pipeline_.buffer_threshold_seconds = 2;
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).bytes, 6000000u);
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).seconds, 2);
}

TEST_F(BufferThresholdsTest, SegmentSizeIsClampedAndCapsTheBuffer) {
  pipeline_.buffer_threshold_bytes = int64_t{512} << 20;
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).bytes, 64u << 20);  // the clamp's top
  setenv("WAL_BYTES_PER_FILE", "1000", 1);
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).bytes, 4u << 20);  // the clamp's bottom
  setenv("WAL_BYTES_PER_FILE", "20000000", 1);
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).bytes, 20000000u);
  pipeline_.buffer_threshold_bytes = 1000000;  // a smaller buffer still commits sooner
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).bytes, 1000000u);
}

TEST_F(BufferThresholdsTest, MaxDelayCapsTheAge) {
  pipeline_.buffer_threshold_seconds = 600;
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).seconds, 60);
  setenv("WAL_MAX_DELAY_SECONDS", "30", 1);
  EXPECT_EQ(ResolveBufferThresholds(pipeline_).seconds, 30);
}


// A batch of changes to rows keyed by `id`: (id, mutation, order token) each.
std::shared_ptr<const Batch> Changes(
    const std::vector<std::tuple<int64_t, Mutation, std::string>>& changes) {
  auto batch = std::make_shared<Batch>();
  batch->namespace_name = "accounts";
  batch->fields = {Field{1, "id", LogicalType::Long(), false}};
  batch->columns.emplace_back(LogicalType::Long());
  batch->cdc.emplace();
  for (const auto& [id, mutation, token] : changes) {
    batch->columns[0].AppendInt64(id);
    batch->cdc->Append(RowChange{.mutation = mutation,
                                 .event_id = "e" + token,
                                 .order_token = token,
                                 .business_key = mutation == Mutation::kTruncate
                                                     ? std::string()
                                                     : "[" + std::to_string(id) + "]"});
  }
  batch->num_rows = static_cast<int64_t>(changes.size());
  return batch;
}

std::vector<int64_t> IdsOf(const std::vector<std::shared_ptr<const Batch>>& batches) {
  std::vector<int64_t> ids;
  for (const auto& batch : batches) {
    for (int64_t row = 0; row < batch->num_rows; ++row) {
      ids.push_back(batch->columns[0].Int64At(row));
    }
  }
  return ids;
}

// Lands `batches` as far as the store is concerned: reads the landed tokens, returns the changes
// the landing keeps, records the tokens.
std::vector<int64_t> LandTokens(store::Store& store,
                                const std::vector<std::shared_ptr<const Batch>>& batches) {
  Result<store::ReadTransaction> read = store.BeginRead();
  EXPECT_TRUE(read.ok());
  Result<internal::LandedTokens> tokens = internal::LandedTokens::Read(*read, "accounts", batches);
  EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
  const std::vector<int64_t> kept = IdsOf(tokens->NewChanges());
  Result<store::WriteTransaction> write = store.BeginWrite();
  EXPECT_TRUE(write.ok());
  EXPECT_TRUE(tokens->Record(*write).ok());
  EXPECT_TRUE(write->Commit().ok());
  return kept;
}

// A change at or before the newest one landed for its key is left out (a replay, or an older
// change a newer snapshot read already holds), a delete keeps its key's token (a tombstone), and a
// truncate covers every older change of every key.
TEST(LandedTokensTest, ChangesTheTableHoldsAlreadyAreLeftOut) {
  skippr::testing::TempDir dir;
  Result<std::unique_ptr<store::Store>> store = store::Store::Open({.directory = dir.Sub("store")});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(LandTokens(**store, {Changes({{1, Mutation::kSnapshot, "b"},
                                          {2, Mutation::kSnapshot, "b"},
                                          {5, Mutation::kInsert, "c"}})}),
            (std::vector<int64_t>{1, 2, 5}));
  EXPECT_EQ(LandTokens(**store, {Changes({{1, Mutation::kUpdate, "a"},    // older than landed
                                          {2, Mutation::kUpdate, "c"},    // newer
                                          {3, Mutation::kInsert, "a"},    // a key never landed
                                          {5, Mutation::kDelete, "d"}}),  // a tombstone at d
                                 Changes({{2, Mutation::kUpdate, "b"}})}),  // a replay
            (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(LandTokens(**store, {Changes({{5, Mutation::kInsert, "c"},    // older than the delete
                                          {0, Mutation::kTruncate, "f"},
                                          {4, Mutation::kInsert, "g"}})}),
            (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(LandTokens(**store, {Changes({{3, Mutation::kUpdate, "e"},    // before the truncate
                                          {4, Mutation::kUpdate, "g"},    // landed already
                                          {6, Mutation::kInsert, "h"}})}),
            (std::vector<int64_t>{6}));
}

}  // namespace
}  // namespace skippr::pipeline
