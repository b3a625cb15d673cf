// lake/: write_policy merge_by_key through LakeWriter::Land on hand-built batches — CDC inserts,
// updates and deletes within and across landings, NULL keys, many landings past the manifest merge
// threshold, a replace after merges — read back by query's view of the landed snapshot and by an
// Iceberg reader this project did not write (npm icebird, through tests/lake/read_iceberg.mjs).
#include "lake/lake.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/crash.hpp"
#include "e2e/process.hpp"
#include "iceberg/iceberg.hpp"
#include "query/query.hpp"
#include "sinks/sinks.hpp"
#include "support/aws_servers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::lake {
namespace {

using ::skippr::testing::ProcessResult;
using ::skippr::testing::RunProcess;
using ::skippr::testing::TempDir;
using ::testing::HasSubstr;
using Batches = std::vector<std::shared_ptr<const Batch>>;
// The table as a reader sees it: id → name (a NULL id as nullopt).
using TableRows = std::map<std::optional<int64_t>, std::string>;
using sinks::SliceRef;

// A landing planned as the pipeline plans one (sinks::PlanLanding), in the lake's terms.
Landing PlanLakeLanding(std::string_view pipeline, std::string_view instance,
                        std::string namespace_name, std::vector<SliceRef> slices,
                        bool replaces_table = false, std::vector<std::string> key_columns = {}) {
  const sinks::Landing planned =
      sinks::PlanLanding(pipeline, instance, std::move(namespace_name), std::move(slices),
                         replaces_table, std::move(key_columns));
  return Landing{planned.landing_id, planned.namespace_name, planned.SegmentIds(),
                 planned.replaces_table, planned.key_columns};
}

constexpr std::string_view kTableNamespace = "landed";
constexpr std::string_view kInstance = "00112233445566778899aabbccddeeff";

// One change of the test's source: a mutation of the row {id, name}.
struct Change {
  Mutation mutation;
  std::optional<int64_t> id;
  std::string name;
};

// {id, name}, or the second column named `value_column`.
schema::NamespaceSchema EventsSchema(std::string_view value_column = "name") {
  schema::NamespaceSchema events;
  events.name = "events";
  events.schema_id = 1;
  events.last_field_id = 2;
  events.fields = {Field{1, "id", LogicalType::Long(), true},
                   Field{2, std::string(value_column), LogicalType::String(), true}};
  return events;
}

// A slice of changes, carrying its CDC sidecar (a delete's name is NULL, as CDC sources send it).
std::shared_ptr<const Batch> Slice(const std::vector<Change>& changes,
                                   std::string_view value_column = "name") {
  auto batch = std::make_shared<Batch>();
  batch->namespace_name = "events";
  batch->schema_id = 1;
  batch->fields = EventsSchema(value_column).fields;
  for (const Field& field : batch->fields) batch->columns.emplace_back(field.type);
  batch->cdc.emplace();
  for (const Change& change : changes) {
    batch->columns[0].Append(change.id ? Value::Int(*change.id) : Value::Null());
    batch->columns[1].Append(change.mutation == Mutation::kDelete ||
                                     change.mutation == Mutation::kTruncate
                                 ? Value::Null()
                                 : Value::String(change.name));
    batch->cdc->mutations.push_back(change.mutation);
    batch->cdc->event_ids.push_back(std::to_string(batch->cdc->event_ids.size()));
    // Increasing, as a source's are in commit order.
    static int64_t next_token = 0;
    batch->cdc->order_tokens.push_back(fmt::format("{:012}", ++next_token));
    batch->cdc->business_keys.push_back("");
  }
  batch->num_rows = static_cast<int64_t>(changes.size());
  std::string reason;
  EXPECT_TRUE(batch->Validate(&reason)) << reason;
  return batch;
}

// What merge_by_key must leave: the changes applied in order to `rows`.
void Apply(TableRows& rows, const std::vector<std::vector<Change>>& slices) {
  for (const std::vector<Change>& slice : slices) {
    for (const Change& change : slice) {
      if (change.mutation == Mutation::kTruncate) {
        rows.clear();
      } else if (change.mutation == Mutation::kDelete) {
        rows.erase(change.id);
      } else {
        rows[change.id] = change.name;
      }
    }
  }
}

class LakeMerge : public ::testing::Test {
 protected:
  void SetUp() override { writer_ = OpenWriter(16); }

  // Where the table is: a local warehouse here, a bucket in LakeMergeOnS3.
  virtual LakeOptions WarehouseOptions() {
    return {.warehouse = "file://" + dir_.Sub("warehouse")};
  }
  virtual std::string TableUri() { return "file://" + dir_.Sub("warehouse/landed/events"); }
  // What reads the table's files (LandedRowsOf, the metadata).
  virtual Env* ReadEnv() { return Env::Default(); }

  std::unique_ptr<LakeWriter> OpenWriter(size_t manifests_before_merge,
                                         int32_t min_snapshots_to_keep = 100) {
    LakeOptions options = WarehouseOptions();
    options.pipeline = "p";
    options.table_namespace = std::string(kTableNamespace);
    options.manifests_before_merge = manifests_before_merge;
    // Expiry by count only, when a test keeps fewer than the default.
    options.max_snapshot_age_ms = min_snapshots_to_keep < 100 ? 0 : 24 * 3600 * 1000;
    options.min_snapshots_to_keep = min_snapshots_to_keep;
    Result<std::unique_ptr<LakeWriter>> writer = LakeWriter::Open(std::move(options));
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    return writer.ok() ? std::move(writer).value() : nullptr;
  }

  // Lands `slices` (as slices `first_ordinal`... of segment `segment_id`) merged by id.
  LandingOutcome Land(uint64_t segment_id, const std::vector<std::vector<Change>>& slices,
                      bool replaces_table = false) {
    std::vector<SliceRef> refs;
    Batches batches;
    for (uint32_t ordinal = 0; ordinal < slices.size(); ++ordinal) {
      refs.push_back({segment_id, ordinal});
      batches.push_back(Slice(slices[ordinal], value_column_));
    }
    const Landing landing = PlanLakeLanding(
        "p", kInstance, "events", refs, replaces_table,
        replaces_table ? std::vector<std::string>{} : std::vector<std::string>{"id"});
    Result<LandingOutcome> outcome = writer_->Land(landing, EventsSchema(value_column_), batches);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) return {};
    snapshot_ = outcome->snapshot;
    return *outcome;
  }

  // The landed table through query's view, with `live` slices not landed yet upserted over it.
  TableRows ReadWithQuery(const std::vector<std::vector<Change>>& live = {}) {
    Result<query::LandedRows> landed = LandedRowsOf(snapshot_, ReadEnv());
    EXPECT_TRUE(landed.ok()) << landed.status().ToString();
    Batches batches;
    for (const std::vector<Change>& slice : live) batches.push_back(Slice(slice, value_column_));
    query::TableSource table{"p", "events", EventsSchema(value_column_).fields,
                             query::BatchList::InMemory(batches)};
    table.landed = landed.ok() ? *landed : query::LandedRows{};
    table.key_columns = {"id"};
    Result<std::unique_ptr<query::Engine>> engine = query::Engine::Open();
    EXPECT_TRUE(engine.ok());
    EXPECT_TRUE((*engine)->RegisterTable(std::move(table)).ok());
    Result<query::QueryResult> result =
        (*engine)->Run(fmt::format("SELECT id, {} FROM p.events", value_column_));
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    TableRows rows;
    if (!result.ok()) return rows;
    for (const auto& row : result->rows) {
      const std::optional<int64_t> id =
          row[0] ? std::optional<int64_t>(std::stoll(*row[0])) : std::nullopt;
      EXPECT_FALSE(rows.contains(id))
          << "query returned id " << row[0].value_or("NULL") << " twice";
      rows[id] = row[1].value_or("<null>");
    }
    return rows;
  }

  // The command line of the independent reader, reading the table's current state.
  virtual std::vector<std::string> IcebirdCommand() {
    return {"node",
            std::string(SKIPPR_SOURCE_DIR) + "/tests/lake/read_iceberg.mjs",
            "--catalog",
            dir_.Sub("warehouse/skippr_catalog.db"),
            std::string(kTableNamespace),
            "events"};
  }

  TableRows ReadWithIcebird() {
    ProcessResult read = RunProcess("/usr/bin/env", IcebirdCommand());
    EXPECT_EQ(read.exit_code, 0) << read.err;
    TableRows rows;
    if (read.exit_code != 0) return rows;
    const nlohmann::json table = nlohmann::json::parse(read.out);
    for (const nlohmann::json& row : table["rows"]) {
      const std::optional<int64_t> id =
          row["id"].is_null() ? std::nullopt : std::optional<int64_t>(row["id"].get<int64_t>());
      EXPECT_FALSE(rows.contains(id)) << "icebird read id " << row["id"] << " twice";
      rows[id] = row[value_column_].get<std::string>();
    }
    return rows;
  }

  iceberg::TableMetadata CurrentMetadata() {
    Result<iceberg::VersionedMetadata> current =
        iceberg::ReadCurrentMetadata(TableUri(), ReadEnv());
    EXPECT_TRUE(current.ok()) << current.status().ToString();
    return current.ok() ? current->metadata : iceberg::TableMetadata{};
  }

  std::string CurrentMetadataLocation() {
    Result<iceberg::VersionedMetadata> current =
        iceberg::ReadCurrentMetadata(TableUri(), ReadEnv());
    EXPECT_TRUE(current.ok()) << current.status().ToString();
    return current.ok() ? current->location : "";
  }

  iceberg::ManifestList CurrentManifestList() {
    const iceberg::TableMetadata metadata = CurrentMetadata();
    Result<iceberg::ManifestList> list = iceberg::ReadManifestList(
        metadata.CurrentSnapshot()->manifest_list.substr(std::string("file://").size()));
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? *list : iceberg::ManifestList{};
  }

  void ExpectMaintenanceRewritesWhatTheDeletesApplyTo();

  TempDir dir_;
  std::unique_ptr<LakeWriter> writer_;
  LandedSnapshot snapshot_;
  std::string value_column_ = "name";  // the second column's name
};

constexpr Mutation kInsert = Mutation::kInsert;
constexpr Mutation kUpdate = Mutation::kUpdate;
constexpr Mutation kDelete = Mutation::kDelete;
constexpr Mutation kTruncate = Mutation::kTruncate;

// The scenario of MaintenanceRewritesWhatTheDeletesApplyToAndKeepsTheRows (below).
void LakeMerge::ExpectMaintenanceRewritesWhatTheDeletesApplyTo() {
  TableRows expected;
  // A first, larger landing whose rows no later change touches, beside ones a change does.
  std::vector<Change> first;
  for (int64_t id = 1000; id < 1100; ++id) first.push_back({kInsert, id, "kept"});
  Land(1, {first});
  Apply(expected, {first});
  // Rows the first changes update and delete: a position delete names only a live row.
  const std::vector<Change> touched = {{kInsert, -3, "t"}, {kInsert, -2, "t"}, {kInsert, -1, "t"}};
  Land(2, {touched});
  Apply(expected, {touched});
  const MaintenancePolicy policy{
      .max_delete_files = 4, .max_small_files = 100, .small_file_bytes = 0};
  for (int landing = 0; landing < 4; ++landing) {
    const std::vector<std::vector<Change>> changes = {
        {{kInsert, landing, fmt::format("v{}", landing)},
         {kUpdate, landing - 1, fmt::format("u{}", landing)},
         {kDelete, landing - 3, ""}}};
    Land(10 + landing, changes);
    Apply(expected, changes);
    Result<MaintenanceOutcome> early = writer_->Maintain(EventsSchema(), policy);
    ASSERT_TRUE(early.ok()) << early.status().ToString();
    EXPECT_FALSE(early->committed) << "at most 4 delete files: nothing to do";
  }
  // Four landings into rows, four delete files; one more makes five.
  const std::vector<std::vector<Change>> sixth = {{{kUpdate, 3, "w"}, {kInsert, 7, "x"}}};
  Land(20, sixth);
  Apply(expected, sixth);
  ASSERT_GT(std::stoll(CurrentMetadata().CurrentSnapshot()->summary.at("total-delete-files")), 4);

  Result<MaintenanceOutcome> outcome = writer_->Maintain(EventsSchema(), policy);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  ASSERT_TRUE(outcome->committed);
  snapshot_ = outcome->snapshot;
  EXPECT_EQ(outcome->delete_files_removed, 5);
  // The files of the second landing to the fifth each have a row a later change deleted or
  // updated; the first landing's and the last one's do not.
  EXPECT_EQ(outcome->data_files_rewritten, 5);
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
  const iceberg::TableMetadata metadata = CurrentMetadata();
  const iceberg::Snapshot& snapshot = *metadata.CurrentSnapshot();
  EXPECT_EQ(snapshot.operation, iceberg::SnapshotOperation::kReplace);
  EXPECT_TRUE(snapshot.summary.contains(std::string(kMaintenanceKey)));
  EXPECT_FALSE(snapshot.summary.contains(std::string(kLandingIdKey)));
  EXPECT_FALSE(snapshot.summary.contains(std::string(kWalSegmentIdsKey)));
  EXPECT_EQ(snapshot.summary.at("total-delete-files"), "0");
  EXPECT_EQ(snapshot.summary.at("total-records"), std::to_string(expected.size()))
      << "no deleted row is left in a data file";
  EXPECT_EQ(snapshot.summary.at("total-data-files"), "3")
      << "the two files with no deleted row are kept";
  Result<MaintenanceOutcome> again = writer_->Maintain(EventsSchema(), policy);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->committed) << "nothing left to do";

  const std::vector<std::vector<Change>> after = {{{kDelete, 1000, ""}, {kUpdate, 7, "y"}}};
  Land(30, after);
  Apply(expected, after);
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
}

// Maintenance past the limits: the data files the deletes apply to and the small ones are
// rewritten into one without the deleted rows, every delete file goes, and the rows stay the same
// for query and the independent reader; a replace snapshot carrying skippr.maintenance and no
// landing id. Landings after it merge into the rewritten table.
TEST_F(LakeMerge, MaintenanceRewritesWhatTheDeletesApplyToAndKeepsTheRows) {
  ExpectMaintenanceRewritesWhatTheDeletesApplyTo();
}

// The same table in a bucket (s3rver), cataloged in DynamoDB (dynalite): merges, maintenance and
// expiry read and write it through the S3Env and its local copies, which start empty.
class LakeMergeOnS3 : public LakeMerge {
 protected:
  static void SetUpTestSuite() {
    why_not_.clear();
    s3_ = testing::S3Server::Start(&why_not_).release();
    if (s3_ != nullptr) dynamo_ = testing::DynamoServer::Start(&why_not_).release();
  }
  static void TearDownTestSuite() {
    delete dynamo_;
    delete s3_;
    dynamo_ = nullptr;
    s3_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(dynamo_, nullptr) << why_not_;
    bucket_ = fmt::format("lake-{}", ++buckets_);
    s3_->CreateBucket(bucket_);
    std::map<std::string, std::string> variables = s3_->ClientEnvironment();
    variables["AWS_ENDPOINT_URL_DYNAMODB"] = dynamo_->endpoint();
    environment_ = MapEnvironment(variables);
    auto env = OpenWarehouseEnv(Warehouse(), Access());
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    read_env_ = std::move(env).value();
    LakeMerge::SetUp();
  }

  std::string Warehouse() const { return fmt::format("s3://{}/wh", bucket_); }
  WarehouseAccess Access() {
    return {.environment = &environment_, .local_directory = dir_.Sub("sink")};
  }
  LakeOptions WarehouseOptions() override {
    return {.warehouse = Warehouse(), .catalog_table = "catalog-" + bucket_, .access = Access()};
  }
  std::string TableUri() override { return Warehouse() + "/landed/events"; }
  Env* ReadEnv() override { return read_env_.get(); }
  std::vector<std::string> IcebirdCommand() override {
    return {"READ_ICEBERG_S3_ENDPOINT=" + s3_->endpoint(), "node",
            std::string(SKIPPR_SOURCE_DIR) + "/tests/lake/read_iceberg.mjs",
            CurrentMetadataLocation()};
  }

  static inline testing::S3Server* s3_ = nullptr;
  static inline testing::DynamoServer* dynamo_ = nullptr;
  static inline std::string why_not_;
  static inline int buckets_ = 0;
  std::string bucket_;
  MapEnvironment environment_;
  std::unique_ptr<Env> read_env_;
};

TEST_F(LakeMergeOnS3, MaintenanceRewritesWhatTheDeletesApplyToAndKeepsTheRows) {
  ExpectMaintenanceRewritesWhatTheDeletesApplyTo();
  // Expiry down to the newest snapshot removes what only older ones named, objects included.
  writer_ = OpenWriter(16, /*min_snapshots_to_keep=*/1);
  Land(40, {{{kInsert, 5000, "last"}}});
  EXPECT_EQ(CurrentMetadata().snapshots.size(), 1u);
  EXPECT_EQ(ReadWithQuery().at(5000), "last");
}

// Run once at the next crash point named `name` (a plain function pointer is all an observer is).
std::function<void()>* pending_at_crash_point = nullptr;
std::string_view pending_crash_point;
void RunPendingAtCrashPoint(std::string_view name) {
  if (pending_at_crash_point == nullptr || name != pending_crash_point) return;
  std::function<void()> run = std::move(*pending_at_crash_point);
  pending_at_crash_point = nullptr;
  run();
}

// A merge's position deletes name the rows of the snapshot it was written against. When another
// writer commits between writing and committing, the landing is written again against the new
// snapshot: the other writer's row of a key this landing changes is deleted too, so the key is
// left with one row, for query and the independent reader.
TEST_F(LakeMerge, AMergeRetriedAfterAnotherWritersCommitDeletesThatWritersRowsToo) {
  TableRows expected;
  const std::vector<std::vector<Change>> first = {{{kInsert, 1, "a"}, {kInsert, 2, "b"}}};
  Land(1, first);
  Apply(expected, first);

  const std::vector<std::vector<Change>> other = {{{kUpdate, 1, "other"}, {kUpdate, 2, "b2"}}};
  std::unique_ptr<LakeWriter> other_writer = OpenWriter(16);
  std::function<void()> land_other = [&] {
    const Landing landing = PlanLakeLanding("p", kInstance, "events", {{2, 0}}, false, {"id"});
    Result<LandingOutcome> landed = other_writer->Land(landing, EventsSchema(), {Slice(other[0])});
    ASSERT_TRUE(landed.ok()) << landed.status().ToString();
  };
  pending_at_crash_point = &land_other;
  pending_crash_point = "lake.after_data_file";
  SetCrashPointObserver(&RunPendingAtCrashPoint);
  const std::vector<std::vector<Change>> mine = {{{kUpdate, 1, "mine"}}};
  const LandingOutcome outcome = Land(3, mine);
  SetCrashPointObserver(nullptr);
  ASSERT_EQ(pending_at_crash_point, nullptr) << "the other writer landed in between";
  Apply(expected, other);
  Apply(expected, mine);
  EXPECT_EQ(expected, (TableRows{{1, "mine"}, {2, "b2"}}));
  EXPECT_EQ(outcome.rows_deleted, 1) << "the other writer's row of id 1, not the first one's";
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
}

// A row's position is what DuckDB reads as `file_row_number`, which a column of that name hides:
// a table with one merges by equality deletes instead, which both readers apply too.
TEST_F(LakeMerge, ATableWithAFileRowNumberColumnMergesByEqualityDeletes) {
  value_column_ = "file_row_number";
  TableRows expected;
  const std::vector<std::vector<Change>> first = {
      {{kInsert, 1, "a"}, {kInsert, 2, "b"}, {kInsert, 3, "c"}}};
  Land(1, first);
  Apply(expected, first);
  const std::vector<std::vector<Change>> second = {
      {{kUpdate, 1, "a2"}, {kDelete, 2, ""}, {kInsert, 4, "d"}}};
  const LandingOutcome outcome = Land(2, second);
  Apply(expected, second);
  EXPECT_EQ(outcome.rows_deleted, 3) << "the keys the landing touches";
  EXPECT_EQ(CurrentMetadata().CurrentSnapshot()->summary.at("added-equality-deletes"), "3");
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
}

// Expiry removes what no kept snapshot needs: after merges, maintenance rewrites, a truncate and a
// table replace, with three snapshots kept, the table's directory holds exactly the data and
// delete files live in a kept snapshot, and the manifests and manifest lists they list — and every
// kept snapshot still reads.
TEST_F(LakeMerge, ExpiryRemovesTheFilesNoKeptSnapshotHasLive) {
  writer_ = OpenWriter(/*manifests_before_merge=*/4, /*min_snapshots_to_keep=*/3);
  TableRows expected;
  const MaintenancePolicy policy{
      .max_delete_files = 2, .max_small_files = 3, .small_file_bytes = 1 << 20};
  std::vector<LandedSnapshot> snapshots;
  for (int landing = 0; landing < 24; ++landing) {
    std::vector<std::vector<Change>> changes = {
        {{kInsert, landing, "new"}, {kUpdate, landing / 2, fmt::format("u{}", landing)}}};
    if (landing % 5 == 4) changes[0].push_back({kDelete, landing - 3, ""});
    if (landing == 13) changes[0].insert(changes[0].begin(), {kTruncate, std::nullopt, ""});
    Land(200 + landing, changes, /*replaces_table=*/false);
    Apply(expected, changes);
    snapshots.push_back(snapshot_);
    Result<MaintenanceOutcome> maintained = writer_->Maintain(EventsSchema(), policy);
    ASSERT_TRUE(maintained.ok()) << maintained.status().ToString();
    if (maintained->committed) snapshots.push_back(snapshot_ = maintained->snapshot);
  }
  ASSERT_GT(snapshots.size(), 26u) << "some maintenance ran";
  Land(300, {{{kInsert, 99, "replaced"}}}, /*replaces_table=*/true);
  Land(301, {{{kUpdate, 99, "after"}, {kInsert, 100, "x"}}});
  EXPECT_EQ(ReadWithQuery(), (TableRows{{99, "after"}, {100, "x"}}));
  EXPECT_EQ(ReadWithIcebird(), (TableRows{{99, "after"}, {100, "x"}}));

  const iceberg::TableMetadata metadata = CurrentMetadata();
  ASSERT_EQ(metadata.snapshots.size(), 3u);
  std::set<std::string> needed;
  for (const iceberg::Snapshot& snapshot : metadata.snapshots) {
    const std::string list_path = snapshot.manifest_list.substr(std::string("file://").size());
    needed.insert(list_path);
    Result<iceberg::ManifestList> list = iceberg::ReadManifestList(list_path);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    for (const iceberg::ManifestFile& manifest : list->manifests) {
      needed.insert(manifest.manifest_path.substr(std::string("file://").size()));
    }
    Result<query::LandedRows> live =
        LandedRowsOf({CurrentMetadataLocation(), snapshot.snapshot_id});
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    for (const query::LandedFile& file : live->data_files) needed.insert(file.path);
    for (const query::PositionDeleteFile& file : live->position_delete_files) {
      needed.insert(file.path);
    }
  }
  std::set<std::string> on_disk;
  const std::string table = dir_.Sub("warehouse/landed/events");
  for (const std::string sub : {"/data", "/metadata"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(table + sub)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".parquet") || name.ends_with(".avro")) on_disk.insert(entry.path());
    }
  }
  EXPECT_EQ(on_disk, needed);
}

// Maintenance writes the rewritten rows as files of about the target size: past it, DuckDB starts
// the next file at the end of a row group (at most 122,880 rows), so 250,000 rows under a tiny
// target are several files — how many depends on how DuckDB's threads cut the row groups (three
// when one thread writes, two seen on a loaded machine) — which read as the table.
TEST_F(LakeMerge, MaintenanceWritesFilesOfTheTargetSize) {
  TableRows expected;
  std::vector<Change> many;
  for (int64_t id = 0; id < 250'000; ++id) many.push_back({kInsert, id, "v"});
  Land(1, {many});
  Apply(expected, {many});
  const std::vector<std::vector<Change>> changes = {{{kUpdate, 7, "w"}, {kDelete, 200'000, ""}}};
  Land(2, changes);
  Apply(expected, changes);
  Result<MaintenanceOutcome> outcome = writer_->Maintain(EventsSchema(), {.max_delete_files = 0,
                                                                          .max_small_files = 100,
                                                                          .small_file_bytes = 0,
                                                                          .target_file_bytes = 1});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  ASSERT_TRUE(outcome->committed);
  snapshot_ = outcome->snapshot;
  EXPECT_EQ(outcome->data_files_rewritten, 1) << "the landing of the changes has no deleted row";
  EXPECT_GE(outcome->data_files_written, 2) << "250,000 rows do not fit in one row group";
  EXPECT_EQ(outcome->rows_written, 249'998) << "the first file's rows but the two changed";
  EXPECT_EQ(CurrentMetadata().CurrentSnapshot()->summary.at("total-data-files"),
            std::to_string(outcome->data_files_written + 1))
      << "the rewritten files and the second landing's";
  EXPECT_EQ(ReadWithQuery(), expected);
}

// Many small files are bin-packed into one, deletes or not.
TEST_F(LakeMerge, MaintenanceBinPacksSmallFiles) {
  TableRows expected;
  for (int landing = 0; landing < 6; ++landing) {
    const std::vector<std::vector<Change>> changes = {{{kInsert, landing, "a"}}};
    Land(40 + landing, changes);
    Apply(expected, changes);
  }
  Result<MaintenanceOutcome> outcome = writer_->Maintain(
      EventsSchema(), {.max_delete_files = 100, .max_small_files = 4, .small_file_bytes = 1 << 20});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  ASSERT_TRUE(outcome->committed);
  snapshot_ = outcome->snapshot;
  EXPECT_EQ(outcome->data_files_rewritten, 6);
  EXPECT_EQ(outcome->rows_written, 6);
  EXPECT_EQ(CurrentMetadata().CurrentSnapshot()->summary.at("total-data-files"), "1");
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
}

// A truncate in a landing replaces the table at its place: the changes before it in the landing
// and every row landed earlier are gone, the changes after it are the table (an Iceberg overwrite
// that lists the earlier data and delete files as DELETED), for query and the independent reader.
TEST_F(LakeMerge, ATruncateReplacesTheTableAtItsPlaceInTheStream) {
  TableRows expected;
  const std::vector<std::vector<Change>> first = {{{kInsert, 1, "a"}, {kInsert, 2, "b"}}};
  Land(1, first);
  Apply(expected, first);
  const std::vector<std::vector<Change>> second = {{{kUpdate, 2, "b2"}, {kInsert, 3, "c"}}};
  Land(2, second);
  Apply(expected, second);
  const std::vector<std::vector<Change>> third = {
      {{kUpdate, 1, "a2"}, {kTruncate, std::nullopt, ""}, {kInsert, 4, "d"}},
      {{kInsert, 2, "b3"}, {kDelete, 4, ""}, {kInsert, 5, "e"}}};
  const LandingOutcome outcome = Land(3, third);
  Apply(expected, third);
  EXPECT_EQ(expected, (TableRows{{2, "b3"}, {5, "e"}}));
  EXPECT_EQ(outcome.rows_written, 2);
  EXPECT_EQ(outcome.rows_deleted, 0) << "an overwrite needs no deletes";
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
  const iceberg::TableMetadata metadata = CurrentMetadata();
  const iceberg::Snapshot& snapshot = *metadata.CurrentSnapshot();
  EXPECT_EQ(snapshot.operation, iceberg::SnapshotOperation::kOverwrite);
  EXPECT_EQ(snapshot.summary.at("deleted-data-files"), "2");
  EXPECT_EQ(snapshot.summary.at("total-data-files"), "1");
  EXPECT_EQ(snapshot.summary.at("total-delete-files"), "0");
  EXPECT_EQ(snapshot.summary.at("total-records"), "2");

  // Changes after it merge into what it left.
  const std::vector<std::vector<Change>> fourth = {{{kUpdate, 5, "e2"}, {kInsert, 6, "f"}}};
  Land(4, fourth);
  Apply(expected, fourth);
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
}

TEST_F(LakeMerge, CdcChangesWithinAndAcrossLandingsLeaveTheFinalStateForBothReaders) {
  TableRows expected;
  // Within one landing: an update after an insert, a delete and a re-insert, a delete of a key
  // inserted in the other slice.
  const std::vector<std::vector<Change>> first = {
      {{kInsert, 1, "a"}, {kInsert, 2, "b"}, {kInsert, 3, "c"}, {kUpdate, 1, "a2"}},
      {{kDelete, 2, ""}, {kInsert, 4, "d"}, {kInsert, 2, "b2"}, {kDelete, 3, ""}}};
  LandingOutcome outcome = Land(1, first);
  Apply(expected, first);
  EXPECT_EQ(expected, (TableRows{{1, "a2"}, {2, "b2"}, {4, "d"}}));
  EXPECT_EQ(outcome.rows, 8);
  EXPECT_EQ(outcome.rows_written, 3);
  EXPECT_EQ(outcome.rows_deleted, 0) << "the table was empty: nothing older to delete";
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);

  // Across landings: updates and a delete of landed keys, a new key updated in the same landing.
  const std::vector<std::vector<Change>> second = {
      {{kUpdate, 4, "d2"}, {kDelete, 1, ""}, {kInsert, 5, "e"}}, {{kUpdate, 5, "e2"}}};
  Apply(expected, second);
  // Before it lands, query upserts the live slices over the landed rows the same way.
  EXPECT_EQ(ReadWithQuery(second), expected);
  Land(2, second);
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);

  // A landing of deletes only adds no data file, only the deletes.
  const std::vector<std::vector<Change>> third = {{{kDelete, 2, ""}, {kDelete, 4, ""}}};
  outcome = Land(3, third);
  Apply(expected, third);
  EXPECT_EQ(outcome.rows_written, 0);
  EXPECT_EQ(outcome.data_file_bytes, 0);
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);
  const iceberg::TableMetadata metadata = CurrentMetadata();
  const iceberg::Snapshot& snapshot = *metadata.CurrentSnapshot();
  EXPECT_EQ(snapshot.operation, iceberg::SnapshotOperation::kOverwrite);
  EXPECT_EQ(snapshot.summary.at("added-data-files"), "0");
  EXPECT_EQ(snapshot.summary.at("added-delete-files"), "1");
  EXPECT_EQ(snapshot.summary.at("added-position-deletes"), "2");
  EXPECT_EQ(snapshot.summary.at("total-data-files"), "2");
  EXPECT_EQ(snapshot.summary.at("total-delete-files"), "2");
  // The live rows of keys 4 and 1, then of 2 and 4: a position delete names only a live row.
  EXPECT_EQ(snapshot.summary.at("total-position-deletes"), "4");
  EXPECT_EQ(snapshot.summary.at("total-equality-deletes"), "0");
  EXPECT_EQ(snapshot.summary.at("total-records"), "5");  // 3 + 2 rows in data files

  // Each snapshot carries the source position it reflects: the landing's greatest order token.
  std::vector<std::string> positions;
  for (const iceberg::Snapshot& landed : metadata.snapshots) {
    ASSERT_TRUE(landed.summary.contains(std::string(kSourcePositionKey)));
    positions.push_back(landed.summary.at(std::string(kSourcePositionKey)));
  }
  ASSERT_EQ(positions.size(), 3u);
  EXPECT_LT(positions[0], positions[1]);
  EXPECT_LT(positions[1], positions[2]);
  EXPECT_EQ(positions[2].size(), 24u) << "12 bytes of token in hex";

  // Re-inserting a deleted key.
  const std::vector<std::vector<Change>> fourth = {{{kInsert, 1, "a3"}}};
  Land(4, fourth);
  Apply(expected, fourth);
  EXPECT_EQ(expected, (TableRows{{1, "a3"}, {5, "e2"}}));
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);

  // A replayed landing finds itself in the table and changes nothing.
  const size_t snapshots = CurrentMetadata().snapshots.size();
  EXPECT_TRUE(Land(4, fourth).was_landed_before);
  EXPECT_EQ(CurrentMetadata().snapshots.size(), snapshots);
}

// As Iceberg compares keys, NULL equals NULL: a NULL key is one key, updated and deleted like any
// other, for query and for the independent reader (which gets positions, not the NULL key).
TEST_F(LakeMerge, ANullKeyIsOneKey) {
  TableRows expected;
  const std::vector<std::vector<Change>> first = {
      {{kInsert, std::nullopt, "n1"}, {kInsert, 1, "a"}, {kInsert, std::nullopt, "n2"}}};
  Land(1, first);
  Apply(expected, first);
  EXPECT_EQ(ReadWithQuery(), (TableRows{{std::nullopt, "n2"}, {1, "a"}}));
  const std::vector<std::vector<Change>> second = {{{kUpdate, std::nullopt, "n3"}}};
  Land(2, second);
  Apply(expected, second);
  EXPECT_EQ(ReadWithQuery(), (TableRows{{std::nullopt, "n3"}, {1, "a"}}));
  EXPECT_EQ(ReadWithIcebird(), (TableRows{{std::nullopt, "n3"}, {1, "a"}}));
  const std::vector<std::vector<Change>> third = {{{kDelete, std::nullopt, ""}}};
  Apply(expected, third);
  EXPECT_EQ(ReadWithQuery(third), (TableRows{{1, "a"}}));
  Land(3, third);
  EXPECT_EQ(ReadWithQuery(), (TableRows{{1, "a"}}));
  EXPECT_EQ(ReadWithIcebird(), (TableRows{{1, "a"}}));
}

// Forty landings with a merge after every few: data entries merge into one data manifest and
// position deletes into one delete manifest, so every delete still removes exactly the rows it
// named. A replacing landing then drops them all.
TEST_F(LakeMerge, ManyLandingsPastTheMergeThresholdStayCorrect) {
  writer_ = OpenWriter(/*manifests_before_merge=*/5);
  TableRows expected;
  constexpr int kLandings = 40;
  for (int landing = 0; landing < kLandings; ++landing) {
    std::vector<Change> changes;
    for (int64_t id = landing; id < landing + 6; ++id) {  // overlaps the previous five landings
      changes.push_back({kUpdate, id, fmt::format("v{}-{}", landing, id)});
    }
    if (landing % 3 == 2) changes.push_back({kDelete, landing - 2, ""});
    const std::vector<std::vector<Change>> slices = {changes};
    Land(100 + landing, slices);
    Apply(expected, slices);
    const iceberg::ManifestList list = CurrentManifestList();
    EXPECT_LE(list.manifests.size(), 5u) << "after landing " << landing;
  }
  const iceberg::ManifestList list = CurrentManifestList();
  std::map<iceberg::ManifestContent, int64_t> live_files;
  for (const iceberg::ManifestFile& manifest : list.manifests) {
    live_files[manifest.content] += manifest.added_files_count + manifest.existing_files_count;
  }
  EXPECT_EQ(live_files[iceberg::ManifestContent::kData], kLandings);
  // The first landing merged into an empty table and needed no delete file.
  EXPECT_EQ(live_files[iceberg::ManifestContent::kDeletes], kLandings - 1);
  EXPECT_EQ(expected.size(), static_cast<size_t>(kLandings + 5 - (kLandings + 1) / 3));
  EXPECT_EQ(ReadWithQuery(), expected);
  EXPECT_EQ(ReadWithIcebird(), expected);

  // replace_table: the new rows alone; the earlier data and delete files are DELETED entries.
  Land(999, {{{kInsert, 7, "only"}}}, /*replaces_table=*/true);
  EXPECT_EQ(ReadWithQuery(), (TableRows{{7, "only"}}));
  EXPECT_EQ(ReadWithIcebird(), (TableRows{{7, "only"}}));
  const iceberg::TableMetadata metadata = CurrentMetadata();
  const iceberg::Snapshot& replaced = *metadata.CurrentSnapshot();
  EXPECT_EQ(replaced.summary.at("total-delete-files"), "0");
  EXPECT_EQ(replaced.summary.at("total-position-deletes"), "0");
  EXPECT_EQ(replaced.summary.at("removed-delete-files"), std::to_string(kLandings - 1));
  EXPECT_EQ(replaced.summary.at("removed-position-delete-files"), std::to_string(kLandings - 1));
  Result<query::LandedRows> landed = LandedRowsOf(snapshot_);
  ASSERT_TRUE(landed.ok());
  EXPECT_EQ(landed->data_files.size(), 1u);
  EXPECT_TRUE(landed->position_delete_files.empty());
  EXPECT_TRUE(landed->equality_delete_files.empty());
}

TEST(LakeKeys, KeyColumnsMustBeTopLevelPrimitiveColumnsNamedOnce) {
  const std::vector<Field> fields = {
      Field{1, "id", LogicalType::Long(), true},
      Field{2, "where", LogicalType::Struct({Field{3, "city", LogicalType::String(), true}}), true},
      Field{4, "score", LogicalType::Double(), true},
      Field{5, "name", LogicalType::String(), true}};
  EXPECT_TRUE(CheckKeyColumns({"id"}, fields).ok());
  EXPECT_TRUE(CheckKeyColumns({"name", "id"}, fields).ok());
  EXPECT_THAT(CheckKeyColumns({"idx"}, fields).message(),
              HasSubstr("column 'idx' is not in the schema (columns: id, where, score, name)"));
  EXPECT_THAT(CheckKeyColumns({"where"}, fields).message(),
              HasSubstr("key columns must be top-level primitive columns"));
  EXPECT_THAT(CheckKeyColumns({"score"}, fields).message(), HasSubstr("float or double"));
  EXPECT_THAT(CheckKeyColumns({"id", "id"}, fields).message(),
              HasSubstr("names column 'id' twice"));
  EXPECT_EQ(CheckKeyColumns({}, fields).code(), StatusCode::kInvalidArgument);
}

TEST(LakeKeys, TheKeyIsPartOfTheLandingId) {
  const std::vector<SliceRef> slices = {{1, 0}, {1, 1}};
  const std::string append = PlanLakeLanding("p", kInstance, "events", slices).landing_id;
  const std::string by_id =
      PlanLakeLanding("p", kInstance, "events", slices, false, {"id"}).landing_id;
  const std::string by_id_name =
      PlanLakeLanding("p", kInstance, "events", slices, false, {"id", "name"}).landing_id;
  const std::string by_name_id =
      PlanLakeLanding("p", kInstance, "events", slices, false, {"name", "id"}).landing_id;
  EXPECT_NE(append, by_id);
  EXPECT_NE(by_id, by_id_name);
  EXPECT_NE(by_id_name, by_name_id);
  EXPECT_EQ(by_id, PlanLakeLanding("p", kInstance, "events", slices, false, {"id"}).landing_id);
}

// A store rebuilt from nothing hands out segment ids from 1 again: its landings of "the same"
// slices are other landings, never found in the history an earlier store left in the table.
TEST(LakeLandingId, ThePipelineInstanceIsPartOfTheLandingId) {
  const std::vector<SliceRef> slices = {{1, 0}};
  const std::string first = PlanLakeLanding("p", kInstance, "events", slices).landing_id;
  const std::string other =
      PlanLakeLanding("p", "ffeeddccbbaa99887766554433221100", "events", slices).landing_id;
  EXPECT_NE(first, other);
  EXPECT_EQ(first, PlanLakeLanding("p", kInstance, "events", slices).landing_id);
  EXPECT_EQ(first.size(), 32u);
}

// ----- streamed landings (written while their batches are committed) ---------------------------

// Rows {id, "name-<id>"} for ids [first_id, first_id + rows), as a sync commits them: no CDC.
std::shared_ptr<const Batch> AppendedRows(int64_t first_id, int64_t rows) {
  auto batch = std::make_shared<Batch>();
  batch->namespace_name = "events";
  batch->schema_id = 1;
  batch->fields = EventsSchema().fields;
  for (const Field& field : batch->fields) batch->columns.emplace_back(field.type);
  for (int64_t id = first_id; id < first_id + rows; ++id) {
    batch->columns[0].Append(Value::Int(id));
    batch->columns[1].Append(Value::String(fmt::format("name-{}", id)));
  }
  batch->num_rows = rows;
  return batch;
}

// Hands out `batches` one by one from another thread, each after a pause, as commits arrive,
// keeping none it has handed out (as the lander does); fails instead of handing out batch
// `fail_at`.
class BatchFeed {
 public:
  BatchFeed(Batches batches, size_t fail_at = SIZE_MAX)
      : batches_(std::move(batches)), fail_at_(fail_at), feeder_([this] { Feed(); }) {}
  ~BatchFeed() { feeder_.join(); }

  Result<std::shared_ptr<const Batch>> Next() {
    std::unique_lock lock(mutex_);
    arrived_.wait(lock, [this] { return taken_ < fed_ || fed_ == batches_.size(); });
    if (taken_ == fail_at_) return Status::IOError("the feed broke");
    if (taken_ == batches_.size()) return std::shared_ptr<const Batch>();
    return std::move(batches_[taken_++]);
  }

 private:
  void Feed() {
    for (size_t i = 0; i < batches_.size(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::lock_guard lock(mutex_);
      ++fed_;
      arrived_.notify_all();
    }
  }

  Batches batches_;
  const size_t fail_at_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  size_t fed_ = 0;
  size_t taken_ = 0;
  std::thread feeder_;  // last
};

class LakeStream : public LakeMerge {
 protected:
  // Streams `batches` (slices 0... of segment `segment_id`) and lands them as one landing. What
  // the caller does not keep goes as soon as the stream has read it.
  Result<LandingOutcome> StreamAndLand(uint64_t segment_id, Batches batches) {
    int64_t expected_rows = 0;
    std::vector<SliceRef> slices;
    for (uint32_t ordinal = 0; ordinal < batches.size(); ++ordinal) {
      expected_rows += batches[ordinal]->num_rows;
      slices.push_back({segment_id, ordinal});
    }
    BatchFeed feed(std::move(batches));
    SKIPPR_ASSIGN_OR_RETURN(const int64_t rows,
                            writer_->WriteStream(EventsSchema(), [&] { return feed.Next(); }));
    EXPECT_EQ(rows, expected_rows);
    landing_ = PlanLakeLanding("p", kInstance, "events", slices);
    SKIPPR_ASSIGN_OR_RETURN(LandingOutcome outcome,
                            writer_->LandStreamed(landing_, EventsSchema(), expected_rows));
    snapshot_ = outcome.snapshot;
    return outcome;
  }

  std::vector<std::string> DataFiles() {
    std::vector<std::string> names;
    for (const auto& entry :
         std::filesystem::directory_iterator(dir_.Sub("warehouse/landed/events/data"))) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  Landing landing_;
};

TableRows IdsAndNames(int64_t first_id, int64_t rows) {
  TableRows expected;
  for (int64_t id = first_id; id < first_id + rows; ++id) expected[id] = fmt::format("name-{}", id);
  return expected;
}

TEST_F(LakeStream, AStreamLandsEveryRowItsBatchesBringUnderTheLandingsOwnFile) {
  Batches batches;
  for (int i = 0; i < 20; ++i) batches.push_back(AppendedRows(i * 3000, 3000));
  Result<LandingOutcome> outcome = StreamAndLand(7, batches);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_FALSE(outcome->was_landed_before);
  EXPECT_EQ(outcome->rows, 60000);
  // The stream's file became the landing's, as a replay of the landing would name it.
  EXPECT_EQ(DataFiles(), std::vector<std::string>{landing_.landing_id + ".parquet"});
  EXPECT_EQ(ReadWithQuery(), IdsAndNames(0, 60000));
  EXPECT_EQ(ReadWithIcebird(), IdsAndNames(0, 60000));
  // The landing is in the table's history: landing it again (a replay) writes nothing.
  Result<LandingOutcome> replay = writer_->Land(landing_, EventsSchema(), batches);
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->was_landed_before);
  EXPECT_EQ(CurrentMetadata().snapshots.size(), 1u);
}

// The statistics a stream gathers as DuckDB takes its batches are those Land computes from the
// same batches at once: counts, and bounds a filter prunes files by. The stream gets copies only
// it holds, so its bounds (strings too) must outlive each batch (AddressSanitizer checks).
TEST_F(LakeStream, AStreamedFileHasTheStatisticsOfTheSameRowsLanded) {
  Batches batches;
  Batches streamed_copies;
  for (int i = 0; i < 8; ++i) {
    batches.push_back(AppendedRows(1000 - i * 100, 50 + i * 7));
    streamed_copies.push_back(std::make_shared<const Batch>(*batches.back()));
  }
  ASSERT_TRUE(StreamAndLand(3, std::move(streamed_copies)).ok());
  const LandedSnapshot streamed = snapshot_;
  TempDir other;
  Result<std::unique_ptr<LakeWriter>> writer =
      LakeWriter::Open({.pipeline = "p",
                        .warehouse = "file://" + other.Sub("warehouse"),
                        .table_namespace = std::string(kTableNamespace)});
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  Result<LandingOutcome> landed = (*writer)->Land(landing_, EventsSchema(), batches);
  ASSERT_TRUE(landed.ok()) << landed.status().ToString();

  Result<query::LandedRows> from_stream = LandedRowsOf(streamed);
  Result<query::LandedRows> from_land = LandedRowsOf(landed->snapshot);
  ASSERT_TRUE(from_stream.ok() && from_land.ok());
  ASSERT_EQ(from_stream->data_files.size(), 1u);
  ASSERT_EQ(from_land->data_files.size(), 1u);
  const auto& stream_statistics = from_stream->data_files[0].column_statistics;
  const auto& land_statistics = from_land->data_files[0].column_statistics;
  ASSERT_EQ(stream_statistics.size(), 2u);
  for (const auto& [field_id, expected] : land_statistics) {
    SCOPED_TRACE(field_id);
    ASSERT_TRUE(stream_statistics.contains(field_id));
    const query::ColumnStatistics& actual = stream_statistics.at(field_id);
    EXPECT_EQ(actual.lower, expected.lower);
    EXPECT_EQ(actual.upper, expected.upper);
    EXPECT_EQ(actual.value_count, expected.value_count);
    EXPECT_EQ(actual.null_count, expected.null_count);
  }
  EXPECT_EQ(stream_statistics.at(1).lower, Value::Int(300));
  EXPECT_EQ(stream_statistics.at(1).upper, Value::Int(1049));
  EXPECT_EQ(stream_statistics.at(2).lower, Value::String("name-1000"));
  EXPECT_EQ(stream_statistics.at(2).upper, Value::String("name-956"));
}

TEST_F(LakeStream, AStreamThatFailsCommitsNothingAndTheNextOneLandsOverItsFile) {
  Batches batches;
  for (int i = 0; i < 6; ++i) batches.push_back(AppendedRows(i * 1000, 1000));
  {
    BatchFeed broken(batches, 3);
    Result<int64_t> written = writer_->WriteStream(EventsSchema(), [&] { return broken.Next(); });
    ASSERT_FALSE(written.ok());
    EXPECT_THAT(written.status().message(), HasSubstr("the feed broke"));
    EXPECT_THAT(written.status().message(), HasSubstr("nothing was committed to the table"));
  }
  Result<LandingOutcome> outcome = StreamAndLand(1, batches);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(DataFiles(), std::vector<std::string>{landing_.landing_id + ".parquet"});
  EXPECT_EQ(ReadWithIcebird(), IdsAndNames(0, 6000));
}

// ----- landed file pruning (query's view reads only the data files a statement can need) --------

// Rows of the pruning table: every column kind whose statistics a filter can use.
struct TypedRow {
  std::optional<int64_t> id;
  std::optional<double> score;
  std::optional<std::string> name;
  std::optional<int64_t> at_micros;
  std::optional<int32_t> day;
  std::optional<int64_t> amount_cents;  // decimal(10, 2)
  std::optional<bool> flag;
  std::optional<int64_t> at_utc_micros;  // timestamptz
};

schema::NamespaceSchema TypedSchema() {
  schema::NamespaceSchema typed;
  typed.name = "typed";
  typed.schema_id = 1;
  typed.last_field_id = 8;
  typed.fields = {Field{1, "id", LogicalType::Long(), true},
                  Field{2, "score", LogicalType::Double(), true},
                  Field{3, "name", LogicalType::String(), true},
                  Field{4, "at", LogicalType::Timestamp(), true},
                  Field{5, "day", LogicalType::Date(), true},
                  Field{6, "amount", *LogicalType::Decimal(10, 2), true},
                  Field{7, "flag", LogicalType::Boolean(), true},
                  Field{8, "at_utc", LogicalType::TimestampTz(), true}};
  return typed;
}

std::shared_ptr<const Batch> TypedBatch(const std::vector<TypedRow>& rows) {
  auto batch = std::make_shared<Batch>();
  batch->namespace_name = "typed";
  batch->schema_id = 1;
  batch->fields = TypedSchema().fields;
  for (const Field& field : batch->fields) batch->columns.emplace_back(field.type);
  const auto or_null = [](const auto& value, auto make) {
    return value ? make(*value) : Value::Null();
  };
  for (const TypedRow& row : rows) {
    batch->columns[0].Append(or_null(row.id, Value::Int));
    batch->columns[1].Append(or_null(row.score, Value::Double));
    batch->columns[2].Append(or_null(row.name, Value::String));
    batch->columns[3].Append(or_null(row.at_micros, Value::Timestamp));
    batch->columns[4].Append(or_null(row.day, Value::Date));
    batch->columns[5].Append(
        or_null(row.amount_cents, [](int64_t cents) { return Value::Decimal(cents, 10, 2); }));
    batch->columns[6].Append(or_null(row.flag, Value::Bool));
    batch->columns[7].Append(or_null(row.at_utc_micros, Value::TimestampTz));
  }
  batch->num_rows = static_cast<int64_t>(rows.size());
  std::string reason;
  EXPECT_TRUE(batch->Validate(&reason)) << reason;
  return batch;
}

constexpr int64_t kJan2024Micros = 1704067200LL * 1000000;  // 2024-01-01 00:00:00
constexpr int32_t kJan2024Days = 19723;

// ids first..last, every column a function of the id (names longer than Iceberg's 16-character
// bounds, so that the bounds are truncated).
std::vector<TypedRow> TypedRows(int64_t first, int64_t last) {
  std::vector<TypedRow> rows;
  for (int64_t id = first; id <= last; ++id) {
    rows.push_back({id, static_cast<double>(id) / 2, fmt::format("{:05}-row-with-a-long-name", id),
                    kJan2024Micros + id * 3600LL * 1000000,
                    kJan2024Days + static_cast<int32_t>(id / 10), id * 125, id % 2 == 0,
                    kJan2024Micros + id * 3600LL * 1000000});
  }
  return rows;
}

class LakePruning : public ::testing::Test {
 protected:
  // Five landings, one data file each, then live rows not landed:
  //   file 0: ids 1..100;  file 1: ids 101..200 with a NaN score;  file 2: ids 201..300 whose
  //   score, name and amount are all NULL;  file 3: ids 301..310 and rows with a NULL id;
  //   file 4: ids 50..60 again (overlapping file 0's range, as appends may).
  //   live: ids 1000..1004.
  void SetUp() override {
    Result<std::unique_ptr<LakeWriter>> writer =
        LakeWriter::Open({.pipeline = "p",
                          .warehouse = "file://" + dir_.Sub("warehouse"),
                          .table_namespace = std::string(kTableNamespace)});
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    std::vector<TypedRow> nan_file = TypedRows(101, 200);
    nan_file[10].score = std::nan("");
    std::vector<TypedRow> null_file = TypedRows(201, 300);
    for (TypedRow& row : null_file) {
      row.score = std::nullopt;
      row.name = std::nullopt;
      row.amount_cents = std::nullopt;
    }
    std::vector<TypedRow> null_ids = TypedRows(301, 310);
    null_ids.push_back(
        {std::nullopt, 1.0, "no-id", kJan2024Micros, kJan2024Days, 1, true, kJan2024Micros});
    const std::vector<std::vector<TypedRow>> files = {TypedRows(1, 100), nan_file, null_file,
                                                      null_ids, TypedRows(50, 60)};
    for (uint64_t segment = 1; segment <= files.size(); ++segment) {
      const Landing landing = PlanLakeLanding("p", kInstance, "typed", {{segment, 0}});
      Result<LandingOutcome> outcome =
          (*writer)->Land(landing, TypedSchema(), {TypedBatch(files[segment - 1])});
      ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
      snapshot_ = outcome->snapshot;
    }
    Result<query::LandedRows> landed = LandedRowsOf(snapshot_);
    ASSERT_TRUE(landed.ok()) << landed.status().ToString();
    ASSERT_EQ(landed->data_files.size(), files.size());
    query::TableSource table{"p", "typed", TypedSchema().fields,
                             query::BatchList::InMemory({TypedBatch(TypedRows(1000, 1004))})};
    table.landed = *landed;
    Result<std::unique_ptr<query::Engine>> engine = query::Engine::Open();
    ASSERT_TRUE(engine.ok());
    engine_ = std::move(engine).value();
    ASSERT_TRUE(engine_->RegisterTable(std::move(table)).ok());
  }

  // The statement's result as text rows, sorted, and how many landed files it read.
  std::pair<std::vector<std::string>, int64_t> Run(const std::string& sql) {
    const int64_t before = engine_->scan_counters().landed_files_read;
    Result<query::QueryResult> result = engine_->Run(sql);
    std::vector<std::string> rows;
    if (!result.ok()) {
      rows.push_back("error: " + std::string(result.status().message()));
    } else {
      for (const auto& row : result->rows) {
        std::string text;
        for (const auto& value : row) text += value.value_or("NULL") + "|";
        rows.push_back(text);
      }
    }
    std::sort(rows.begin(), rows.end());
    return {rows, engine_->scan_counters().landed_files_read - before};
  }

  // The rows of `SELECT * FROM p.typed` passing `where`, read with and without pruning (a
  // subquery hides the filter from it): the same rows; returns the files the pruned run read.
  int64_t ExpectSameRows(const std::string& where) {
    const std::string columns = R"(id, score, name, "at", "day", amount, flag, at_utc)";
    const auto [pruned, files_read] =
        Run(fmt::format("SELECT {} FROM p.typed WHERE {}", columns, where));
    const auto [whole, all_files] =
        Run(fmt::format("SELECT {} FROM (SELECT * FROM p.typed) typed WHERE {}", columns, where));
    EXPECT_EQ(all_files, 5) << where;
    EXPECT_EQ(pruned, whole) << where;
    return files_read;
  }

  TempDir dir_;
  LandedSnapshot snapshot_;
  std::unique_ptr<query::Engine> engine_;
};

TEST_F(LakePruning, AFilterReadsOnlyTheFilesWhoseStatisticsItCannotRuleOut) {
  EXPECT_EQ(ExpectSameRows("id BETWEEN 150 AND 160"), 1);
  EXPECT_EQ(ExpectSameRows("id = 55"), 2);  // files 0 and 4 overlap
  EXPECT_EQ(ExpectSameRows("id = 5 OR id = 250"), 2);
  EXPECT_EQ(ExpectSameRows("id IN (7, 305, 999)"), 2);
  EXPECT_EQ(ExpectSameRows("id > 300"), 1);
  EXPECT_EQ(ExpectSameRows("id >= 1000"), 0);                   // only the live rows
  EXPECT_EQ(ExpectSameRows("id < 2 AND name LIKE 'row%'"), 1);  // LIKE decides nothing, id does
  EXPECT_EQ(ExpectSameRows("id IS NULL"), 1);
  EXPECT_EQ(ExpectSameRows("name IS NULL"), 1);
  EXPECT_EQ(ExpectSameRows("score IS NOT NULL"), 4);
  // Truncated string bounds still bound.
  EXPECT_EQ(ExpectSameRows("name = '00150-row-with-a-long-name'"), 1);
  EXPECT_EQ(ExpectSameRows("name > '00305-row-with-a-long-name'"), 1);  // file 3 ('no-id' too)
  EXPECT_EQ(ExpectSameRows("\"at\" >= TIMESTAMP '2024-01-13 00:00:00'"), 2);  // ids >= 288
  EXPECT_EQ(ExpectSameRows("\"day\" = DATE '2024-01-01'"), 2);  // ids < 10, and file 3's 'no-id'
  EXPECT_EQ(ExpectSameRows("at_utc >= TIMESTAMPTZ '2024-01-13 00:00:00+00'"), 2);
  EXPECT_EQ(ExpectSameRows("amount > 375.00"), 1);  // ids > 300 (file 2's amounts are NULL)
  EXPECT_EQ(ExpectSameRows("flag = false AND id < 100"), 2);
  // The NaN in file 1 keeps it for any comparison of score; file 2's scores are all NULL.
  EXPECT_EQ(ExpectSameRows("score > 1000"), 1);
  EXPECT_EQ(ExpectSameRows("score = 'NaN'::DOUBLE"), 1);
}

TEST_F(LakePruning, WhatCannotBeDecidedReadsEveryFile) {
  for (const std::string where :
       {"id + 0 = 5", "NOT id = 5", "id = 5 OR score + 1 > 2", "coalesce(id, 0) = 0",
        "id::VARCHAR = '5'", "score > length(name)", "id = (SELECT 5)",
        "name = 'a' COLLATE nocase"}) {
    EXPECT_EQ(ExpectSameRows(where), 5) << where;
  }
}

// Columns compared with constants of other types, as DuckDB casts them: the same rows.
TEST_F(LakePruning, ConstantsOfOtherTypesCompareAsDuckDbCastsThem) {
  for (const std::string where :
       {"id = '150'",
        "id > 150.5",
        "id < 1.5e2",
        "score = 75",
        "score <= 50.25",
        "\"at\" > DATE '2024-01-12'",
        "\"day\" >= TIMESTAMP '2024-01-10 12:00:00'",
        "amount = 187.5",
        "amount >= 300",
        "name < '00002-row-with-a-long-name'",
        "name >= 's'",
        "flag",
        "flag = 'true'",
        "\"day\" BETWEEN '2024-01-05' AND '2024-01-06'",
        "name IN ('no-id', 'x')",
        "\"at\" BETWEEN '2024-01-05' AND '2024-01-06'",
        "id BETWEEN 300 AND 200",
        "id = NULL",
        "id IN (NULL, 3)",
        "score = -0.0",
        "score > 'inf'::DOUBLE",
        "score < '-inf'::DOUBLE",
        "at_utc > '2024-01-12'",
        "at_utc < TIMESTAMP '2024-01-02 00:00:00'",
        "at_utc BETWEEN TIMESTAMPTZ '2024-01-05 01:00:00+01' AND '2024-01-06'"}) {
    ExpectSameRows(where);
  }
}

TEST_F(LakePruning, EveryReferenceOfTheStatementIsServed) {
  // Two references with their own filters: the view reads what either needs.
  const auto [self_join, files] =
      Run("SELECT a.id, b.id FROM p.typed a JOIN p.typed b ON a.id + 100 = b.id "
          "WHERE a.id = 5 AND b.id = 105");
  EXPECT_EQ(self_join, std::vector<std::string>{"5|105|"});
  EXPECT_EQ(files, 2);
  // One reference without a filter: every file.
  const auto [union_all, all] =
      Run("SELECT count(*) FROM (SELECT id FROM p.typed WHERE id = 5 UNION ALL SELECT id FROM "
          "p.typed)");
  EXPECT_EQ(union_all, std::vector<std::string>{"328|"});
  EXPECT_EQ(all, 5);
  // A filter in a CTE, and the next statement reads every file again.
  EXPECT_EQ(Run("WITH f AS (SELECT * FROM p.typed WHERE id > 300) SELECT count(*) FROM f").second,
            1);
  EXPECT_EQ(Run("SELECT count(*) FROM p.typed").first, std::vector<std::string>{"327|"});
}

TEST_F(LakePruning, JoinsPruneOnlyWhereTheFilterRemovesTheSameRows) {
  // A second table, in the WAL only: p.other holds ids 5, 250 and 999.
  auto other = std::make_shared<Batch>();
  other->namespace_name = "other";
  other->fields = {Field{1, "id", LogicalType::Long(), true}};
  other->columns.emplace_back(LogicalType::Long());
  for (int64_t id : {5, 250, 999}) other->columns[0].Append(Value::Int(id));
  other->num_rows = 3;
  ASSERT_TRUE(
      engine_->RegisterTable({"p", "other", other->fields, query::BatchList::InMemory({other})})
          .ok());
  // A null-rejecting filter on the outer side of a LEFT JOIN prunes it: only matched rows pass.
  const auto [left, files] =
      Run("SELECT o.id, t.id FROM p.other o LEFT JOIN p.typed t ON o.id = t.id WHERE t.id > 200");
  EXPECT_EQ(left, std::vector<std::string>{"250|250|"});
  EXPECT_EQ(files, 2);  // files 2 and 3
  // IS NULL under an outer join also keeps the rows without a match: not a filter on t's files.
  const auto [unmatched, all] =
      Run("SELECT o.id FROM p.other o LEFT JOIN p.typed t ON o.id = t.id WHERE t.id IS NULL");
  EXPECT_EQ(unmatched, std::vector<std::string>{"999|"});
  EXPECT_EQ(all, 5);
  // Unqualified columns in a join may be either table's: no pruning from them.
  EXPECT_EQ(
      Run("SELECT count(*) FROM p.typed a, (SELECT 1 AS one) o WHERE id = 5 AND one = 1").second,
      5);
  // An ASOF join's match would change: nothing pruned.
  const std::string asof =
      "SELECT o.id, t.id FROM p.other o ASOF JOIN p.typed t ON o.id >= t.id WHERE t.id < 100";
  const auto [nearest, asof_files] = Run(asof);
  EXPECT_EQ(nearest, std::vector<std::string>{"5|5|"});
  EXPECT_EQ(asof_files, 5);
}

}  // namespace
}  // namespace skippr::lake
