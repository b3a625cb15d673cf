#include "support/fault_env.hpp"

#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "core/file.hpp"

namespace skippr::testing {

namespace fs = std::filesystem;

namespace {

bool Matches(const FaultRule& rule, const std::string& path) {
  return ::fnmatch(rule.path_pattern.c_str(), path.c_str(), 0) == 0;
}

std::string NameIn(const std::string& path) { return fs::path(path).filename().string(); }

std::string Normal(const std::string& path) {
  std::string normal = fs::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

Status PowerIsOff(std::string_view what) {
  return ErrnoStatus(EIO, fmt::format("{} failed (the power is off)", what));
}

}  // namespace

// ----- files -------------------------------------------------------------------------------------

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionEnv& env, std::unique_ptr<WritableFile> base,
                    FaultInjectionEnv::InodeKey key)
      : WritableFile(base->path()), env_(env), base_(std::move(base)), key_(key) {}

 protected:
  Result<size_t> WriteSome(uint64_t offset, std::string_view bytes) override {
    const std::string what = fmt::format("cannot write '{}' at offset {}", path(), offset);
    SKIPPR_RETURN_IF_ERROR(env_.BeginOperation(
        fmt::format("write {} ({} bytes at {})", path(), bytes.size(), offset)));
    uint64_t allowed = bytes.size();
    SKIPPR_RETURN_IF_ERROR(env_.FaultFor(FaultKind::kNoSpaceAfterBytes, path(), bytes.size(),
                                         &allowed));
    if (allowed == 0) return ErrnoStatus(ENOSPC, what);
    SKIPPR_RETURN_IF_ERROR(env_.FaultFor(FaultKind::kShortWrites, path(), allowed, &allowed));
    env_.RecordInPlaceWrite(key_, offset, allowed);
    SKIPPR_RETURN_IF_ERROR(base_->WriteAt(offset, bytes.substr(0, allowed)));
    return static_cast<size_t>(allowed);
  }

  Status SyncData() override {
    SKIPPR_RETURN_IF_ERROR(env_.BeginOperation("fdatasync " + path()));
    uint64_t unused = 0;
    if (!env_.FaultFor(FaultKind::kSyncFails, path(), 0, &unused).ok()) {
      // What Linux does: the pages it could not write are dropped (and marked clean).
      {
        std::lock_guard lock(env_.mutex_);
        auto file = env_.files_.find(key_);
        if (file != env_.files_.end()) {
          (void)env_.RevertFile(key_, file->second);
          file->second.undo.clear();
        }
      }
      return ErrnoStatus(EIO, fmt::format("fdatasync of '{}' failed", path()));
    }
    SKIPPR_RETURN_IF_ERROR(base_->Sync());
    env_.MarkSynced(key_);
    return Status::OK();
  }

  Status TruncateTo(uint64_t size_bytes) override {
    SKIPPR_RETURN_IF_ERROR(env_.BeginOperation(fmt::format("truncate {} to {}", path(), size_bytes)));
    {
      std::lock_guard lock(env_.mutex_);
      auto file = env_.files_.find(key_);
      if (file != env_.files_.end() && size_bytes < file->second.synced_bytes) {
        env_.RecordInPlaceWrite(key_, size_bytes, file->second.synced_bytes - size_bytes);
      }
    }
    return base_->Truncate(size_bytes);
  }

  Status CloseFile() override { return base_->Close(); }

 private:
  FaultInjectionEnv& env_;
  std::unique_ptr<WritableFile> base_;
  FaultInjectionEnv::InodeKey key_;
};

class FaultReadableFile final : public SequentialFile, public RandomAccessFile {
 public:
  FaultReadableFile(FaultInjectionEnv& env, std::string path,
                    std::unique_ptr<SequentialFile> sequential,
                    std::unique_ptr<RandomAccessFile> random_access)
      : env_(env),
        path_(std::move(path)),
        sequential_(std::move(sequential)),
        random_access_(std::move(random_access)) {}

  Result<size_t> Read(char* out, size_t bytes) override {
    SKIPPR_RETURN_IF_ERROR(CheckRead());
    return sequential_->Read(out, bytes);
  }
  Result<size_t> ReadAt(uint64_t offset, char* out, size_t bytes) const override {
    SKIPPR_RETURN_IF_ERROR(CheckRead());
    return random_access_->ReadAt(offset, out, bytes);
  }
  Result<uint64_t> Size() const override {
    SKIPPR_RETURN_IF_ERROR(CheckRead());
    return random_access_->Size();
  }

 private:
  Status CheckRead() const {
    const std::string what = fmt::format("cannot read '{}'", path_);
    if (!env_.has_power()) return PowerIsOff(what);
    uint64_t unused = 0;
    if (!env_.FaultFor(FaultKind::kReadFails, path_, 0, &unused).ok()) {
      return ErrnoStatus(EIO, what);
    }
    return Status::OK();
  }

  FaultInjectionEnv& env_;
  std::string path_;
  std::unique_ptr<SequentialFile> sequential_;
  std::unique_ptr<RandomAccessFile> random_access_;
};

namespace {
class FaultFileLock final : public FileLock {
 public:
  FaultFileLock(FaultInjectionEnv& env, std::string path, std::unique_ptr<FileLock> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  Status Rewrite(std::string_view contents) override {
    if (!env_.has_power()) return PowerIsOff(fmt::format("rewriting '{}'", path_));
    return base_->Rewrite(contents);
  }

 private:
  FaultInjectionEnv& env_;
  std::string path_;
  std::unique_ptr<FileLock> base_;
};
}  // namespace

// ----- the environment ---------------------------------------------------------------------------

FaultInjectionEnv::FaultInjectionEnv(Env* base, std::string trash_directory)
    : base_(base), trash_directory_(Normal(trash_directory)) {
  fs::create_directories(trash_directory_);
}

FaultInjectionEnv::~FaultInjectionEnv() {
  std::error_code ignored;
  fs::remove_all(trash_directory_, ignored);
}

void FaultInjectionEnv::AddRule(FaultRule rule) {
  std::lock_guard lock(mutex_);
  rules_.push_back(std::move(rule));
  rule_counts_.push_back(0);
}

void FaultInjectionEnv::ClearRules() {
  std::lock_guard lock(mutex_);
  rules_.clear();
  rule_counts_.clear();
}

std::vector<std::string> FaultInjectionEnv::operations() const {
  std::lock_guard lock(mutex_);
  return operations_;
}

void FaultInjectionEnv::CrashAtOperation(uint64_t operation_index,
                                         std::function<void(const std::string&)> crash) {
  std::lock_guard lock(mutex_);
  crash_at_ = operation_index;
  crash_ = std::move(crash);
}

void FaultInjectionEnv::CutPower() {
  std::lock_guard lock(mutex_);
  has_power_ = false;
}

bool FaultInjectionEnv::has_power() const {
  std::lock_guard lock(mutex_);
  return has_power_;
}

Status FaultInjectionEnv::BeginOperation(std::string description) {
  std::unique_lock lock(mutex_);
  if (!has_power_) return PowerIsOff(description);
  if (crash_at_ && operations_.size() == *crash_at_) {
    has_power_ = false;
    crash_at_.reset();
    std::function<void(const std::string&)> crash = std::move(crash_);
    lock.unlock();
    if (crash) crash(description);  // throws: the code under test stops here
    return PowerIsOff(description);
  }
  operations_.push_back(std::move(description));
  return Status::OK();
}

// OK, or the fault a rule of `kind` injects. For writes, narrows `*allowed` (of `bytes`).
Status FaultInjectionEnv::FaultFor(FaultKind kind, const std::string& path, uint64_t bytes,
                                   uint64_t* allowed) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < rules_.size(); ++i) {
    const FaultRule& rule = rules_[i];
    if (rule.kind != kind || !Matches(rule, path)) continue;
    switch (kind) {
      case FaultKind::kSyncFails:
        if (rule_counts_[i]++ >= rule.after) return Status::IOError("injected");
        break;
      case FaultKind::kNoSpaceAfterBytes: {
        const uint64_t remaining = rule.after - std::min(rule.after, rule_counts_[i]);
        *allowed = std::min(*allowed, remaining);
        rule_counts_[i] += *allowed;
        break;
      }
      case FaultKind::kShortWrites:
        *allowed = std::max<uint64_t>(1, std::min(*allowed, bytes) / 2);
        break;
      case FaultKind::kReadFails:
      case FaultKind::kNoSpaceOnCreate:
        return Status::IOError("injected");
    }
  }
  return Status::OK();
}

std::optional<FaultInjectionEnv::InodeKey> FaultInjectionEnv::KeyOf(const std::string& path) const {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return InodeKey{info.st_dev, info.st_ino};
}

void FaultInjectionEnv::SeeDirectory(const std::string& directory) {
  std::lock_guard lock(mutex_);
  const std::string key = Normal(directory);
  if (directories_.contains(key)) return;
  Result<std::vector<std::string>> names = base_->ListDirectory(key);
  if (!names.ok()) return;  // missing: whatever is done in it fails
  directories_[key].durable_names = {names->begin(), names->end()};
}

void FaultInjectionEnv::SeeFile(const std::string& path, bool is_new) {
  std::lock_guard lock(mutex_);
  const std::optional<InodeKey> key = KeyOf(path);
  if (!key) return;
  // Inode numbers are reused: a state none of whose names reaches the inode is another file's.
  if (auto known = files_.find(*key);
      known != files_.end() && !is_new && PathOf(*key, known->second)) {
    return;
  }
  uint64_t size = 0;
  if (!is_new) {
    Result<uint64_t> current = base_->FileSize(path);
    if (current.ok()) size = *current;
  }
  files_[*key] = FileState{{path}, size, {}};
}

// Keeps the file now at `path` as a hard link in the trash, to be put back as `name_to_restore` of
// its directory at a power cut, unless that directory is synced first. Nothing to keep when that
// name is not durable (a power cut removes it anyway).
Status FaultInjectionEnv::KeepInTrash(const std::string& path, const std::string& name_to_restore) {
  std::lock_guard lock(mutex_);
  const std::string directory = Normal(DirectoryOf(name_to_restore));
  auto state = directories_.find(directory);
  if (state == directories_.end() ||
      !state->second.durable_names.contains(NameIn(name_to_restore))) {
    return Status::OK();
  }
  const std::string trash_path = fmt::format("{}/{}", trash_directory_, trash_files_++);
  if (::link(path.c_str(), trash_path.c_str()) != 0) {
    if (errno == ENOENT) return Status::OK();
    return ErrnoStatus(errno, fmt::format("fault env: cannot keep '{}' in the trash", path));
  }
  state->second.restores.push_back({NameIn(name_to_restore), trash_path});
  if (const std::optional<InodeKey> key = KeyOf(trash_path); key && files_.contains(*key)) {
    files_[*key].paths.push_back(trash_path);
  }
  return Status::OK();
}

std::optional<std::string> FaultInjectionEnv::PathOf(const InodeKey& key,
                                                     const FileState& file) const {
  for (const std::string& path : file.paths) {
    if (KeyOf(path) == key) return path;
  }
  return std::nullopt;
}

void FaultInjectionEnv::RecordInPlaceWrite(const InodeKey& key, uint64_t offset, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  auto file = files_.find(key);
  if (file == files_.end() || offset >= file->second.synced_bytes) return;  // appended: truncated
  const std::optional<std::string> path = PathOf(key, file->second);
  if (!path) return;
  const uint64_t length = std::min(bytes, file->second.synced_bytes - offset);
  Result<std::unique_ptr<RandomAccessFile>> reader = base_->OpenRandomAccess(*path);
  if (!reader.ok()) return;
  std::string old_bytes(length, '\0');
  Result<size_t> read = (*reader)->ReadAt(offset, old_bytes.data(), length);
  if (!read.ok()) return;
  old_bytes.resize(*read);
  file->second.undo.push_back({offset, std::move(old_bytes)});
}

void FaultInjectionEnv::MarkSynced(const InodeKey& key) {
  std::lock_guard lock(mutex_);
  auto file = files_.find(key);
  if (file == files_.end()) return;
  const std::optional<std::string> path = PathOf(key, file->second);
  Result<uint64_t> size = path ? base_->FileSize(*path) : Result<uint64_t>(uint64_t{0});
  file->second.synced_bytes = size.ok() ? *size : 0;
  file->second.undo.clear();
}

Status FaultInjectionEnv::RevertFile(const InodeKey& key, const FileState& file) const {
  const std::optional<std::string> path = PathOf(key, file);
  if (!path) return Status::OK();  // gone for good
  Result<std::unique_ptr<WritableFile>> writer =
      base_->OpenWritable(*path, {.mode = WritableFileOptions::Mode::kOpenExisting});
  SKIPPR_RETURN_IF_ERROR(writer.status());
  SKIPPR_RETURN_IF_ERROR((*writer)->Truncate(file.synced_bytes));
  for (auto undo = file.undo.rbegin(); undo != file.undo.rend(); ++undo) {
    SKIPPR_RETURN_IF_ERROR((*writer)->WriteAt(undo->offset, undo->old_bytes));
  }
  return (*writer)->Close();
}

Status FaultInjectionEnv::RevertDirectory(const std::string& directory,
                                          const DirectoryState& state) const {
  std::error_code error;
  if (!fs::is_directory(directory, error)) return Status::OK();  // removed with its parent
  for (auto restore = state.restores.rbegin(); restore != state.restores.rend(); ++restore) {
    const std::string path = directory + "/" + restore->name;
    if (::rename(restore->trash_path.c_str(), path.c_str()) != 0) {
      return ErrnoStatus(errno, fmt::format("fault env: cannot put '{}' back", path));
    }
  }
  SKIPPR_ASSIGN_OR_RETURN(std::vector<std::string> names, base_->ListDirectory(directory));
  for (const std::string& name : names) {
    const std::string path = directory + "/" + name;
    if (state.durable_names.contains(name) || path == trash_directory_) continue;
    fs::remove_all(path, error);
    if (error) return Status::IOError(fmt::format("fault env: cannot remove '{}': {}", path, error.message()));
  }
  return Status::OK();
}

Status FaultInjectionEnv::DropUnsyncedData() {
  std::lock_guard lock(mutex_);
  Status status;
  for (const auto& [key, file] : files_) {
    Status reverted = RevertFile(key, file);
    if (status.ok()) status = reverted;
  }
  // Deepest first: a directory's own revert may remove a new subdirectory altogether.
  for (auto it = directories_.rbegin(); it != directories_.rend(); ++it) {
    Status reverted = RevertDirectory(it->first, it->second);
    if (status.ok()) status = reverted;
  }
  MarkAllDurable();
  has_power_ = true;
  crash_at_.reset();
  crash_ = nullptr;
  return status;
}

void FaultInjectionEnv::MarkAllDurable() {
  std::lock_guard lock(mutex_);
  files_.clear();
  directories_.clear();
  std::error_code ignored;
  fs::remove_all(trash_directory_, ignored);
  fs::create_directories(trash_directory_, ignored);
}

// ----- Env ---------------------------------------------------------------------------------------

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::OpenWritable(
    const std::string& path, const WritableFileOptions& options) {
  const std::string what = fmt::format("cannot open '{}' for writing", path);
  if (!has_power()) return PowerIsOff(what);
  SKIPPR_ASSIGN_OR_RETURN(const bool exists, base_->FileExists(path));
  const bool creates = !exists && options.mode != WritableFileOptions::Mode::kOpenExisting;
  if (creates) {
    SKIPPR_RETURN_IF_ERROR(BeginOperation("create " + path));
    uint64_t unused = 0;
    if (!FaultFor(FaultKind::kNoSpaceOnCreate, path, 0, &unused).ok()) {
      return ErrnoStatus(ENOSPC, fmt::format("cannot create '{}'", path));
    }
  }
  SeeDirectory(DirectoryOf(path));
  if (exists) SeeFile(path, /*is_new=*/false);
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, base_->OpenWritable(path, options));
  if (creates) SeeFile(path, /*is_new=*/true);
  const std::optional<InodeKey> key = KeyOf(path);
  if (!key) return Status::NotFound(what + ": it vanished after it was opened");
  return std::unique_ptr<WritableFile>(new FaultWritableFile(*this, std::move(base), *key));
}

Result<std::unique_ptr<SequentialFile>> FaultInjectionEnv::OpenSequential(const std::string& path) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot open '{}'", path));
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> base, base_->OpenSequential(path));
  return std::unique_ptr<SequentialFile>(new FaultReadableFile(*this, path, std::move(base), nullptr));
}

Result<std::unique_ptr<RandomAccessFile>> FaultInjectionEnv::OpenRandomAccess(
    const std::string& path) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot open '{}'", path));
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> base, base_->OpenRandomAccess(path));
  return std::unique_ptr<RandomAccessFile>(
      new FaultReadableFile(*this, path, nullptr, std::move(base)));
}

Result<uint64_t> FaultInjectionEnv::FileSize(const std::string& path) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot stat '{}'", path));
  return base_->FileSize(path);
}

Result<bool> FaultInjectionEnv::FileExists(const std::string& path) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot stat '{}'", path));
  return base_->FileExists(path);
}

Result<std::vector<std::string>> FaultInjectionEnv::ListDirectory(const std::string& directory) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot list '{}'", directory));
  return base_->ListDirectory(directory);
}

Result<bool> FaultInjectionEnv::CreateDirectory(const std::string& path, uint32_t permissions) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot create directory '{}'", path));
  std::error_code error;
  if (fs::is_directory(path, error)) return false;  // changes nothing: not an operation
  SKIPPR_RETURN_IF_ERROR(BeginOperation("mkdir " + path));
  SeeDirectory(DirectoryOf(path));
  uint64_t unused = 0;
  if (!FaultFor(FaultKind::kNoSpaceOnCreate, path, 0, &unused).ok()) {
    return ErrnoStatus(ENOSPC, fmt::format("cannot create directory '{}'", path));
  }
  SKIPPR_ASSIGN_OR_RETURN(const bool created, base_->CreateDirectory(path, permissions));
  if (created) {
    std::lock_guard lock(mutex_);
    directories_[Normal(path)] = DirectoryState{};  // nothing in it is durable yet
  }
  return created;
}

Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  SKIPPR_RETURN_IF_ERROR(BeginOperation(fmt::format("rename {} -> {}", from, to)));
  std::lock_guard lock(mutex_);
  SeeDirectory(DirectoryOf(from));
  SeeDirectory(DirectoryOf(to));
  SKIPPR_RETURN_IF_ERROR(KeepInTrash(to, to));  // the file it replaces comes back at a power cut
  SKIPPR_RETURN_IF_ERROR(base_->RenameFile(from, to));
  if (const std::optional<InodeKey> moved = KeyOf(to); moved && files_.contains(*moved)) {
    files_[*moved].paths.push_back(to);
  }
  return KeepInTrash(to, from);  // and so does the old name
}

Status FaultInjectionEnv::RenameFileNoReplace(const std::string& from, const std::string& to) {
  SKIPPR_ASSIGN_OR_RETURN(const bool exists, FileExists(to));
  if (exists) {
    return Status::Conflict(fmt::format("cannot move '{}' to '{}': it exists already", from, to));
  }
  return RenameFile(from, to);
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  SKIPPR_RETURN_IF_ERROR(BeginOperation("remove " + path));
  std::lock_guard lock(mutex_);
  SeeDirectory(DirectoryOf(path));
  SKIPPR_RETURN_IF_ERROR(KeepInTrash(path, path));
  return base_->RemoveFile(path);
}

Status FaultInjectionEnv::SyncFailure(const std::string& what, const std::string& path) {
  uint64_t unused = 0;
  if (FaultFor(FaultKind::kSyncFails, path, 0, &unused).ok()) return Status::OK();
  return ErrnoStatus(EIO, fmt::format("fsync of {} '{}' failed", what, path));
}

Status FaultInjectionEnv::SyncDirectory(const std::string& directory) {
  SKIPPR_RETURN_IF_ERROR(BeginOperation("fsync directory " + directory));
  SKIPPR_RETURN_IF_ERROR(SyncFailure("directory", directory));
  SKIPPR_RETURN_IF_ERROR(base_->SyncDirectory(directory));
  std::lock_guard lock(mutex_);
  const std::string key = Normal(directory);
  auto state = directories_.find(key);
  if (state == directories_.end()) return Status::OK();
  for (const Restore& restore : state->second.restores) ::unlink(restore.trash_path.c_str());
  directories_.erase(state);
  SeeDirectory(key);  // what is in it now is durable
  return Status::OK();
}

Status FaultInjectionEnv::SyncFile(const std::string& path) {
  SKIPPR_RETURN_IF_ERROR(BeginOperation("fsync " + path));
  SKIPPR_RETURN_IF_ERROR(SyncFailure("file", path));
  SKIPPR_RETURN_IF_ERROR(base_->SyncFile(path));
  SeeFile(path, /*is_new=*/false);
  if (const std::optional<InodeKey> key = KeyOf(path)) MarkSynced(*key);
  return Status::OK();
}

Result<std::unique_ptr<FileLock>> FaultInjectionEnv::LockFile(const std::string& path,
                                                              uint32_t permissions) {
  if (!has_power()) return PowerIsOff(fmt::format("cannot lock '{}'", path));
  SeeDirectory(DirectoryOf(path));
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<FileLock> base, base_->LockFile(path, permissions));
  return std::unique_ptr<FileLock>(new FaultFileLock(*this, path, std::move(base)));
}

}  // namespace skippr::testing
