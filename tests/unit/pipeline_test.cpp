// pipeline/: how sync decides when to commit.
#include <gtest/gtest.h>

#include <cstdlib>

#include "pipeline/pipeline.hpp"

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

}  // namespace
}  // namespace skippr::pipeline
