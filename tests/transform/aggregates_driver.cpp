// The crash driver of aggregates_test: opens a pipeline's store and WAL directory and runs the
// transform.aggregates processor over everything committed, so the test can SIGKILL it (at random
// moments, or at a SKIPPR_CRASH_POINT) and run it again.
//   aggregates_driver <dir> <full|reduced> <rows per transaction>
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "transform/aggregate_stream.hpp"
#include "transform/transform.hpp"

int main(int argc, char** argv) {
  using namespace skippr;
  if (argc != 4) {
    fmt::print(stderr, "usage: aggregates_driver <dir> <full|reduced> <rows per transaction>\n");
    return 2;
  }
  const std::string dir = argv[1];
  config::AggregateConfig aggregate = testing::OrdersAggregate();
  if (std::string(argv[2]) == "reduced") aggregate.measures.erase(aggregate.measures.begin() + 1);
  Result<std::unique_ptr<store::Store>> store = store::Store::Open({dir + "/store"});
  if (!store.ok()) {
    fmt::print(stderr, "{}\n", store.status().message());
    return 1;
  }
  transform::ProcessorOptions options;
  options.rows_per_transaction = std::atoll(argv[3]);
  Result<std::unique_ptr<transform::AggregateProcessor>> processor =
      transform::AggregateProcessor::Open(**store, dir + "/wal", {aggregate}, options);
  if (!processor.ok()) {
    fmt::print(stderr, "{}\n", processor.status().message());
    return 1;
  }
  Result<int64_t> applied = (*processor)->ProcessCommitted();
  if (!applied.ok()) {
    fmt::print(stderr, "{}\n", applied.status().message());
    return 1;
  }
  fmt::print("{}\n", *applied);
  return 0;
}
