// Pipeline actions: the lifecycle steps that tie config, store, schema and sources together
// (discover today; sync as the WAL arrives). The CLI and the Python module both call these.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/status.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"
#include "store/store.hpp"

namespace skippr::pipeline {

// A pipeline's state on disk: <data_dir>/<pipeline>/ holds writer.lock and store/.
class PipelineState {
 public:
  // Takes the writer lease, then opens (creating) the store. A second writer gets
  // "pipeline writer lease unavailable ...".
  static Result<PipelineState> OpenForWriting(const config::PipelineConfig& pipeline);
  // Opens the store without the lease (readers never block the writer). NotFound, saying to run
  // discover or sync first, when the pipeline has no state yet.
  static Result<PipelineState> OpenForReading(const config::PipelineConfig& pipeline);

  store::Store& store() { return *store_; }
  const std::string& directory() const { return directory_; }

 private:
  std::string directory_;
  std::optional<store::WriterLease> lease_;
  std::unique_ptr<store::Store> store_;
};

// Records read per file (partition) when discover samples a source.
inline constexpr uint64_t kDiscoverSampleRecordsPerPartition = 100'000;
// Deadletters described one by one in results and logs; the rest are counted.
inline constexpr size_t kDeadlettersDescribed = 100;

struct DiscoverProgress {
  uint64_t records = 0;
  uint64_t deadletters = 0;
  uint64_t bytes = 0;
};

struct DiscoverResult {
  std::vector<schema::NamespaceChange> changes;  // namespaces discovered or evolved by this run
  schema::PipelineSchema schema;                 // the whole schema after the run
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t deadletter_count = 0;
  std::vector<schema::Deadletter> deadletters;  // the first kDeadlettersDescribed
};

// Samples the pipeline's source, infers every field (nested included), and saves the evolved
// schema in the store. Never writes to a destination; re-runnable, adding what is new.
Result<DiscoverResult> Discover(const config::Config& config, const config::PipelineConfig& pipeline,
                                const std::function<void(const DiscoverProgress&)>& on_progress);

// Replaces one namespace's top-level fields (`skipprd metadata apply`): fields keep their ids by
// name, new names get new ids, the schema id advances.
Result<schema::NamespaceSchema> ApplyNamespaceFields(const config::PipelineConfig& pipeline,
                                                     const std::string& namespace_name,
                                                     std::vector<Field> fields);

// The saved schema (empty when discover has not run).
Result<schema::PipelineSchema> ReadSchema(const config::PipelineConfig& pipeline);

}  // namespace skippr::pipeline
