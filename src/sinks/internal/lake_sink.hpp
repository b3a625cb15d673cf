// Internal to sinks/: SkipprLake, and Duckdb's warehouse form (reference §10.7: the same Iceberg
// layout, which DuckDB's iceberg_scan reads through version-hint.text), behind the Sink interface.
#pragma once

#include <memory>
#include <string>

#include "lake/lake.hpp"
#include "sinks/sinks.hpp"

namespace skippr::sinks::internal {

class LakeSink final : public Sink {
 public:
  static Capabilities KindCapabilities();
  static Result<std::unique_ptr<Sink>> Open(const SinkContext& context,
                                            const config::ConnectorConfig& entry,
                                            const std::string& setting);
  // doctor: for a warehouse on S3, the bucket listed and written, the DynamoDB catalog table found
  // (or what its creation at the first landing needs).
  static std::vector<SinkCheck> Check(const config::ConnectorConfig& entry,
                                      const std::string& setting);
  static Result<query::LandedRows> ReadLanded(const SinkContext& context,
                                              const config::ConnectorConfig& entry,
                                              const std::string& namespace_name,
                                              const CommitId& commit);

  const Capabilities& capabilities() const override { return capabilities_; }
  Result<LandingOutcome> Land(const Landing& landing,
                              const schema::NamespaceSchema& namespace_schema,
                              const std::vector<std::shared_ptr<const Batch>>& batches) override;
  Result<bool> IsLanded(const std::string& namespace_name, const std::string& landing_id) override;
  Result<int64_t> WriteStream(const schema::NamespaceSchema& namespace_schema,
                              StreamedBatches next) override;
  Result<LandingOutcome> LandStreamed(const Landing& landing,
                                      const schema::NamespaceSchema& namespace_schema,
                                      int64_t rows) override;
  Result<MaintenanceOutcome> Maintain(const schema::NamespaceSchema& namespace_schema,
                                      const LandingPolicy& policy) override;

 private:
  explicit LakeSink(std::unique_ptr<lake::LakeWriter> writer);

  const Capabilities capabilities_;
  std::unique_ptr<lake::LakeWriter> writer_;
};

}  // namespace skippr::sinks::internal
