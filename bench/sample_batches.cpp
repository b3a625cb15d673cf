#include "sample_batches.hpp"

#include <fmt/format.h>

#include <memory>
#include <optional>

#include "bench_common.hpp"
#include "config/config.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"

namespace skippr::bench {

// One Sample-source batch shaped as sync shapes it (all rides of one namespace).
std::vector<Batch> MakeSampleBatches(uint64_t rows) {
  config::ConnectorConfig connector;
  connector.kind = "Sample";
  connector.settings["rows"] = static_cast<int64_t>(rows);
  connector.settings["seed"] = int64_t{42};
  Result<std::unique_ptr<sources::Source>> source = sources::MakeSource(connector);
  if (!source.ok()) Fail(fmt::format("Sample source: {}", source.status().message()));
  if (Status opened = (*source)->Open({}, sources::ReadOptions{}); !opened.ok()) {
    Fail(fmt::format("Sample source open: {}", opened.message()));
  }
  Result<std::optional<sources::SourceBatch>> batch = (*source)->Next();
  if (!batch.ok() || !*batch) Fail("the Sample source gave no batch");
  schema::ShaperOptions options{.default_namespace = "bench", .build_columns = true};
  schema::Shaper shaper({}, options);
  for (sources::SourceRecord& record : (*batch)->records) {
    if (shaper.Absorb(std::move(record.value), (*batch)->OriginOf(record), (*batch)->context)) {
      Fail("a sample record became a deadletter");
    }
  }
  shaper.Seal();
  std::vector<Batch> batches = shaper.TakeBatches();
  if (batches.size() != 1 || batches[0].num_rows != static_cast<int64_t>(rows)) {
    Fail("the Sample batch is not one namespace of the rows asked for");
  }
  return batches;
}

}  // namespace skippr::bench
