// The Skippr Store in a DynamoDB table (docs/formats/store.md, "On DynamoDB"): the four families
// as versioned items, a head item per pipeline whose conditional update is the commit point and
// whose lease fences every writer but one.
//
//   pk {P}                 sk store#head            format_version, instance_id, commit, reserved,
//                                                   lease_*
//   pk {P}                 sk store#void#{c}        to, voided_at_ms: commits c..to never visible
//   pk {P}#commit          sk {c}[#part]            epoch, written_at_ms, parts, keys (B)
//   pk {P}#v#{family}      sk {hex key}#{c}         v (B) | tomb, chunks
//   pk {P}#chunk#{family}  sk {hex key}#{c}#{i}     v (B): the value's bytes past the first chunk
//
// {P} is "{tenant}#{workspace}#{pipeline}", {c} a commit number in 16 hex digits. A commit writes
// its key list (the intent), then its versions, then moves the head's `commit` to c on the
// condition that this writer still holds the lease: nothing is visible before that update and all
// of it after. A reader pins head.commit and reads, per key, the newest version at or below it
// whose commit is not void. A writer uses only numbers it reserved in the head first (64 at a
// time), so the versions of an attempt that never reached the head (a crash, a lost lease) sit at
// a number in (commit, reserved], which the next writer voids before it commits past it. A
// writer's own failed attempt is voided at once. Superseded versions are
// deleted an hour after the commit that superseded them; a reader older than half that refuses.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "aws/aws.hpp"
#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/environment.hpp"
#include "core/hash.hpp"
#include "core/random.hpp"
#include "store/internal/backend.hpp"
#include "store/store.hpp"

namespace skippr::store {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDynamoFormatVersion = 1;
// Keys are written in hex in a sort key (1024 bytes at most, with the commit suffix).
constexpr size_t kMaxKeyBytes = 480;
// A value is split into items of this many bytes (an item holds 400 KB at most).
constexpr size_t kChunkBytes = 300'000;
// An intent item holds key lists of about this many bytes per part.
constexpr size_t kIntentPartBytes = 300'000;
// Superseded versions and void commits are cleaned this long after the fact; a snapshot older than
// half of it is refused, so no reader can need what is cleaned.
constexpr auto kCleanupGrace = std::chrono::hours(1);
constexpr auto kMaxSnapshotAge = std::chrono::minutes(30);
constexpr int kIntentsCleanedPerCommit = 4;
// Commit numbers a writer reserves in the head at a time.
constexpr uint64_t kCommitsReserved = 64;

json Text(std::string_view text) { return {{"S", std::string(text)}}; }
json Number(uint64_t number) { return {{"N", std::to_string(number)}}; }
json Bytes(std::string_view bytes) { return {{"B", Base64Encode(bytes)}}; }

uint64_t NumberOf(const json& item, const char* name) {
  if (!item.contains(name)) return 0;
  return std::stoull(item[name]["N"].get<std::string>());
}

std::string CommitHex(uint64_t commit) { return fmt::format("{:016x}", commit); }

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FamilyTag(Family family) { return std::string(FamilyName(family)); }

// "{hex key}#{commit}" → its parts.
struct VersionKey {
  std::string hex_key;
  uint64_t commit = 0;
};

Result<VersionKey> ParseVersionKey(const std::string& sk) {
  const size_t hash = sk.rfind('#');
  if (hash == std::string::npos || sk.size() - hash - 1 != 16) {
    return Status::Corruption(fmt::format("store item with sort key '{}' is no version", sk));
  }
  return VersionKey{sk.substr(0, hash), std::stoull(sk.substr(hash + 1), nullptr, 16)};
}

// The intent's key list: per key its family byte, a 2-byte length and the key.
void AppendIntentKey(std::string& list, Family family, std::string_view key) {
  list.push_back(static_cast<char>(family));
  list.push_back(static_cast<char>(key.size() >> 8));
  list.push_back(static_cast<char>(key.size() & 0xff));
  list.append(key);
}

Result<std::vector<std::pair<Family, std::string>>> ParseIntentKeys(std::string_view list) {
  std::vector<std::pair<Family, std::string>> keys;
  size_t at = 0;
  while (at < list.size()) {
    if (list.size() - at < 3 || static_cast<uint8_t>(list[at]) >= kFamilyCount) {
      return Status::Corruption("a store intent's key list is damaged");
    }
    const auto family = static_cast<Family>(list[at]);
    const size_t length =
        (static_cast<uint8_t>(list[at + 1]) << 8) | static_cast<uint8_t>(list[at + 2]);
    if (list.size() - at - 3 < length) {
      return Status::Corruption("a store intent's key list is damaged");
    }
    keys.emplace_back(family, std::string(list.substr(at + 3, length)));
    at += 3 + length;
  }
  return keys;
}

// A pool of clients (one is not thread-safe); each request borrows one.
class ClientPool {
 public:
  ClientPool(aws::DynamoOptions options, MapEnvironment environment)
      : options_(std::move(options)), environment_(std::move(environment)) {}

  Result<json> Call(std::string_view action, const json& request) {
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<aws::DynamoClient> client, Take());
    Result<json> answer = client->Call(action, request);
    Give(std::move(client));
    return answer;
  }
  Status BatchWrite(const std::string& table, const std::vector<json>& requests) {
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<aws::DynamoClient> client, Take());
    Status written = client->BatchWrite(table, requests);
    Give(std::move(client));
    return written;
  }
  Status EnsureTable(const std::string& table) {
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<aws::DynamoClient> client, Take());
    Status ensured = client->EnsureTable(table, "pk", "sk");
    endpoint_ = client->endpoint();
    Give(std::move(client));
    return ensured;
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  Result<std::unique_ptr<aws::DynamoClient>> Take() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<aws::DynamoClient> client = std::move(idle_.back());
        idle_.pop_back();
        return client;
      }
    }
    return aws::DynamoClient::Open(options_, environment_);
  }
  void Give(std::unique_ptr<aws::DynamoClient> client) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(client));
  }

  aws::DynamoOptions options_;
  MapEnvironment environment_;
  std::string endpoint_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<aws::DynamoClient>> idle_;
};

// Void commit numbers: from → to, both included.
using VoidRanges = std::map<uint64_t, uint64_t>;

bool IsVoid(const VoidRanges& voids, uint64_t commit) {
  auto after = voids.upper_bound(commit);
  if (after == voids.begin()) return false;
  return std::prev(after)->second >= commit;
}

// What a snapshot sees: commits up to `commit`, except the void ones.
struct ReadView {
  uint64_t commit = 0;
  VoidRanges voids;
  Clock::time_point taken = Clock::now();

  bool Sees(uint64_t version) const { return version <= commit && !IsVoid(voids, version); }
};

struct HeadItem {
  uint64_t format_version = 0;
  std::string instance_id;
  uint64_t commit = 0;
  uint64_t reserved = 0;  // the greatest commit number the lease holder may use
  uint64_t lease_epoch = 0;
  uint64_t lease_heartbeat = 0;
  std::string lease_owner;
  bool lease_released = false;
};

// Everything the store's snapshots, sessions and lease share; outlives the Store while a
// transaction lives.
class Shared {
 public:
  Shared(DynamoStoreOptions options, MapEnvironment environment)
      : options_(std::move(options)),
        pool_(options_.dynamodb, std::move(environment)),
        pk_(options_.pipeline_key) {}
  ~Shared() { StopLease(); }

  const DynamoStoreOptions& options() const { return options_; }
  const std::string& description() const { return description_; }
  const StoreIdentity& identity() const { return identity_; }

  Status Open();
  Status AcquireLease();
  void StopLease();
  Result<ReadView> TakeView();

  // Reads at `view`.
  Result<std::optional<std::string>> Get(const ReadView& view, Family family, std::string_view key);
  Status Scan(const ReadView& view, Family family, std::string_view prefix, std::string_view start,
              const ScanVisitor& visit);
  Result<std::optional<std::string>> LastKey(const ReadView& view, Family family,
                                             std::string_view prefix);
  Status CheckKey(Family family, std::string_view key, std::string_view operation) const;

  // The writer's side: one session at a time (BeginWrite waits for the mutex).
  std::mutex& writer_mutex() { return writer_mutex_; }
  ReadView WriterView() const {
    std::lock_guard lock(state_mutex_);
    return ReadView{last_commit_, voids_, Clock::now()};
  }
  Status CheckWritable() const;
  uint64_t LeaseEpoch() const {
    std::lock_guard lock(state_mutex_);
    return lease_epoch_;
  }
  Status Commit(const std::map<std::pair<Family, std::string>, std::optional<std::string>>& writes);
  std::optional<std::thread::id>& writer_thread() { return writer_thread_; }
  std::mutex& writer_thread_mutex() { return writer_thread_mutex_; }

 private:
  json HeadKey() const { return {{"pk", Text(pk_)}, {"sk", Text("store#head")}}; }
  std::string FamilyPk(Family family) const { return pk_ + "#v#" + FamilyTag(family); }
  std::string ChunkPk(Family family) const { return pk_ + "#chunk#" + FamilyTag(family); }
  std::string CommitPk() const { return pk_ + "#commit"; }

  Status Failed(std::string_view what, const Status& status) const {
    return Status(status.code(),
                  fmt::format("store {}: {}: {}", description_, what, status.message()));
  }
  Result<std::optional<HeadItem>> ReadHead();
  Result<VoidRanges> ReadVoids();
  Status CreateHead();
  Status TakeLeaseFrom(const HeadItem& seen, bool was_released);
  Status VoidCommits(uint64_t from, uint64_t to);
  Status Reserve();
  void Heartbeat();

  // Visits a Query's items page by page until `visit` says false.
  Status QueryItems(json request, const std::function<Result<bool>(const json& item)>& visit);
  Result<std::string> ValueOf(const json& item, Family family, const VersionKey& version);
  Status CheckSnapshotAge(const ReadView& view) const;

  Status WriteIntent(
      uint64_t commit,
      const std::map<std::pair<Family, std::string>, std::optional<std::string>>& writes);
  Status WriteVersions(
      uint64_t commit,
      const std::map<std::pair<Family, std::string>, std::optional<std::string>>& writes);
  Status MoveHead(uint64_t commit);
  void CleanUp(uint64_t below_commit);
  Status CleanIntent(const json& intent);
  Status DeleteVoids(uint64_t from);
  void CleanVoidsWithoutIntent();

  DynamoStoreOptions options_;
  ClientPool pool_;
  std::string pk_;
  std::string description_;
  StoreIdentity identity_;

  std::mutex writer_mutex_;  // held by the open write session
  std::mutex writer_thread_mutex_;
  std::optional<std::thread::id> writer_thread_;

  mutable std::mutex state_mutex_;  // guards what follows
  bool holds_lease_ = false;
  uint64_t lease_epoch_ = 0;
  uint64_t last_commit_ = 0;
  uint64_t next_commit_ = 1;
  uint64_t reserved_ = 0;
  VoidRanges voids_;
  Status broken_;  // set: no more writes in this process (lease lost, outcome unknown)

  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_wake_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

Status Shared::Open() {
  description_ = fmt::format("DynamoDB table '{}' (pipeline '{}')", options_.table, pk_);
  if (options_.table.empty()) {
    return Status::InvalidArgument("a DynamoDB store needs a table (skippr.store.name)");
  }
  if (options_.takes_writer_lease) {
    if (Status ensured = pool_.EnsureTable(options_.table); !ensured.ok()) {
      return Failed("cannot create or open the table", ensured);
    }
    return AcquireLease();
  }
  SKIPPR_ASSIGN_OR_RETURN(std::optional<HeadItem> head, ReadHead());
  if (!head) {
    return Status::NotFound(
        fmt::format("store {}: the pipeline has no state in the table yet", description_));
  }
  identity_.instance_id = head->instance_id;
  return Status::OK();
}

Result<std::optional<HeadItem>> Shared::ReadHead() {
  Result<json> got = pool_.Call(
      "GetItem", {{"TableName", options_.table}, {"Key", HeadKey()}, {"ConsistentRead", true}});
  if (!got.ok()) return Failed("reading the head item", got.status());
  if (!got->contains("Item")) return std::optional<HeadItem>();
  const json& item = (*got)["Item"];
  HeadItem head;
  head.format_version = NumberOf(item, "format_version");
  head.instance_id = item.value("instance_id", json{{"S", ""}})["S"].get<std::string>();
  head.commit = NumberOf(item, "commit");
  head.reserved = NumberOf(item, "reserved");
  head.lease_epoch = NumberOf(item, "lease_epoch");
  head.lease_heartbeat = NumberOf(item, "lease_heartbeat");
  head.lease_owner = item.value("lease_owner", json{{"S", ""}})["S"].get<std::string>();
  head.lease_released = item.value("lease_released", json{{"BOOL", false}})["BOOL"].get<bool>();
  if (head.format_version > kDynamoFormatVersion) {
    return Status::NotSupported(
        fmt::format("store {} is format {}, newer than this skipprd reads ({}); upgrade skipprd",
                    description_, head.format_version, kDynamoFormatVersion));
  }
  return std::optional<HeadItem>(std::move(head));
}

Result<VoidRanges> Shared::ReadVoids() {
  VoidRanges voids;
  SKIPPR_RETURN_IF_ERROR(QueryItems(
      {{"TableName", options_.table},
       {"ConsistentRead", true},
       {"KeyConditionExpression", "pk = :pk AND begins_with(sk, :prefix)"},
       {"ExpressionAttributeValues", {{":pk", Text(pk_)}, {":prefix", Text("store#void#")}}}},
      [&](const json& item) -> Result<bool> {
        const std::string sk = item["sk"]["S"].get<std::string>();
        const uint64_t from = std::stoull(sk.substr(sk.rfind('#') + 1), nullptr, 16);
        voids[from] = std::max(from, NumberOf(item, "to"));
        return true;
      }));
  return voids;
}

std::string LeaseOwner() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("{} pid {}", host, ::getpid());
}

Status Shared::CreateHead() {
  SKIPPR_ASSIGN_OR_RETURN(identity_.instance_id, RandomHex(16));
  Result<json> put = pool_.Call("PutItem", {{"TableName", options_.table},
                                            {"Item",
                                             {{"pk", Text(pk_)},
                                              {"sk", Text("store#head")},
                                              {"format_version", Number(kDynamoFormatVersion)},
                                              {"instance_id", Text(identity_.instance_id)},
                                              {"commit", Number(0)},
                                              {"reserved", Number(kCommitsReserved)},
                                              {"lease_epoch", Number(1)},
                                              {"lease_heartbeat", Number(0)},
                                              {"lease_owner", Text(LeaseOwner())},
                                              {"lease_released", {{"BOOL", false}}}}},
                                            {"ConditionExpression", "attribute_not_exists(pk)"}});
  SKIPPR_RETURN_IF_ERROR(put.status());
  std::lock_guard lock(state_mutex_);
  holds_lease_ = true;
  lease_epoch_ = 1;
  last_commit_ = 0;
  next_commit_ = 1;
  reserved_ = kCommitsReserved;
  return Status::OK();
}

Status Shared::AcquireLease() {
  for (int attempt = 0; attempt < 8; ++attempt) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<HeadItem> head, ReadHead());
    Status taken;
    if (!head) {
      taken = CreateHead();
    } else if (head->lease_released) {
      taken = TakeLeaseFrom(*head, /*was_released=*/true);
    } else {
      // Held: it is ours to take only if its heartbeat stays still for a whole lease period of
      // this machine's monotonic clock (no wall clocks compared across machines).
      const Clock::time_point since = Clock::now();
      const auto period = options_.lease_duration;
      while (Clock::now() - since < period) {
        std::this_thread::sleep_for(std::min<Clock::duration>(period / 6, period));
        SKIPPR_ASSIGN_OR_RETURN(std::optional<HeadItem> now, ReadHead());
        if (!now || now->lease_epoch != head->lease_epoch ||
            now->lease_heartbeat != head->lease_heartbeat || now->lease_released) {
          if (now && !now->lease_released && now->lease_epoch == head->lease_epoch) {
            return Status::Unavailable(fmt::format(
                "pipeline writer lease unavailable: {} holds it in {} and its heartbeat is "
                "advancing; stop that skipprd first (or wait for it to finish)",
                now->lease_owner, description_));
          }
          head.reset();
          break;
        }
      }
      if (!head) continue;  // it changed hands or was released: look again
      taken = TakeLeaseFrom(*head, /*was_released=*/false);
    }
    if (taken.code() == StatusCode::kConflict) continue;  // raced with another taker
    SKIPPR_RETURN_IF_ERROR(taken);
    heartbeat_ = std::thread([this] { Heartbeat(); });
    return Status::OK();
  }
  return Status::Unavailable(fmt::format(
      "pipeline writer lease unavailable: other writers keep taking it in {}", description_));
}

Status Shared::TakeLeaseFrom(const HeadItem& seen, bool was_released) {
  identity_.instance_id = seen.instance_id;
  const uint64_t epoch = seen.lease_epoch + 1;
  // Every number the previous holder may have written at is behind us; ours start past them.
  const uint64_t first = std::max(seen.commit, seen.reserved) + 1;
  const uint64_t reserved = first + kCommitsReserved - 1;
  json values = {{":seen_epoch", Number(seen.lease_epoch)},
                 {":seen_commit", Number(seen.commit)},
                 {":seen_reserved", Number(seen.reserved)},
                 {":reserved", Number(reserved)},
                 {":epoch", Number(epoch)},
                 {":owner", Text(LeaseOwner())},
                 {":zero", Number(0)},
                 {":false", {{"BOOL", false}}}};
  // The commit and reservation too: what is voided below is decided by the head as it is taken (a
  // holder whose heartbeat thread stalled may still have committed while it was watched).
  std::string condition =
      "lease_epoch = :seen_epoch AND #commit = :seen_commit AND reserved = :seen_reserved";
  if (was_released) {
    condition += " AND lease_released = :true";
    values[":true"] = {{"BOOL", true}};
  } else {
    condition += " AND lease_heartbeat = :seen_heartbeat";
    values[":seen_heartbeat"] = Number(seen.lease_heartbeat);
  }
  Result<json> updated = pool_.Call(
      "UpdateItem", {{"TableName", options_.table},
                     {"Key", HeadKey()},
                     {"UpdateExpression",
                      "SET lease_epoch = :epoch, lease_owner = :owner, lease_heartbeat = :zero, "
                      "lease_released = :false, reserved = :reserved"},
                     {"ConditionExpression", condition},
                     {"ExpressionAttributeNames", {{"#commit", "commit"}}},
                     {"ExpressionAttributeValues", values}});
  SKIPPR_RETURN_IF_ERROR(updated.status());
  {
    std::lock_guard lock(state_mutex_);
    holds_lease_ = true;
    lease_epoch_ = epoch;
    last_commit_ = seen.commit;
    reserved_ = reserved;
  }
  // Whatever an earlier holder left past the head (an attempt that never reached it, or one still
  // in flight from a writer that lost the lease) is void before anything of ours is committed.
  if (first > seen.commit + 1) SKIPPR_RETURN_IF_ERROR(VoidCommits(seen.commit + 1, first - 1));
  SKIPPR_ASSIGN_OR_RETURN(VoidRanges voids, ReadVoids());
  std::lock_guard lock(state_mutex_);
  voids_ = std::move(voids);
  next_commit_ = first;
  return Status::OK();
}

Status Shared::Reserve() {
  const uint64_t epoch = LeaseEpoch();
  uint64_t old_reserved = 0;
  {
    std::lock_guard lock(state_mutex_);
    old_reserved = reserved_;
  }
  const uint64_t reserved = old_reserved + kCommitsReserved;
  Result<json> updated = pool_.Call(
      "UpdateItem", {{"TableName", options_.table},
                     {"Key", HeadKey()},
                     {"UpdateExpression", "SET reserved = :reserved"},
                     {"ConditionExpression",
                      "lease_epoch = :epoch AND lease_released = :false AND reserved = :old"},
                     {"ExpressionAttributeValues",
                      {{":reserved", Number(reserved)},
                       {":epoch", Number(epoch)},
                       {":old", Number(old_reserved)},
                       {":false", {{"BOOL", false}}}}}});
  if (!updated.ok()) {
    // Unsure whether the head took it: no more writes, the next writer settles it.
    std::lock_guard lock(state_mutex_);
    broken_ = Failed("reserving commit numbers", updated.status());
    return broken_;
  }
  std::lock_guard lock(state_mutex_);
  reserved_ = reserved;
  return Status::OK();
}

Status Shared::VoidCommits(uint64_t from, uint64_t to) {
  Result<json> put =
      pool_.Call("PutItem", {{"TableName", options_.table},
                             {"Item",
                              {{"pk", Text(pk_)},
                               {"sk", Text("store#void#" + CommitHex(from))},
                               {"to", Number(to)},
                               {"voided_at_ms", Number(static_cast<uint64_t>(WallMs()))}}}});
  if (!put.ok()) return Failed(fmt::format("voiding commits {} to {}", from, to), put.status());
  std::lock_guard lock(state_mutex_);
  voids_[from] = to;
  return Status::OK();
}

void Shared::Heartbeat() {
  std::unique_lock lock(heartbeat_mutex_);
  while (!heartbeat_wake_.wait_for(lock, options_.lease_duration / 3, [&] { return stopping_; })) {
    lock.unlock();
    const uint64_t epoch = LeaseEpoch();
    Result<json> beat = pool_.Call(
        "UpdateItem",
        {{"TableName", options_.table},
         {"Key", HeadKey()},
         {"UpdateExpression", "ADD lease_heartbeat :one"},
         {"ConditionExpression", "lease_epoch = :epoch AND lease_released = :false"},
         {"ExpressionAttributeValues",
          {{":one", Number(1)}, {":epoch", Number(epoch)}, {":false", {{"BOOL", false}}}}}});
    if (beat.status().code() == StatusCode::kConflict) {
      spdlog::error(
          "store {}: the pipeline writer lease was taken by another writer; this "
          "process commits nothing more",
          description_);
      std::lock_guard state(state_mutex_);
      broken_ = Status::Conflict(fmt::format(
          "store {}: the pipeline writer lease was lost to another writer", description_));
      return;
    }
    if (!beat.ok())
      spdlog::warn("store {}: lease heartbeat failed: {}", description_, beat.status().message());
    lock.lock();
  }
}

void Shared::StopLease() {
  if (!heartbeat_.joinable()) return;
  {
    std::lock_guard lock(heartbeat_mutex_);
    stopping_ = true;
  }
  heartbeat_wake_.notify_all();
  heartbeat_.join();
  uint64_t epoch = 0;
  {
    std::lock_guard lock(state_mutex_);
    if (!broken_.ok() || !holds_lease_) return;  // uncertain: let the lease expire instead
    epoch = lease_epoch_;
  }
  Result<json> released = pool_.Call(
      "UpdateItem",
      {{"TableName", options_.table},
       {"Key", HeadKey()},
       {"UpdateExpression", "SET lease_released = :true"},
       {"ConditionExpression", "lease_epoch = :epoch"},
       {"ExpressionAttributeValues", {{":true", {{"BOOL", true}}}, {":epoch", Number(epoch)}}}});
  if (!released.ok()) {
    spdlog::warn(
        "store {}: could not release the writer lease ({}); the next writer waits for it "
        "to expire",
        description_, released.status().message());
  }
}

Result<ReadView> Shared::TakeView() {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<HeadItem> head, ReadHead());
  if (!head) return Status::NotFound(fmt::format("store {} has no head item", description_));
  ReadView view;
  view.commit = head->commit;
  SKIPPR_ASSIGN_OR_RETURN(view.voids, ReadVoids());
  return view;
}

Status Shared::CheckSnapshotAge(const ReadView& view) const {
  if (Clock::now() - view.taken <= kMaxSnapshotAge) return Status::OK();
  return Status::Unavailable(fmt::format(
      "store {}: this read has pinned commit {} for over {} minutes, longer than a DynamoDB store "
      "keeps what later commits replaced; run it again",
      description_, view.commit,
      std::chrono::duration_cast<std::chrono::minutes>(kMaxSnapshotAge).count()));
}

Status Shared::CheckKey(Family family, std::string_view key, std::string_view operation) const {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument(fmt::format(
        "store {}: {} in family '{}' was given a key of {} bytes; keys are 1 to {} bytes here",
        description_, operation, FamilyName(family), key.size(), kMaxKeyBytes));
  }
  return Status::OK();
}

Status Shared::QueryItems(json request,
                          const std::function<Result<bool>(const json& item)>& visit) {
  request["TableName"] = options_.table;
  request["ConsistentRead"] = true;
  while (true) {
    Result<json> page = pool_.Call("Query", request);
    if (!page.ok()) return Failed("reading", page.status());
    for (const json& item : page->value("Items", json::array())) {
      SKIPPR_ASSIGN_OR_RETURN(const bool more, visit(item));
      if (!more) return Status::OK();
    }
    if (!page->contains("LastEvaluatedKey")) return Status::OK();
    request["ExclusiveStartKey"] = (*page)["LastEvaluatedKey"];
  }
}

Result<std::string> Shared::ValueOf(const json& item, Family family, const VersionKey& version) {
  std::optional<std::string> value = Base64Decode(item["v"]["B"].get<std::string>());
  if (!value)
    return Status::Corruption(fmt::format("store {}: a value is not base64", description_));
  const uint64_t chunks = NumberOf(item, "chunks");
  for (uint64_t chunk = 1; chunk < chunks; ++chunk) {
    Result<json> got =
        pool_.Call("GetItem", {{"TableName", options_.table},
                               {"Key",
                                {{"pk", Text(ChunkPk(family))},
                                 {"sk", Text(fmt::format("{}#{}#{:04x}", version.hex_key,
                                                         CommitHex(version.commit), chunk))}}},
                               {"ConsistentRead", true}});
    if (!got.ok()) return Failed("reading a value", got.status());
    if (!got->contains("Item")) {
      return Status::Corruption(
          fmt::format("store {}: chunk {} of a value in family '{}' is missing", description_,
                      chunk, FamilyName(family)));
    }
    std::optional<std::string> piece = Base64Decode((*got)["Item"]["v"]["B"].get<std::string>());
    if (!piece) return Status::Corruption("a value chunk is not base64");
    value->append(*piece);
  }
  return std::move(*value);
}

Result<std::optional<std::string>> Shared::Get(const ReadView& view, Family family,
                                               std::string_view key) {
  SKIPPR_RETURN_IF_ERROR(CheckKey(family, key, "get"));
  const std::string hex = HexEncode(key);
  std::optional<json> found;
  VersionKey found_version;
  SKIPPR_RETURN_IF_ERROR(
      QueryItems({{"KeyConditionExpression", "pk = :pk AND sk BETWEEN :low AND :high"},
                  {"ExpressionAttributeValues",
                   {{":pk", Text(FamilyPk(family))},
                    {":low", Text(hex + "#" + CommitHex(0))},
                    {":high", Text(hex + "#" + CommitHex(view.commit))}}},
                  {"ScanIndexForward", false},
                  {"Limit", 8}},  // the newest visible version is almost always the first
                 [&](const json& item) -> Result<bool> {
                   SKIPPR_ASSIGN_OR_RETURN(VersionKey version,
                                           ParseVersionKey(item["sk"]["S"].get<std::string>()));
                   if (!view.Sees(version.commit)) return true;
                   found = item;
                   found_version = std::move(version);
                   return false;
                 }));
  SKIPPR_RETURN_IF_ERROR(CheckSnapshotAge(view));
  if (!found || found->contains("tomb")) return std::optional<std::string>();
  SKIPPR_ASSIGN_OR_RETURN(std::string value, ValueOf(*found, family, found_version));
  return std::optional<std::string>(std::move(value));
}

Status Shared::Scan(const ReadView& view, Family family, std::string_view prefix,
                    std::string_view start, const ScanVisitor& visit) {
  if (prefix.size() > kMaxKeyBytes) return Status::OK();
  const std::string from = HexEncode(start > prefix ? start : prefix);
  // Every version of a key >= `from` with the prefix: "~" sorts after hex digits and '#'.
  const std::string to = HexEncode(prefix) + "~";
  if (from > to) return CheckSnapshotAge(view);  // `start` is past every key with the prefix
  // Versions come in key order, oldest first: the last visible one of a key is its value.
  std::string current_hex;
  std::optional<json> newest;
  VersionKey newest_version;
  bool stopped = false;
  const auto flush = [&]() -> Status {
    if (!newest || newest->contains("tomb")) return Status::OK();
    SKIPPR_ASSIGN_OR_RETURN(std::string value, ValueOf(*newest, family, newest_version));
    std::optional<std::string> key = HexDecode(current_hex);
    if (!key) return Status::Corruption("a store key is not hex");
    stopped = !visit(*key, value);
    return Status::OK();
  };
  SKIPPR_RETURN_IF_ERROR(
      QueryItems({{"KeyConditionExpression", "pk = :pk AND sk BETWEEN :low AND :high"},
                  {"ExpressionAttributeValues",
                   {{":pk", Text(FamilyPk(family))}, {":low", Text(from)}, {":high", Text(to)}}}},
                 [&](const json& item) -> Result<bool> {
                   SKIPPR_ASSIGN_OR_RETURN(VersionKey version,
                                           ParseVersionKey(item["sk"]["S"].get<std::string>()));
                   if (version.hex_key != current_hex) {
                     SKIPPR_RETURN_IF_ERROR(flush());
                     if (stopped) return false;
                     current_hex = version.hex_key;
                     newest.reset();
                   }
                   if (view.Sees(version.commit)) {
                     newest = item;
                     newest_version = std::move(version);
                   }
                   return true;
                 }));
  if (!stopped) SKIPPR_RETURN_IF_ERROR(flush());
  return CheckSnapshotAge(view);
}

Result<std::optional<std::string>> Shared::LastKey(const ReadView& view, Family family,
                                                   std::string_view prefix) {
  if (prefix.size() > kMaxKeyBytes) return std::optional<std::string>();
  const std::string from = HexEncode(prefix);
  // Newest key first, each key's versions newest first: its first visible version decides.
  std::string decided_hex;
  std::optional<std::string> last;
  SKIPPR_RETURN_IF_ERROR(QueryItems(
      {{"KeyConditionExpression", "pk = :pk AND sk BETWEEN :low AND :high"},
       {"ExpressionAttributeValues",
        {{":pk", Text(FamilyPk(family))}, {":low", Text(from)}, {":high", Text(from + "~")}}},
       {"ScanIndexForward", false}},
      [&](const json& item) -> Result<bool> {
        SKIPPR_ASSIGN_OR_RETURN(VersionKey version,
                                ParseVersionKey(item["sk"]["S"].get<std::string>()));
        if (version.hex_key == decided_hex || !view.Sees(version.commit)) return true;
        decided_hex = version.hex_key;
        if (item.contains("tomb")) return true;
        last = HexDecode(version.hex_key);
        return false;
      }));
  SKIPPR_RETURN_IF_ERROR(CheckSnapshotAge(view));
  return last;
}

Status Shared::CheckWritable() const {
  std::lock_guard lock(state_mutex_);
  if (!holds_lease_) {
    return Status::Internal(fmt::format(
        "store {} was opened for reading: it takes no write transactions (a skipprd bug)",
        description_));
  }
  return broken_;
}

Status Shared::WriteIntent(
    uint64_t commit,
    const std::map<std::pair<Family, std::string>, std::optional<std::string>>& writes) {
  std::vector<std::string> parts(1);
  for (const auto& [at, value] : writes) {
    if (parts.back().size() >= kIntentPartBytes) parts.emplace_back();
    AppendIntentKey(parts.back(), at.first, at.second);
  }
  const uint64_t epoch = LeaseEpoch();
  for (size_t part = 0; part < parts.size(); ++part) {
    const std::string sk =
        part == 0 ? CommitHex(commit) : fmt::format("{}#{:04x}", CommitHex(commit), part);
    Result<json> put =
        pool_.Call("PutItem", {{"TableName", options_.table},
                               {"Item",
                                {{"pk", Text(CommitPk())},
                                 {"sk", Text(sk)},
                                 {"epoch", Number(epoch)},
                                 {"written_at_ms", Number(static_cast<uint64_t>(WallMs()))},
                                 {"parts", Number(parts.size())},
                                 {"keys", Bytes(parts[part])}}}});
    if (!put.ok())
      return Failed(fmt::format("writing the intent of commit {}", commit), put.status());
  }
  return Status::OK();
}

Status Shared::WriteVersions(
    uint64_t commit,
    const std::map<std::pair<Family, std::string>, std::optional<std::string>>& writes) {
  std::vector<json> requests;
  for (const auto& [at, value] : writes) {
    const auto& [family, key] = at;
    const std::string hex = HexEncode(key);
    json item = {{"pk", Text(FamilyPk(family))}, {"sk", Text(hex + "#" + CommitHex(commit))}};
    if (!value) {
      item["tomb"] = {{"BOOL", true}};
    } else {
      const size_t chunks = std::max<size_t>(1, (value->size() + kChunkBytes - 1) / kChunkBytes);
      item["v"] = Bytes(std::string_view(*value).substr(0, kChunkBytes));
      if (chunks > 1) item["chunks"] = Number(chunks);
      for (size_t chunk = 1; chunk < chunks; ++chunk) {
        requests.push_back(
            {{"PutRequest",
              {{"Item",
                {{"pk", Text(ChunkPk(family))},
                 {"sk", Text(fmt::format("{}#{}#{:04x}", hex, CommitHex(commit), chunk))},
                 {"v",
                  Bytes(std::string_view(*value).substr(chunk * kChunkBytes, kChunkBytes))}}}}}});
      }
    }
    requests.push_back({{"PutRequest", {{"Item", std::move(item)}}}});
  }
  if (Status written = pool_.BatchWrite(options_.table, requests); !written.ok()) {
    return Failed(fmt::format("writing the versions of commit {}", commit), written);
  }
  return Status::OK();
}

Status Shared::MoveHead(uint64_t commit) {
  const uint64_t epoch = LeaseEpoch();
  Result<json> moved = pool_.Call(
      "UpdateItem",
      {{"TableName", options_.table},
       {"Key", HeadKey()},
       {"UpdateExpression", "SET #commit = :commit"},
       {"ConditionExpression",
        "lease_epoch = :epoch AND lease_released = :false AND #commit < :commit"},
       {"ExpressionAttributeNames", {{"#commit", "commit"}}},
       {"ExpressionAttributeValues",
        {{":commit", Number(commit)}, {":epoch", Number(epoch)}, {":false", {{"BOOL", false}}}}}});
  if (moved.ok()) return Status::OK();
  // A retried request whose first try took effect fails its condition: see what the head says.
  Result<std::optional<HeadItem>> head = ReadHead();
  if (head.ok() && *head && (*head)->lease_epoch == epoch && (*head)->commit >= commit) {
    return Status::OK();
  }
  std::lock_guard lock(state_mutex_);
  if (moved.status().code() == StatusCode::kConflict && head.ok() && *head) {
    broken_ = Status::Conflict(fmt::format(
        "store {}: the pipeline writer lease was lost to {} (epoch {}); commit {} did not "
        "happen and this process commits nothing more",
        description_, (*head)->lease_owner, (*head)->lease_epoch, commit));
  } else {
    // Whether the head moved is unknown: nothing more is committed from this process, and the
    // next writer's takeover decides (it voids what follows the head it finds).
    broken_ =
        Failed(fmt::format("committing {} (outcome unknown; the next run settles it)", commit),
               moved.status());
  }
  return broken_;
}

Status Shared::Commit(
    const std::map<std::pair<Family, std::string>, std::optional<std::string>>& writes) {
  SKIPPR_RETURN_IF_ERROR(CheckWritable());
  if (writes.empty()) return Status::OK();
  uint64_t commit = 0;
  bool needs_reservation = false;
  {
    std::lock_guard lock(state_mutex_);
    commit = next_commit_;
    needs_reservation = commit > reserved_;
  }
  if (needs_reservation) SKIPPR_RETURN_IF_ERROR(Reserve());
  Status written = WriteIntent(commit, writes);
  if (written.ok()) {
    CrashPoint("store.dynamodb.after_intent");
    written = WriteVersions(commit, writes);
  }
  if (!written.ok()) {
    // The head never moved: what was written of this attempt must never become visible.
    Status voided = VoidCommits(commit, commit);
    std::lock_guard lock(state_mutex_);
    if (!voided.ok()) broken_ = voided;
    next_commit_ = commit + 1;
    return written;
  }
  CrashPoint("store.dynamodb.after_versions");
  SKIPPR_RETURN_IF_ERROR(MoveHead(commit));
  CrashPoint("store.dynamodb.after_head");
  {
    std::lock_guard lock(state_mutex_);
    last_commit_ = commit;
    next_commit_ = commit + 1;
  }
  CleanUp(commit);
  return Status::OK();
}

// Best effort, a few intents per commit: for intents older than the grace period, the versions
// their commit superseded (or, for a void commit, its own versions) and the intent go.
void Shared::CleanUp(uint64_t below_commit) {
  int cleaned = 0;
  Status status = QueryItems(
      {{"KeyConditionExpression", "pk = :pk AND sk < :below"},
       {"ExpressionAttributeValues",
        {{":pk", Text(CommitPk())}, {":below", Text(CommitHex(below_commit))}}},
       {"Limit", kIntentsCleanedPerCommit}},
      [&](const json& intent) -> Result<bool> {
        const int64_t written_at = static_cast<int64_t>(NumberOf(intent, "written_at_ms"));
        const int64_t grace_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(kCleanupGrace).count();
        if (WallMs() - written_at < grace_ms) return false;  // the rest are younger
        SKIPPR_RETURN_IF_ERROR(CleanIntent(intent));
        return ++cleaned < kIntentsCleanedPerCommit;
      });
  if (!status.ok()) spdlog::warn("store {}: cleanup: {}", description_, status.message());
  CleanVoidsWithoutIntent();
}

Status Shared::CleanIntent(const json& intent) {
  const std::string sk = intent["sk"]["S"].get<std::string>();
  const uint64_t commit = std::stoull(sk.substr(0, 16), nullptr, 16);
  bool is_void = false;
  {
    std::lock_guard lock(state_mutex_);
    is_void = IsVoid(voids_, commit);
  }
  std::optional<std::string> list = Base64Decode(intent["keys"]["B"].get<std::string>());
  if (!list) return Status::Corruption("a store intent's keys are not base64");
  SKIPPR_ASSIGN_OR_RETURN(auto keys, ParseIntentKeys(*list));
  std::vector<json> deletes;
  for (const auto& [intent_family, key] : keys) {
    const Family family = intent_family;  // a lambda below captures it
    const std::string hex = HexEncode(key);
    // A void commit's own versions; otherwise every older version, and a tombstone that is now
    // the oldest thing left.
    const uint64_t low = is_void ? commit : 0;
    SKIPPR_RETURN_IF_ERROR(
        QueryItems({{"KeyConditionExpression", "pk = :pk AND sk BETWEEN :low AND :high"},
                    {"ExpressionAttributeValues",
                     {{":pk", Text(FamilyPk(family))},
                      {":low", Text(hex + "#" + CommitHex(low))},
                      {":high", Text(hex + "#" + CommitHex(commit))}}}},
                   [&](const json& item) -> Result<bool> {
                     SKIPPR_ASSIGN_OR_RETURN(VersionKey version,
                                             ParseVersionKey(item["sk"]["S"].get<std::string>()));
                     if (version.commit == commit && !is_void && !item.contains("tomb"))
                       return true;
                     for (uint64_t chunk = 1; chunk < NumberOf(item, "chunks"); ++chunk) {
                       deletes.push_back(
                           {{"DeleteRequest",
                             {{"Key",
                               {{"pk", Text(ChunkPk(family))},
                                {"sk", Text(fmt::format("{}#{}#{:04x}", version.hex_key,
                                                        CommitHex(version.commit), chunk))}}}}}});
                     }
                     deletes.push_back(
                         {{"DeleteRequest", {{"Key", {{"pk", item["pk"]}, {"sk", item["sk"]}}}}}});
                     return true;
                   }));
  }
  deletes.push_back({{"DeleteRequest", {{"Key", {{"pk", intent["pk"]}, {"sk", intent["sk"]}}}}}});
  return pool_.BatchWrite(options_.table, deletes);
}

Status Shared::DeleteVoids(uint64_t from) {
  Result<json> deleted = pool_.Call(
      "DeleteItem", {{"TableName", options_.table},
                     {"Key", {{"pk", Text(pk_)}, {"sk", Text("store#void#" + CommitHex(from))}}}});
  SKIPPR_RETURN_IF_ERROR(deleted.status());
  std::lock_guard lock(state_mutex_);
  voids_.erase(from);
  return Status::OK();
}

// A void range goes once the grace period is over and no intent is left in it (CleanIntent removes
// those of void commits with their versions): nothing is left there to hide.
void Shared::CleanVoidsWithoutIntent() {
  const int64_t grace_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(kCleanupGrace).count();
  int checked = 0;
  Status status = QueryItems(
      {{"KeyConditionExpression", "pk = :pk AND begins_with(sk, :prefix)"},
       {"ExpressionAttributeValues", {{":pk", Text(pk_)}, {":prefix", Text("store#void#")}}},
       {"Limit", kIntentsCleanedPerCommit}},
      [&](const json& item) -> Result<bool> {
        if (WallMs() - static_cast<int64_t>(NumberOf(item, "voided_at_ms")) < grace_ms) return true;
        const std::string sk = item["sk"]["S"].get<std::string>();
        const uint64_t from = std::stoull(sk.substr(sk.rfind('#') + 1), nullptr, 16);
        const uint64_t to = std::max(from, NumberOf(item, "to"));
        bool has_intent = false;
        SKIPPR_RETURN_IF_ERROR(
            QueryItems({{"KeyConditionExpression", "pk = :pk AND sk BETWEEN :low AND :high"},
                        {"ExpressionAttributeValues",
                         {{":pk", Text(CommitPk())},
                          {":low", Text(CommitHex(from))},
                          {":high", Text(CommitHex(to) + "~")}}},
                        {"Limit", 1}},
                       [&](const json&) -> Result<bool> {
                         has_intent = true;
                         return false;
                       }));
        if (!has_intent) SKIPPR_RETURN_IF_ERROR(DeleteVoids(from));
        return ++checked < kIntentsCleanedPerCommit;
      });
  if (!status.ok()) spdlog::warn("store {}: cleanup: {}", description_, status.message());
}

// ----- backend classes ---------------------------------------------------------------------------

class DynamoSnapshot final : public internal::Snapshot {
 public:
  DynamoSnapshot(std::shared_ptr<Shared> shared, ReadView view)
      : shared_(std::move(shared)), view_(std::move(view)) {}

  Result<std::optional<std::string>> Get(Family family, std::string_view key) const override {
    return shared_->Get(view_, family, key);
  }
  Status Scan(Family family, std::string_view prefix, std::string_view start,
              const ScanVisitor& visit) const override {
    return shared_->Scan(view_, family, prefix, start, visit);
  }
  Result<std::optional<std::string>> LastKey(Family family,
                                             std::string_view prefix) const override {
    return shared_->LastKey(view_, family, prefix);
  }

 private:
  std::shared_ptr<Shared> shared_;
  ReadView view_;
};

using Writes = std::map<std::pair<Family, std::string>, std::optional<std::string>>;

// The session's writes are held here until Commit (a transaction is as big as what it writes,
// as LMDB's dirty pages are); reads see them over the committed state.
class DynamoWriteSession final : public internal::WriteSession {
 public:
  DynamoWriteSession(std::shared_ptr<Shared> shared, std::unique_lock<std::mutex> writer_lock)
      : shared_(std::move(shared)),
        writer_lock_(std::move(writer_lock)),
        view_(shared_->WriterView()) {}
  ~DynamoWriteSession() override {
    std::lock_guard lock(shared_->writer_thread_mutex());
    shared_->writer_thread().reset();
  }

  Result<std::optional<std::string>> Get(Family family, std::string_view key) const override {
    auto written = writes_.find({family, std::string(key)});
    if (written != writes_.end()) return written->second;
    return shared_->Get(view_, family, key);
  }

  Status Scan(Family family, std::string_view prefix, const ScanVisitor& visit) const override {
    auto pending = writes_.lower_bound({family, std::string(prefix)});
    const auto pending_in_range = [&] {
      return pending != writes_.end() && pending->first.first == family &&
             std::string_view(pending->first.second).starts_with(prefix);
    };
    bool stopped = false;
    // Emits this session's writes that sort before `key` (all of them for nullopt).
    const auto emit_pending_before = [&](std::optional<std::string_view> key) {
      while (!stopped && pending_in_range() && (!key || pending->first.second < *key)) {
        if (pending->second) stopped = !visit(pending->first.second, *pending->second);
        ++pending;
      }
    };
    SKIPPR_RETURN_IF_ERROR(
        shared_->Scan(view_, family, prefix, {}, [&](std::string_view key, std::string_view value) {
          emit_pending_before(key);
          if (stopped) return false;
          if (pending_in_range() && pending->first.second == key) {
            if (pending->second) stopped = !visit(key, *pending->second);
            ++pending;
            return !stopped;
          }
          stopped = !visit(key, value);
          return !stopped;
        }));
    emit_pending_before(std::nullopt);
    return Status::OK();
  }

  Status Put(Family family, std::string_view key, std::string_view value) override {
    SKIPPR_RETURN_IF_ERROR(shared_->CheckKey(family, key, "put"));
    writes_[{family, std::string(key)}] = std::string(value);
    return Status::OK();
  }
  Status Delete(Family family, std::string_view key) override {
    SKIPPR_RETURN_IF_ERROR(shared_->CheckKey(family, key, "delete"));
    writes_[{family, std::string(key)}] = std::nullopt;
    return Status::OK();
  }
  Status DeletePrefix(Family family, std::string_view prefix) override {
    std::vector<std::string> keys;
    Status scanned =
        shared_->Scan(view_, family, prefix, {}, [&](std::string_view key, std::string_view) {
          keys.emplace_back(key);
          return true;
        });
    if (!scanned.ok()) return Spend(scanned);
    for (std::string& key : keys) writes_[{family, std::move(key)}] = std::nullopt;
    for (auto& [at, value] : writes_) {
      if (at.first == family && at.second.starts_with(prefix)) value = std::nullopt;
    }
    return Status::OK();
  }
  Status Commit() override {
    Status committed = shared_->Commit(writes_);
    writes_.clear();
    if (!committed.ok()) is_spent_ = true;
    return committed;
  }
  bool spent() const override { return is_spent_; }

 private:
  Status Spend(Status status) {
    is_spent_ = true;
    writes_.clear();
    return status;
  }

  std::shared_ptr<Shared> shared_;
  std::unique_lock<std::mutex> writer_lock_;
  ReadView view_;
  Writes writes_;
  bool is_spent_ = false;
};

class DynamoBackend final : public internal::Backend {
 public:
  explicit DynamoBackend(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  Result<std::unique_ptr<internal::Snapshot>> BeginRead() const override {
    SKIPPR_ASSIGN_OR_RETURN(ReadView view, shared_->TakeView());
    return std::unique_ptr<internal::Snapshot>(
        std::make_unique<DynamoSnapshot>(shared_, std::move(view)));
  }

  Result<std::unique_ptr<internal::WriteSession>> BeginWrite() override {
    SKIPPR_RETURN_IF_ERROR(shared_->CheckWritable());
    {
      std::lock_guard lock(shared_->writer_thread_mutex());
      if (shared_->writer_thread() == std::this_thread::get_id()) {
        return Status::Internal(fmt::format(
            "store {}: this thread already has a write transaction open; commit or drop it "
            "before beginning another (a skipprd bug: waiting would deadlock)",
            shared_->description()));
      }
    }
    std::unique_lock writer_lock(shared_->writer_mutex());
    {
      std::lock_guard lock(shared_->writer_thread_mutex());
      shared_->writer_thread() = std::this_thread::get_id();
    }
    return std::unique_ptr<internal::WriteSession>(
        std::make_unique<DynamoWriteSession>(shared_, std::move(writer_lock)));
  }

  const std::string& directory() const override { return shared_->description(); }
  const StoreIdentity& identity() const override { return shared_->identity(); }

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenDynamoStore(const DynamoStoreOptions& options) {
  static const ProcessEnvironment kProcessEnvironment;
  const Environment& environment =
      options.environment != nullptr ? *options.environment : kProcessEnvironment;
  auto shared = std::make_shared<Shared>(options, aws::CopyAwsVariables(environment));
  SKIPPR_RETURN_IF_ERROR(shared->Open());
  return std::make_unique<Store>(std::make_unique<DynamoBackend>(std::move(shared)));
}

}  // namespace skippr::store
