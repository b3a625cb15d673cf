// The landing protocol (docs/formats/landing.md: pipeline/landing.cpp LandCommittedSlices through
// lake::LakeWriter::Land) under disk faults: a FaultInjectionEnv under every file skipprd writes
// (WAL segments, the lake's metadata files, manifests, manifest lists, version hints, directories,
// the fsync of the Parquet files DuckDB writes), a real LMDB store, a real SQLite catalog, real
// DuckDB. A power cut at every file operation and every named crash point of the landings, and the
// faults a disk has at each I/O step; after each, a new run lands every committed row exactly once
// (no landing id twice in the table, the store's landed snapshot the table's current one) and
// reclaims the WAL.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/environment.hpp"
#include "fault/fault_test_support.hpp"
#include "iceberg/iceberg.hpp"
#include "lake/lake.hpp"
#include "pipeline/landing.hpp"
#include "pipeline/pipeline.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"
#include "support/fault_env.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"
#include "wal/wal.hpp"

namespace skippr::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kRowsPerSegment = 300;
constexpr int kSegments = 2;  // each lands on its own (one slice per landing), so two landings

config::Config LandingConfig(const std::string& dir) {
  Result<config::Config> config = config::ParseConfig(fmt::format(R"(
data_sources:
  files:
    File:
      path: {0}/input
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{0}/warehouse
      table_namespace: landed
pipelines:
  events:
    data_source: data_sources.files
    data_sink: data_sinks.lake
    data_dir: {0}/data
)",
                                                                  dir),
                                                      "skippr.yml", MapEnvironment());
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return std::move(config).value();
}

// One pipeline with committed, unlanded segments, over a FaultInjectionEnv; Close and Open again
// are a new process.
class LandingUnderFaults {
 public:
  LandingUnderFaults() : env_(Env::Default(), dir_.Sub("trash")), config_(LandingConfig(dir_.path())) {
    policy_ = pipeline::internal::ResolveLandingPolicy(config_, pipeline());
    policy_.target_file_bytes = 1;  // one slice per landing: more landings, more steps
  }

  FaultInjectionEnv& env() { return env_; }
  const config::PipelineConfig& pipeline() const { return config_.pipelines.at("events"); }
  std::string warehouse() const { return dir_.Sub("warehouse"); }
  std::string table_directory() const { return dir_.Sub("warehouse/landed/events"); }

  Status Open() {
    SKIPPR_ASSIGN_OR_RETURN(pipeline::PipelineState state,
                            pipeline::PipelineState::OpenForWriting(pipeline(), &env_));
    state_.emplace(std::move(state));
    SKIPPR_ASSIGN_OR_RETURN(wal_, wal::Wal::Open(state_->wal_directory(), "events",
                                                 state_->store(), nullptr, {.env = &env_}));
    SKIPPR_ASSIGN_OR_RETURN(pipeline::internal::PipelineSinks sinks,
                            pipeline::internal::OpenSinks(
                                config_, pipeline(),
                                {pipeline().name, state_->store().identity().instance_id, &env_,
                                 state_->sink_directory()}));
    writer_ = std::move(sinks.data);
    return Status::OK();
  }
  void Close() {
    writer_.reset();
    wal_.reset();
    state_.reset();
  }

  // Commits kSegments segments (the schema with the first), then counts everything on disk as
  // durable: the LMDB and SQLite files sync their own directories, which this Env does not see.
  void SetUp() {
    ExpectOk(Open());
    for (int segment = 0; segment < kSegments; ++segment) {
      const int64_t first_id = segment * kRowsPerSegment;
      ExpectOk(wal_->Commit({RowsBatch("events", first_id, kRowsPerSegment)}, "{}",
                            [&](store::WriteTransaction& write) {
                              return schema::SaveNamespace(
                                  write, {.name = "events",
                                          .schema_id = 1,
                                          .last_field_id = 3,
                                          .fields = RowFields(),
                                          .history = {{1, {"discovered"}}}});
                            })
                   .status());
    }
    env_.MarkAllDurable();
  }

  Result<pipeline::internal::LandingPassResult> Land() {
    pipeline::internal::PassLandings pass;
    return pipeline::internal::LandCommittedSlices(*state_, pipeline(), *writer_, policy_, pass);
  }

  // A new run (after a fault, with the power back) lands everything and checks the outcome.
  void ExpectANewRunLandsEveryRowOnce(const std::string& context) {
    Close();
    ExpectOk(Open());
    Result<pipeline::internal::LandingPassResult> landed = Land();
    ExpectOk(landed.status());
    ExpectEveryRowLandedOnce(context);
  }

  void ExpectEveryRowLandedOnce(const std::string& context) {
    store::ReadTransaction read = ValueOrDie(state_->store().BeginRead());
    EXPECT_TRUE(ValueOrDie(wal::LiveSegments(read)).empty()) << context << ": WAL not reclaimed";
    const pipeline::internal::LandingState landing =
        ValueOrDie(pipeline::internal::ReadLandingState(read));
    ASSERT_TRUE(landing.commits.contains("events")) << context;
    const sinks::CommitId& recorded = landing.commits.at("events");
    // The rows of the recorded snapshot: every committed row, once.
    const query::LandedRows rows =
        ValueOrDie(lake::LandedRowsOf({recorded.location, recorded.version}, &env_));
    std::vector<std::string> files;
    for (const query::LandedFile& file : rows.data_files) files.push_back("'" + file.path + "'");
    std::unique_ptr<query::Engine> engine = ValueOrDie(query::Engine::Open());
    const query::QueryResult counted = ValueOrDie(engine->Run(
        fmt::format("SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                    "read_parquet([{}])",
                    fmt::join(files, ", "))));
    const int64_t rows_committed = kSegments * kRowsPerSegment;
    int64_t checksum = 0;
    for (int64_t id = 0; id < rows_committed; ++id) checksum += ChecksumOf(id);
    EXPECT_EQ(counted.rows.at(0),
              (std::vector<std::optional<std::string>>{std::to_string(rows_committed),
                                                       std::to_string(rows_committed),
                                                       std::to_string(checksum)}))
        << context;
    // The table as the catalog has it: its current snapshot is the recorded one, and no landing
    // is in it twice.
    std::unique_ptr<iceberg::Catalog> catalog = ValueOrDie(
        iceberg::OpenCatalog({.warehouse = "file://" + warehouse(), .env = &env_}));
    const iceberg::VersionedMetadata table =
        ValueOrDie(iceberg::LoadTableMetadata(*catalog, {"landed", "events"}));
    ASSERT_NE(table.metadata.CurrentSnapshot(), nullptr) << context;
    EXPECT_EQ(table.metadata.CurrentSnapshot()->snapshot_id, recorded.version) << context;
    std::set<std::string> landing_ids;
    for (const iceberg::Snapshot& snapshot : table.metadata.snapshots) {
      landing_ids.insert(snapshot.summary.at(std::string(lake::kLandingIdKey)));
    }
    EXPECT_EQ(landing_ids.size(), table.metadata.snapshots.size()) << context << ": landed twice";
    EXPECT_EQ(landing_ids.size(), static_cast<size_t>(kSegments)) << context;
    size_t segment_files = 0;  // with data: the empty ones are spares of the open WAL
    for (const auto& entry : fs::directory_iterator(state_->wal_directory())) {
      segment_files += entry.path().extension() == ".seg" && fs::file_size(entry.path()) > 0;
    }
    EXPECT_EQ(segment_files, 0u) << context << ": reclaimed segment files are left";
  }

 private:
  TempDir dir_;
  FaultInjectionEnv env_;
  config::Config config_;
  sinks::LandingPolicy policy_;
  std::optional<pipeline::PipelineState> state_;
  std::unique_ptr<wal::Wal> wal_;
  std::unique_ptr<sinks::Sink> writer_;
};

// ----- power cuts ----------------------------------------------------------------------------------

// The sweeps are cut in shards that ctest runs side by side: shard s takes every kShards-th step.
constexpr int kShards = 4;
class LandingPowerCut : public ::testing::TestWithParam<int> {};

TEST_P(LandingPowerCut, AtEveryFileOperationOfTheLandingsNothingIsLostOrLandedTwice) {
  std::vector<std::string> operations;
  {
    LandingUnderFaults dry_run;
    dry_run.SetUp();
    const size_t before = dry_run.env().operations().size();
    ExpectOk(dry_run.Land().status());
    const std::vector<std::string> all = dry_run.env().operations();
    operations.assign(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
    dry_run.ExpectEveryRowLandedOnce("without faults");
  }
  ASSERT_GE(operations.size(), 20u);
  for (size_t index = GetParam(); index < operations.size(); index += kShards) {
    const std::string context = fmt::format("power cut before landing operation {} ({})", index,
                                            operations[index]);
    SCOPED_TRACE(context);
    LandingUnderFaults landing;
    landing.SetUp();
    landing.env().CrashAtOperation(landing.env().operations().size() + index, ThrowCrash);
    EXPECT_THROW((void)landing.Land(), SimulatedCrash);
    landing.Close();
    ExpectOk(landing.env().DropUnsyncedData());
    landing.ExpectANewRunLandsEveryRowOnce(context);
    RecordProperty("operation_" + std::to_string(index), operations[index]);
  }
}

TEST_P(LandingPowerCut, AtEveryCrashPointOfTheLandingsNothingIsLostOrLandedTwice) {
  std::vector<std::string> reached;
  {
    LandingUnderFaults dry_run;
    dry_run.SetUp();
    CrashPointCrasher counter(dry_run.env(), std::nullopt);
    ExpectOk(dry_run.Land().status());
    reached = counter.reached();
  }
  for (const char* point : {"lake.after_data_file", "lake.before_catalog_commit",
                            "lake.after_catalog_commit", "landing.before_store_commit",
                            "landing.after_store_commit", "iceberg.after_metadata_file",
                            "iceberg.after_catalog_swap"}) {
    EXPECT_THAT(reached, ::testing::Contains(point));
  }
  for (size_t occurrence = GetParam(); occurrence < reached.size(); occurrence += kShards) {
    const std::string context = "power cut at " + reached[occurrence] + " (crash point " +
                                std::to_string(occurrence) + ")";
    SCOPED_TRACE(context);
    LandingUnderFaults landing;
    landing.SetUp();
    {
      CrashPointCrasher crasher(landing.env(), occurrence);
      EXPECT_THROW((void)landing.Land(), SimulatedCrash);
    }
    landing.Close();
    ExpectOk(landing.env().DropUnsyncedData());
    landing.ExpectANewRunLandsEveryRowOnce(context);
    RecordProperty("crash_point_" + std::to_string(occurrence), reached[occurrence]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shard, LandingPowerCut, ::testing::Range(0, kShards));

// ----- faults ----------------------------------------------------------------------------------

struct LandingFault {
  std::string name;
  FaultRule rule;
  StatusCode code;
  std::vector<std::string> message_parts;
};

std::vector<LandingFault> LandingFaults() {
  return {
      {"fsync EIO on the Parquet data file",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/data/*.parquet"},
       StatusCode::kIOError,
       {"writing Parquet file '", ".parquet' of the landing failed: fsync of file '",
        "Input/output error", "the landing is replayed"}},
      {"fsync EIO on the data directory",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/landed/events/data"},
       StatusCode::kIOError,
       {"fsync of directory '", "/landed/events/data' failed", "the landing is replayed"}},
      {"fdatasync EIO on the manifest",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/metadata/.*-m0.avro.*.tmp"},
       StatusCode::kIOError,
       {"writing Iceberg manifest '", "-m0.avro' failed: fdatasync of '", "Input/output error",
        "the table is unchanged"}},
      {"fdatasync EIO on the manifest list",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/metadata/.snap-*.tmp"},
       StatusCode::kIOError,
       {"writing Iceberg manifest list '", "/metadata/snap-", "Input/output error"}},
      {"fdatasync EIO on the new metadata file",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/metadata/.v*.metadata.json.*.tmp",
        .after = 1},  // v1 (the table's creation) syncs; the landing's v2 fails
       StatusCode::kIOError,
       {"writing Iceberg metadata file ", "/metadata/v2.metadata.json failed: fdatasync of '",
        "Input/output error", "nothing was committed", "the next run retries the commit"}},
      {"fsync EIO on the metadata directory",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/landed/events/metadata", .after = 3},
       StatusCode::kIOError,
       {"fsync of directory '", "/landed/events/metadata' failed: Input/output error"}},
      {"fdatasync EIO on version-hint.text after the catalog swap",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/.version-hint.text.*.tmp", .after = 1},
       StatusCode::kIOError,
       {"committed version 2", "but its version-hint.text was not updated",
        "Input/output error"}},
      {"ENOSPC in the middle of a manifest",
       {.kind = FaultKind::kNoSpaceAfterBytes, .path_pattern = "*.avro.*.tmp", .after = 600},
       StatusCode::kNoSpace,
       {"writing Iceberg manifest", "No space left on device", "free disk space"}},
      {"ENOSPC in the middle of the new metadata file",
       {.kind = FaultKind::kNoSpaceAfterBytes, .path_pattern = "*/metadata/.v2.metadata.json.*.tmp",
        .after = 100},
       StatusCode::kNoSpace,
       {"writing Iceberg metadata file ", "/metadata/v2.metadata.json failed: cannot write '",
        "No space left on device", "nothing was committed"}},
      {"EIO reading the parent snapshot's manifest list",
       {.kind = FaultKind::kReadFails, .path_pattern = "*/metadata/snap-*.avro"},
       StatusCode::kIOError,
       {"Iceberg manifest list: cannot read '", "/metadata/snap-", "Input/output error"}},
      {"ENOSPC creating the data directory",
       {.kind = FaultKind::kNoSpaceOnCreate, .path_pattern = "*/landed/events/data"},
       StatusCode::kNoSpace,
       {"cannot create directory '", "/landed/events/data'", "No space left on device"}},
      {"EIO reading a WAL segment to land it",
       {.kind = FaultKind::kReadFails, .path_pattern = "*.seg"},
       StatusCode::kIOError,
       {"cannot read WAL segment file: cannot read '", "/wal/00000000000000000001.seg'",
        "check the disk, then run again"}},
  };
}

TEST(LandingFaults, EachFaultFailsTheLandingClearlyAndTheNextRunLandsEveryRowOnce) {
  for (const LandingFault& fault : LandingFaults()) {
    for (const bool power_cut : {false, true}) {
      const std::string context =
          fault.name + (power_cut ? ", then a power cut" : ", then a restart");
      SCOPED_TRACE(context);
      LandingUnderFaults landing;
      landing.SetUp();
      landing.env().AddRule(fault.rule);
      Result<pipeline::internal::LandingPassResult> failed = landing.Land();
      ASSERT_FALSE(failed.ok()) << "the fault did not fail the landing";
      EXPECT_EQ(failed.status().code(), fault.code) << failed.status().ToString();
      for (const std::string& part : fault.message_parts) {
        EXPECT_THAT(failed.status().message(), HasSubstr(part));
      }
      landing.Close();
      landing.env().ClearRules();
      if (power_cut) ExpectOk(landing.env().DropUnsyncedData());
      landing.ExpectANewRunLandsEveryRowOnce(context);
    }
  }
}

TEST(LandingFaults, ShortWritesEverywhereStillLandEveryRow) {
  LandingUnderFaults landing;
  landing.SetUp();
  landing.env().AddRule({.kind = FaultKind::kShortWrites});
  ExpectOk(landing.Land().status());
  landing.Close();
  ExpectOk(landing.env().DropUnsyncedData());  // every byte synced, not only handed over
  landing.env().ClearRules();
  landing.ExpectANewRunLandsEveryRowOnce("short writes");
}

}  // namespace
}  // namespace skippr::testing
