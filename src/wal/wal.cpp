#include "wal/wal.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/disk.hpp"
#include "core/file.hpp"

namespace skippr::wal {

namespace {

constexpr int kCatalogFormatVersion = 1;
constexpr uint32_t kDirectoryMode = 0700;
constexpr uint32_t kSegmentFileMode = 0600;
constexpr uint64_t kSpareSegmentFiles = 8;  // created together, one directory fsync

// catalog family: ("segment", id) → the segment entry; ("wal_state") → the next ids.
std::string SegmentKey(uint64_t segment_id) {
  return store::KeyBuilder().Text("segment").U64(segment_id).key();
}
std::string SegmentPrefix() { return store::KeyBuilder().Text("segment").key(); }
std::string WalStateKey() { return store::KeyBuilder().Text("wal_state").key(); }
std::string WalReclaimedKey() { return store::KeyBuilder().Text("wal_reclaimed").key(); }

std::string SegmentFileName(uint64_t segment_id) { return fmt::format("{:020}.seg", segment_id); }

nlohmann::json EntryToJson(const SegmentEntry& entry) {
  nlohmann::json slices = nlohmann::json::array();
  for (const SliceSummary& slice : entry.slices) {
    slices.push_back({{"ordinal", slice.ordinal},
                      {"namespace", slice.namespace_name},
                      {"schema_id", slice.schema_id},
                      {"rows", slice.rows},
                      {"bytes", slice.bytes},
                      {"uncompressed_bytes", slice.uncompressed_bytes}});
  }
  return {{"format_version", kCatalogFormatVersion},
          {"segment_id", entry.segment_id},
          {"sequence", entry.sequence},
          {"file", entry.file_name},
          {"file_bytes", entry.file_bytes},
          {"checksum", fmt::format("{:016x}", entry.checksum)},
          {"created_unix_micros", entry.created_unix_micros},
          {"state", "live"},
          {"slices", std::move(slices)}};
}

Result<SegmentEntry> EntryFromJson(std::string_view text) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    if (json.at("format_version").get<int>() != kCatalogFormatVersion) {
      return Status::NotSupported(
          fmt::format("WAL catalog entry has format version {}; this skipprd "
                      "reads {}",
                      json.at("format_version").get<int>(), kCatalogFormatVersion));
    }
    SegmentEntry entry;
    entry.segment_id = json.at("segment_id").get<uint64_t>();
    entry.sequence = json.at("sequence").get<uint64_t>();
    entry.file_name = json.at("file").get<std::string>();
    entry.file_bytes = json.at("file_bytes").get<uint64_t>();
    entry.checksum = std::stoull(json.at("checksum").get<std::string>(), nullptr, 16);
    entry.created_unix_micros = json.at("created_unix_micros").get<int64_t>();
    for (const auto& slice : json.at("slices")) {
      entry.slices.push_back({slice.at("ordinal").get<uint32_t>(),
                              slice.at("namespace").get<std::string>(),
                              slice.at("schema_id").get<int32_t>(), slice.at("rows").get<int64_t>(),
                              slice.at("bytes").get<uint64_t>(),
                              slice.value("uncompressed_bytes", uint64_t{0})});
    }
    return entry;
  } catch (const std::exception& error) {
    return Status::Corruption(fmt::format("WAL catalog entry is unreadable: {}", error.what()));
  }
}

template <typename Transaction>
Result<std::vector<SegmentEntry>> ScanEntries(const Transaction& transaction) {
  std::vector<SegmentEntry> entries;
  Status failure;
  SKIPPR_RETURN_IF_ERROR(transaction.Scan(store::Family::kCatalog, SegmentPrefix(),
                                          [&](std::string_view, std::string_view value) {
                                            Result<SegmentEntry> entry = EntryFromJson(value);
                                            if (!entry.ok()) {
                                              failure = entry.status();
                                              return false;
                                            }
                                            entries.push_back(std::move(entry).value());
                                            return true;
                                          }));
  SKIPPR_RETURN_IF_ERROR(failure);
  return entries;  // U64 keys sort numerically: oldest first
}

// The next ids the store recorded; nullopt when it never committed (a new store).
template <typename Transaction>
Result<std::optional<NextIds>> ReadStoredNextIds(const Transaction& transaction) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> stored,
                          transaction.Get(store::Family::kCatalog, WalStateKey()));
  if (!stored) return std::optional<NextIds>();
  try {
    const nlohmann::json state = nlohmann::json::parse(*stored);
    return std::optional<NextIds>(NextIds{state.at("next_segment_id").get<uint64_t>(),
                                          state.at("next_sequence").get<uint64_t>()});
  } catch (const std::exception& error) {
    return Status::Corruption(
        fmt::format("the WAL state in the store is unreadable: {}", error.what()));
  }
}

template <typename Transaction>
Result<NextIds> ReadNextIds(const Transaction& transaction) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<NextIds> stored, ReadStoredNextIds(transaction));
  return stored.value_or(NextIds{});
}

std::string NextIdsJson(const NextIds& ids) {
  return nlohmann::json{{"next_segment_id", ids.segment_id}, {"next_sequence", ids.sequence}}
      .dump();
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The directory entry of a new segment (or of a deleted orphan) made durable.
Status SyncWalDirectory(Env& env, const std::string& directory) {
  Status synced = env.SyncDirectory(directory);
  if (synced.ok()) return synced;
  return Status(synced.code(), synced.message() + "; the run stops (check the disk)");
}

// The segment id a WAL file name spells ("<20 digits>.seg"); nullopt for any other name.
std::optional<uint64_t> SegmentIdOfFileName(std::string_view name) {
  constexpr size_t kDigits = 20;
  if (name.size() != kDigits + 4) return std::nullopt;
  uint64_t segment_id = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + kDigits, segment_id);
  if (error != std::errc() || end != name.data() + kDigits) return std::nullopt;
  return segment_id;
}

// A segment file the catalog does not list, and what recovery makes of it.
struct UncommittedFile {
  std::string name;
  bool is_spare = false;  // empty: created ahead of use
  bool is_ours = false;   // provably written by this store: deleting it loses nothing committed
  std::string why;        // for the log line (ours) or the refusal (not ours)
};

// Decides whether an uncommitted segment file is a crash orphan of this store — which recovery
// deletes — or something recovery must not touch (docs/formats/wal.md, "Recovery"). A file is ours
// when its header carries this store's instance id (or, in a store upgraded from format 1, no
// instance id at all) and its id is one this store handed out: the next id (the segment being
// written when the run stopped) or an id below it (a segment reclaimed, or never committed, whose
// file outlived its catalog entry).
class OrphanJudge {
 public:
  OrphanJudge(const store::StoreIdentity& identity, const std::optional<NextIds>& stored_ids)
      : identity_(identity),
        has_committed_(stored_ids.has_value()),
        next_segment_id_(stored_ids.value_or(NextIds{}).segment_id) {}

  UncommittedFile Judge(const std::string& name, bool is_empty,
                        const Result<SegmentHeader>& header) const {
    UncommittedFile file{name};
    if (is_empty) {
      file.is_spare = file.is_ours = true;  // no bytes, nothing to lose
      return file;
    }
    const std::optional<uint64_t> named_id = SegmentIdOfFileName(name);
    if (!header.ok()) {
      file.why = fmt::format("its header is unreadable ({})", header.status().message());
    } else if (!named_id || *named_id != header->segment_id) {
      file.why = fmt::format("it holds segment {}, which its name does not spell",
                             header->segment_id);
    } else if (header->format_version >= 2 && header->instance_id != identity_.instance_id) {
      file.why = fmt::format("it was written by store instance {}, not by this store ({})",
                             header->instance_id, identity_.instance_id);
    } else if (header->format_version < 2 && !identity_.predates_instance_ids) {
      file.why = "it was written without an instance id (segment format 1), before this store "
                 "existed";
    } else if (header->segment_id > next_segment_id_) {
      file.why = fmt::format("segment {} is beyond {}, the next id this store hands out: the "
                             "store is older than the file",
                             header->segment_id, next_segment_id_);
    } else {
      file.is_ours = true;
      file.why = header->segment_id == next_segment_id_
                     ? "written but never committed, from a crash"
                     : "below the store's next id: reclaimed, or never committed, before a crash";
    }
    return file;
  }

  // OK when every file is ours; otherwise Corruption naming the files that are not and what to do.
  Status RefuseForeign(const std::vector<UncommittedFile>& files, const std::string& wal_directory,
                       const std::string& store_directory) const {
    constexpr size_t kFilesNamed = 5;
    std::vector<std::string> named;
    size_t foreign = 0;
    for (const UncommittedFile& file : files) {
      if (file.is_ours) continue;
      if (++foreign <= kFilesNamed) named.push_back(fmt::format("{} ({})", file.name, file.why));
    }
    if (foreign == 0) return Status::OK();
    const std::string more =
        foreign > kFilesNamed ? fmt::format(" and {} more", foreign - kFilesNamed) : "";
    const std::string advice =
        has_committed_
            ? fmt::format("the store {} and the WAL {} are from different points in time (a store "
                          "restored from an older backup, or segment files copied in): restore "
                          "both from the same backup, or move the pipeline's directory aside to "
                          "re-read the source with a new store",
                          store_directory, wal_directory)
            : fmt::format("the store {} has no record of any WAL commit: it was lost or replaced "
                          "while the WAL stayed; restore the store from the same backup as the "
                          "WAL, or move {} aside (mv {} {}.aside) to re-read the source into a "
                          "new WAL",
                          store_directory, wal_directory, wal_directory, wal_directory);
    return Status::Corruption(fmt::format(
        "WAL recovery stopped and deleted nothing: {} segment file(s) in {} are not committed in "
        "this pipeline's store and are not provably its own crash leftovers: {}{}; {}",
        foreign, wal_directory, fmt::join(named, "; "), more, advice));
  }

 private:
  const store::StoreIdentity& identity_;
  const bool has_committed_;
  const uint64_t next_segment_id_;
};

Result<std::vector<std::string>> SegmentFilesIn(Env& env, const std::string& directory) {
  SKIPPR_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDirectory(directory));
  std::erase_if(names, [](const std::string& name) {
    return name.size() <= 4 || name.compare(name.size() - 4, 4, ".seg") != 0;
  });
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

int64_t SegmentEntry::rows() const {
  int64_t total = 0;
  for (const SliceSummary& slice : slices) total += slice.rows;
  return total;
}

Result<std::unique_ptr<Wal>> Wal::Open(const std::string& directory, const std::string& pipeline,
                                       store::Store& store, RecoveryReport* report,
                                       const WalOptions& options) {
  SKIPPR_RETURN_IF_ERROR(CreatePrivateDirectories(*options.env, directory, "WAL"));
  // Also one an older skipprd created with the umask's mode (a mode change, not a write: the Env
  // has no chmod).
  ::chmod(directory.c_str(), kDirectoryMode);
  std::unique_ptr<Wal> wal(new Wal(directory, pipeline, store, *options.env));
  SKIPPR_RETURN_IF_ERROR(wal->Recover(report));
  return wal;
}

Status Wal::Recover(RecoveryReport* report) {
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, store_.BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(std::vector<SegmentEntry> entries, ScanEntries(read));
  SKIPPR_ASSIGN_OR_RETURN(const std::optional<NextIds> stored_ids, ReadStoredNextIds(read));
  std::map<std::string, const SegmentEntry*> committed;
  for (const SegmentEntry& entry : entries) committed.emplace(entry.file_name, &entry);

  // Every uncommitted file is judged before any is deleted: one that is not provably ours stops
  // recovery with nothing removed.
  const OrphanJudge judge(store_.identity(), stored_ids);
  std::vector<UncommittedFile> uncommitted;
  SKIPPR_ASSIGN_OR_RETURN(const std::vector<std::string> files, SegmentFilesIn(env_, directory_));
  for (const std::string& name : files) {
    if (committed.count(name)) continue;
    const std::string path = directory_ + "/" + name;
    Result<uint64_t> size = env_.FileSize(path);
    const bool is_empty = size.ok() && *size == 0;
    uncommitted.push_back(
        judge.Judge(name, is_empty, is_empty ? Result<SegmentHeader>(SegmentHeader{})
                                             : SegmentReader::ReadHeader(path, &env_)));
  }
  SKIPPR_RETURN_IF_ERROR(judge.RefuseForeign(uncommitted, directory_, store_.directory()));

  size_t orphans = 0;
  for (const UncommittedFile& file : uncommitted) {
    // Written before a crash, never committed: its records were not acknowledged to the source,
    // which will hand them over again. (An empty one is a spare created ahead of use.)
    CrashPoint("recovery.before_orphan_delete");
    const std::string path = directory_ + "/" + file.name;
    if (Status removed = env_.RemoveFile(path);
        !removed.ok() && removed.code() != StatusCode::kNotFound) {
      return Status(removed.code(), fmt::format("cannot delete orphan WAL segment: {}",
                                                removed.message()));
    }
    if (!file.is_spare) {
      spdlog::warn("WAL {}: deleted orphan segment {} ({})", pipeline_, file.name, file.why);
      ++orphans;
    }
    CrashPoint("recovery.after_orphan_delete");
  }
  if (orphans > 0) {
    SKIPPR_RETURN_IF_ERROR(SyncWalDirectory(env_, directory_));  // spares need not be
  }

  for (const SegmentEntry& entry : entries) {
    const std::string path = directory_ + "/" + entry.file_name;
    Result<uint64_t> file_bytes = env_.FileSize(path);
    if (!file_bytes.ok() && file_bytes.status().code() != StatusCode::kNotFound) {
      return file_bytes.status();
    }
    if (!file_bytes.ok()) {
      return Status::Corruption(fmt::format(
          "WAL segment {} is committed in the catalog but its file '{}' is missing: committed data "
          "was removed from DATA_DIR; restore DATA_DIR from a backup, or re-read the source with a "
          "new pipeline",
          entry.segment_id, path));
    }
    if (*file_bytes != entry.file_bytes) {
      return Status::Corruption(fmt::format(
          "WAL segment file '{}' has {} bytes, the catalog committed {}: the file was damaged or "
          "replaced; restore DATA_DIR from a backup, or re-read the source with a new pipeline",
          path, *file_bytes, entry.file_bytes));
    }
    SKIPPR_RETURN_IF_ERROR(SegmentReader::CheckTail(path, &env_));
  }
  next_ids_ = stored_ids.value_or(NextIds{});
  CrashPoint("recovery.after_scan");
  if (report != nullptr) *report = {entries.size(), orphans};
  spdlog::info("WAL {}: recovered {} live segment(s), deleted {} orphan(s)", pipeline_,
               entries.size(), orphans);
  return Status::OK();
}

namespace {

// A segment write or sync failed: nothing was committed (the file stays an orphan, which the next
// recovery deletes) and the run stops.
Status SegmentIoError(const std::string& path, const Status& failure) {
  if (failure.code() == StatusCode::kNoSpace) {
    return Status::NoSpace(fmt::format(
        "disk full writing WAL segment '{}'; free space under DATA_DIR and run again", path));
  }
  return Status(failure.code(),
                fmt::format("WAL segment '{}' not written: {}; nothing was committed and the run "
                            "stops (check the disk, then run again)",
                            path, failure.message()));
}

}  // namespace

Wal::~Wal() {
  // Spare files are empty; one left behind by a crash is deleted at the next recovery.
  for (uint64_t segment_id : spare_segment_ids_) {
    (void)env_.RemoveFile(directory_ + "/" + SegmentFileName(segment_id));
  }
}

Status Wal::CreateSpareFiles(uint64_t first_segment_id) {
  for (uint64_t segment_id = first_segment_id;
       segment_id < first_segment_id + kSpareSegmentFiles; ++segment_id) {
    const std::string path = directory_ + "/" + SegmentFileName(segment_id);
    Result<std::unique_ptr<WritableFile>> file = env_.OpenWritable(
        path, {.mode = WritableFileOptions::Mode::kCreateNew, .permissions = kSegmentFileMode});
    if (!file.ok()) {
      return Status(file.status().code(),
                    fmt::format("cannot create WAL segment: {}", file.status().message()));
    }
    SKIPPR_RETURN_IF_ERROR((*file)->Close());
    spare_segment_ids_.insert(segment_id);
  }
  SKIPPR_RETURN_IF_ERROR(SyncWalDirectory(env_, directory_));
  CrashPoint("wal.after_directory_fsync");
  return Status::OK();
}

Status Wal::WriteDurably(uint64_t segment_id, std::string_view bytes) {
  // Segment files are created (empty, directory fsynced) a few at a time ahead of use, so an append
  // pays neither the file creation nor a directory fsync.
  if (!spare_segment_ids_.contains(segment_id)) {
    SKIPPR_RETURN_IF_ERROR(CreateSpareFiles(segment_id));
  }
  spare_segment_ids_.erase(segment_id);
  const std::string path = directory_ + "/" + SegmentFileName(segment_id);
  // With O_DIRECT, the whole blocks go straight from the segment's (aligned) buffer to the device —
  // no page-cache pages to allocate, copy into and write back, whose cost swings widely (measured
  // on our CI VMs: writing 3.3 MiB into the page cache took 0.9 ms, or 6-7 ms for minutes after
  // many files were deleted) — and the sub-block tail goes through the page cache. Without O_DIRECT
  // (a file system that refuses it), each 1 MiB chunk is handed to writeback as soon as it is
  // written, so that fdatasync waits for the tail only.
  SKIPPR_ASSIGN_OR_RETURN(
      std::unique_ptr<WritableFile> file,
      env_.OpenWritable(path, {.mode = WritableFileOptions::Mode::kOpenExisting,
                               .use_direct_io = true,
                               .start_writeback_early = true}));
  SKIPPR_ASSIGN_OR_RETURN(const uint64_t size_bytes, env_.FileSize(path));
  if (size_bytes != 0) {
    return Status::IOError(fmt::format(
        "WAL segment '{}' was created empty for this append but is not empty now: another "
        "process is writing in DATA_DIR; stop it and run again",
        path));
  }
  if (Status written = file->WriteAt(0, bytes); !written.ok()) return SegmentIoError(path, written);
  CrashPoint("wal.after_segment_write");
  // An fdatasync failure is final for this file: the kernel may have dropped the dirty pages, so a
  // retry on the same descriptor could falsely succeed (PostgreSQL's fsyncgate; WritableFile
  // refuses one). The file stays an orphan, deleted at the next recovery, and this run fails.
  if (Status synced = file->Sync(); !synced.ok()) return SegmentIoError(path, synced);
  SKIPPR_RETURN_IF_ERROR(file->Close());
  CrashPoint("wal.after_fdatasync");
  return Status::OK();
}

Result<PreparedSegment> Wal::Prepare(const std::vector<Batch>& batches,
                                     const std::string& source_positions) {
  SKIPPR_CHECK_MSG(!batches.empty(), "a segment holds at least one batch");
  SegmentHeader header;
  header.instance_id = store_.identity().instance_id;
  header.pipeline = pipeline_;
  header.segment_id = next_ids_.segment_id++;
  header.sequence = next_ids_.sequence++;
  header.created_unix_micros = NowMicros();
  header.source_positions = source_positions;
  PreparedSegment segment;
  segment.bytes = EncodeSegment(header, batches);
  // Assert on this side of the disk boundary what the reader checks on the other.
  SKIPPR_ASSIGN_OR_RETURN(SegmentReader check,
                          SegmentReader::VerifyBytes(segment.bytes, "segment being written"));
  SKIPPR_CHECK(check.slices().size() == batches.size());
  SegmentEntry& entry = segment.entry;
  entry.segment_id = header.segment_id;
  entry.sequence = header.sequence;
  entry.file_name = SegmentFileName(header.segment_id);
  entry.file_bytes = segment.bytes.size();
  entry.checksum = check.checksum();
  entry.created_unix_micros = header.created_unix_micros;
  for (const SliceInfo& slice : check.slices()) {
    entry.slices.push_back({slice.ordinal, slice.namespace_name, slice.schema_id, slice.row_count,
                            slice.payload_bytes, slice.uncompressed_bytes});
    SKIPPR_CHECK(slice.row_count == batches[slice.ordinal].num_rows);
  }
  return segment;
}

Result<CommitInfo> Wal::Append(const PreparedSegment& segment,
                               const SameTransaction& same_transaction) {
  return CommitTransaction(&segment, segment.entry.sequence, same_transaction);
}

Result<CommitInfo> Wal::Commit(const std::vector<Batch>& batches,
                               const std::string& source_positions,
                               const SameTransaction& same_transaction) {
  if (batches.empty()) return CommitTransaction(nullptr, next_ids_.sequence++, same_transaction);
  SKIPPR_ASSIGN_OR_RETURN(PreparedSegment segment, Prepare(batches, source_positions));
  return Append(segment, same_transaction);
}

Result<CommitInfo> Wal::CommitTransaction(const PreparedSegment* segment, uint64_t sequence,
                                          const SameTransaction& same_transaction) {
  SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, store_.BeginWrite());
  SKIPPR_ASSIGN_OR_RETURN(NextIds stored, ReadNextIds(write));
  // Ids are handed out in memory (this process holds the writer lease) and only ever grow; a
  // prepared segment that was never appended leaves a gap, never a reuse.
  SKIPPR_CHECK_MSG(sequence >= stored.sequence, "WAL sequence went backwards");
  NextIds next{stored.segment_id, sequence + 1};
  CommitInfo info;
  info.sequence = sequence;
  if (segment != nullptr) {
    const SegmentEntry& entry = segment->entry;
    SKIPPR_CHECK_MSG(entry.segment_id >= stored.segment_id, "WAL segment id went backwards");
    SKIPPR_RETURN_IF_ERROR(WriteDurably(entry.segment_id, segment->bytes));
    SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, SegmentKey(entry.segment_id),
                                     EntryToJson(entry).dump()));
    next.segment_id = entry.segment_id + 1;
    info.segment_id = entry.segment_id;
    info.rows = entry.rows();
    info.file_bytes = entry.file_bytes;
  }
  SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, WalStateKey(), NextIdsJson(next)));
  if (same_transaction) SKIPPR_RETURN_IF_ERROR(same_transaction(write));
  CrashPoint("wal.before_store_commit");
  SKIPPR_RETURN_IF_ERROR(write.Commit());  // the commit point
  CrashPoint("wal.after_store_commit");
  if (segment != nullptr) {
    spdlog::info("WAL {}: committed segment {} ({} slices, {} rows, {})", pipeline_,
                 info.segment_id, segment->entry.slices.size(), info.rows,
                 FormatBytes(info.file_bytes));
  }
  return info;
}

Result<std::vector<SegmentEntry>> LiveSegments(const store::ReadTransaction& transaction) {
  return ScanEntries(transaction);
}

Status DeleteSegmentEntry(store::WriteTransaction& transaction, uint64_t segment_id) {
  SKIPPR_RETURN_IF_ERROR(transaction.Delete(store::Family::kCatalog, SegmentKey(segment_id)));
  return RecordReclaimedSegments(transaction);
}

Result<bool> HasReclaimedSegments(const store::WriteTransaction& transaction) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> reclaimed,
                          transaction.Get(store::Family::kCatalog, WalReclaimedKey()));
  return reclaimed.has_value();
}

Status RecordReclaimedSegments(store::WriteTransaction& transaction) {
  return transaction.Put(store::Family::kCatalog, WalReclaimedKey(), "1");
}

Status DeleteSegmentFile(const std::string& directory, const SegmentEntry& entry, Env* env) {
  Status removed = env->RemoveFile(directory + "/" + entry.file_name);
  if (removed.ok() || removed.code() == StatusCode::kNotFound) return Status::OK();
  return Status(removed.code(),
                fmt::format("cannot delete reclaimed WAL segment: {}", removed.message()));
}

Result<SegmentReader> OpenSegment(const std::string& directory, const SegmentEntry& entry, Env* env,
                                  SegmentVerification verification) {
  const std::string path = directory + "/" + entry.file_name;
  SKIPPR_ASSIGN_OR_RETURN(SegmentReader reader, SegmentReader::Open(path, env, verification));
  if (reader.checksum() != entry.checksum || reader.header().segment_id != entry.segment_id) {
    return Status::Corruption(fmt::format(
        "WAL segment file '{}' is not the segment the catalog committed (checksum {:016x}, catalog "
        "{:016x}); restore DATA_DIR from a backup, or re-read the source with a new pipeline",
        path, reader.checksum(), entry.checksum));
  }
  return reader;
}

}  // namespace skippr::wal
