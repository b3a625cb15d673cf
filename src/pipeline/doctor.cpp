// `skipprd doctor`'s checks (the CLI prints them; the Python module's Session.doctor returns
// them): the configuration and the ground it will run on — and, for a source with a server
// (Postgres), that server: reachable with its TLS settings, tables readable, what change data
// capture needs.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "aws/aws.hpp"
#include "core/disk.hpp"
#include "pipeline/pipeline.hpp"
#include "sinks/sinks.hpp"
#include "sources/sources.hpp"

namespace skippr::pipeline {

namespace {

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Writable means a file can be created in it now (or, when it does not exist yet, in the nearest
// existing ancestor, where sync will create it).
DoctorCheck CheckWritable(const std::string& data_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path probe = fs::absolute(data_dir, error);
  const bool exists = fs::is_directory(probe, error);
  while (!fs::exists(probe, error) && probe.has_parent_path() && probe != probe.parent_path()) {
    probe = probe.parent_path();
  }
  std::string probe_file = (probe / ".skipprd-doctor-XXXXXX").string();
  const int fd = mkstemp(probe_file.data());
  if (fd < 0) {
    return {false,
            fmt::format("DATA_DIR {} is not writable ({}: {})", data_dir, probe.string(),
                        std::strerror(errno)),
            fmt::format("mkdir -p {0} && chmod u+rwx {0}", ShellQuote(data_dir))};
  }
  close(fd);
  unlink(probe_file.c_str());
  return {true,
          exists ? fmt::format("DATA_DIR {} is writable", data_dir)
                 : fmt::format("DATA_DIR {} will be created (its parent is writable)", data_dir)};
}

// The disk rule of the first pipeline on `data_dir` (the defaults when none is configured).
DoctorCheck CheckDiskSpace(const std::string& data_dir, const config::PipelineConfig* pipeline) {
  Result<DiskUsage> usage = MeasureDisk(data_dir);
  if (!usage.ok())
    return {false, fmt::format("DATA_DIR {}: {}", data_dir, usage.status().message())};
  DiskRule rule;
  if (pipeline != nullptr) {
    Result<DiskRule> resolved = ResolveDiskRule(*pipeline);
    if (!resolved.ok()) return {false, resolved.status().message()};
    rule = *resolved;
  }
  if (IsFreeFloorUnreachable(*usage, rule.thresholds)) {
    return {false, fmt::format("DATA_DIR {}: {}; the filesystem is smaller than the {} free-space "
                               "floor, so sync could never read — set disk_min_free_bytes (or "
                               "SKIPPR_DISK_MIN_FREE_BYTES) lower, or move DATA_DIR",
                               data_dir, DescribeDiskUsage(*usage),
                               FormatDecimalBytes(rule.thresholds.pause_below_free_bytes))};
  }
  const DiskPressure pressure = EvaluateDiskPressure(*usage, /*is_paused=*/false, rule.thresholds);
  if (pressure != DiskPressure::kNone) {
    return {false, fmt::format("DATA_DIR {}: {}; sync pauses reading: {} — free space or move "
                               "DATA_DIR",
                               data_dir, DescribeDiskUsage(*usage),
                               DescribeDiskPressure(pressure, *usage, rule.thresholds))};
  }
  return {true, fmt::format("DATA_DIR {}: {}", data_dir, DescribeDiskUsage(*usage))};
}

std::string DescribePipeline(const config::Config& config, const config::PipelineConfig& pipeline) {
  const auto source = config.data_sources.find(pipeline.data_source);
  const std::string source_kind =
      source != config.data_sources.end() ? source->second.connector.kind : pipeline.data_source;
  std::string destination = "WAL-only";
  if (pipeline.data_sink) {
    destination = config.data_sinks.at(*pipeline.data_sink).connector.kind + " sink '" +
                  *pipeline.data_sink + "'";
  }
  return fmt::format("pipeline '{}' ({} source '{}' → {})", pipeline.name, source_kind,
                     pipeline.data_source, destination);
}

// Whether this build can land in the pipeline's data sink with its write policy: a configured
// connector it cannot run is a failed check naming it, not a surprise at sync.
DoctorCheck CheckDataSinkKind(const config::Config& config,
                              const config::PipelineConfig& pipeline) {
  const config::ConnectorConfig& entry = config.data_sinks.at(*pipeline.data_sink).connector;
  const std::string setting = fmt::format("data_sinks.{}.{}", *pipeline.data_sink, entry.kind);
  Result<sinks::Capabilities> capabilities = sinks::CapabilitiesOf(entry, setting);
  if (!capabilities.ok()) return {false, std::string(capabilities.status().message())};
  const sinks::LandingPolicy policy = sinks::LandingPolicyOf(entry);
  if (!capabilities->Supports(policy.write_policy)) {
    return {false, fmt::format("{}.write_policy: sink '{}' does not support write policy {}",
                               setting, *pipeline.data_sink,
                               sinks::WritePolicyName(policy.write_policy))};
  }
  return {true, fmt::format("pipeline '{}': {} sink '{}' lands with write policy {}{}",
                            pipeline.name, entry.kind, *pipeline.data_sink,
                            sinks::WritePolicyName(policy.write_policy),
                            sinks::IsReadBack(entry) ? "; query reads what it landed"
                                                     : "; query reads the live WAL only")};
}

}  // namespace

// With WAL_STORAGE=s3: the pipeline's WAL prefix can be listed and written (a probe object, put
// and deleted), as every commit and reclaim will.
DoctorCheck CheckWalBucket(const config::PipelineConfig& pipeline) {
  static const ProcessEnvironment environment;
  const auto fail = [&](const std::string& why) {
    return DoctorCheck{false, fmt::format("pipeline '{}': WAL_STORAGE=s3: {}", pipeline.name, why)};
  };
  Result<std::pair<std::string, std::string>> location = aws::ParseS3Uri(pipeline.wal_s3_uri);
  if (!location.ok()) return fail(location.status().message());
  const auto& [bucket, prefix] = *location;
  Result<std::unique_ptr<aws::S3Client>> client = aws::S3Client::Open({}, environment);
  if (!client.ok()) return fail(client.status().message());
  const std::string probe = prefix + "/.doctor-probe";
  Status checked = (*client)->ListObjects(bucket, prefix + "/").status();
  if (checked.ok()) checked = (*client)->PutObject(bucket, probe, "skipprd doctor").status();
  if (checked.ok()) checked = (*client)->DeleteObject(bucket, probe);
  if (!checked.ok()) {
    return fail(fmt::format("cannot list and write {} at {}: {}", pipeline.wal_s3_uri,
                            (*client)->endpoint(), checked.message()));
  }
  const std::string store = pipeline.store_table.empty()
                                ? std::string("under DATA_DIR")
                                : fmt::format("in DynamoDB table '{}'", pipeline.store_table);
  return {true, fmt::format("pipeline '{}': WAL segments in {} (listed and written at {}); the "
                            "store is {}",
                            pipeline.name, pipeline.wal_s3_uri, (*client)->endpoint(), store)};
}

DoctorCheck CheckStoreTable(const config::PipelineConfig& pipeline) {
  static const ProcessEnvironment environment;
  const std::string what = fmt::format("pipeline '{}': Skippr Store in DynamoDB table '{}'",
                                       pipeline.name, pipeline.store_table);
  Result<std::unique_ptr<aws::DynamoClient>> client = aws::DynamoClient::Open({}, environment);
  if (!client.ok()) return {false, fmt::format("{}: {}", what, client.status().message())};
  Result<bool> exists = (*client)->TableExists(pipeline.store_table);
  if (!exists.ok()) {
    return {false, fmt::format("{}: cannot read it at {}: {}", what, (*client)->endpoint(),
                               exists.status().message())};
  }
  if (*exists) return {true, fmt::format("{} (found at {})", what, (*client)->endpoint())};
  return {true, fmt::format("{}: it does not exist at {}; the first sync creates it (this needs "
                            "dynamodb:CreateTable), or create it yourself: {}",
                            what, (*client)->endpoint(),
                            aws::CreateTableCommand(pipeline.store_table))};
}

std::vector<DoctorCheck> RunDoctorChecks(const config::Config& config,
                                         const std::string& default_data_dir) {
  std::vector<DoctorCheck> checks;
  checks.push_back(
      {true, config.path.empty()
                 ? std::string("no skippr.yml found; using an empty configuration")
                 : fmt::format("config {} loaded; every ${{NAME}} resolved", config.path)});
  const size_t pipeline_count = config.pipelines.size();
  checks.push_back(
      {pipeline_count > 0,
       fmt::format("{} pipeline(s) configured{}", pipeline_count,
                   pipeline_count > 0 ? "" : ": add one under 'pipelines:' in skippr.yml")});
  const size_t source_count = config.data_sources.size();
  checks.push_back(
      {source_count > 0,
       fmt::format("{} data source(s) configured{}", source_count,
                   source_count > 0 ? "" : ": add one under 'data_sources:' in skippr.yml")});
  for (const auto& [name, pipeline] : config.pipelines) {
    checks.push_back({true, DescribePipeline(config, pipeline)});
    if (!pipeline.data_sink) {
      checks.push_back(
          {true, fmt::format("pipeline '{}': no data_sink; WAL is the dataset", name)});
    } else {
      checks.push_back(CheckDataSinkKind(config, pipeline));
    }
    for (const config::AggregateConfig& aggregate : pipeline.transform.aggregates) {
      checks.push_back(
          {true, fmt::format("pipeline '{}': aggregate '{}' by [{}] with {} measure(s)", name,
                             aggregate.id, fmt::join(aggregate.key_fields, ", "),
                             aggregate.measures.size())});
    }
    checks.push_back({true, fmt::format("pipeline '{}': skipprd_el_storage_mode=local", name)});
    if (!pipeline.wal_s3_uri.empty()) checks.push_back(CheckWalBucket(pipeline));
    if (!pipeline.store_table.empty()) checks.push_back(CheckStoreTable(pipeline));
  }
  // Sources with a server (Postgres): reachable with their TLS settings, tables readable, and
  // what change data capture needs.
  for (const auto& [name, entry] : config.data_sources) {
    for (const sources::SourceCheck& check : sources::CheckSource(entry.connector, name)) {
      checks.push_back({check.ok, check.message});
    }
  }
  // Sinks with a server (Postgres): reachable, the privileges a landing needs, the schema.
  for (const auto& [name, entry] : config.data_sinks) {
    for (const sinks::SinkCheck& check :
         sinks::CheckSink(entry.connector, fmt::format("data_sinks.{}.{}", name,
                                                       entry.connector.kind))) {
      checks.push_back({check.ok, check.message});
    }
  }
  const std::vector<config::ConfigProblem> problems = config::CheckWholeConfig(config);
  for (const config::ConfigProblem& problem : problems) checks.push_back({false, problem.message});
  if (problems.empty()) checks.push_back({true, "no two sinks write one warehouse namespace"});

  std::map<std::string, const config::PipelineConfig*> first_pipeline_by_data_dir;
  for (const auto& [name, pipeline] : config.pipelines) {
    first_pipeline_by_data_dir.emplace(pipeline.data_dir, &pipeline);
  }
  if (first_pipeline_by_data_dir.empty())
    first_pipeline_by_data_dir.emplace(default_data_dir, nullptr);
  for (const auto& [data_dir, pipeline] : first_pipeline_by_data_dir) {
    checks.push_back(CheckWritable(data_dir));
    checks.push_back(CheckDiskSpace(data_dir, pipeline));
  }
  return checks;
}

}  // namespace skippr::pipeline
