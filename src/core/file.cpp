#include "core/file.hpp"

#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <utility>

namespace skippr {

namespace {
constexpr uint32_t kFileMode = 0644;
constexpr uint32_t kPrivateDirectoryMode = 0700;
constexpr size_t kReadChunkBytes = 64 * 1024;

uint64_t RandomSuffix() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
    value = static_cast<uint64_t>(getpid()) << 32 ^ static_cast<uint64_t>(time(nullptr));
  }
  return value;
}
}  // namespace

std::string DirectoryOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

Status CreateDirectoriesDurably(Env& env, const std::string& directory, uint32_t permissions) {
  // A URI ("s3://bucket/prefix", for an Env over object storage) is taken as written: normalising
  // it as a local path would fold its "//".
  const bool is_uri = directory.find("://") != std::string::npos;
  std::filesystem::path normal = is_uri ? std::filesystem::path(directory)
                                        : std::filesystem::path(directory).lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path()) normal = normal.parent_path();  // "a/b/"
  const std::string path = normal.string();
  Result<bool> created = env.CreateDirectory(path, permissions);
  const bool has_parent = normal.has_parent_path() && normal.parent_path() != normal;
  if (!created.ok() && created.status().code() == StatusCode::kNotFound && has_parent) {
    SKIPPR_RETURN_IF_ERROR(
        CreateDirectoriesDurably(env, normal.parent_path().string(), permissions));
    created = env.CreateDirectory(path, permissions);
  }
  SKIPPR_RETURN_IF_ERROR(created.status());
  if (!*created) return Status::OK();
  return env.SyncDirectory(DirectoryOf(path));
}

Status CreatePrivateDirectories(Env& env, const std::string& directory, std::string_view what) {
  Status created = CreateDirectoriesDurably(env, directory, kPrivateDirectoryMode);
  if (created.ok()) return created;
  return Status(created.code(),
                fmt::format("cannot create the {} directory '{}': {}; check that the path is a "
                            "directory this user may write to",
                            what, directory, created.message()));
}

Result<std::string> ReadWholeFile(Env& env, const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env.OpenSequential(path));
  std::string bytes;
  while (true) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kReadChunkBytes);
    Result<size_t> read = file->Read(bytes.data() + old_size, kReadChunkBytes);
    if (!read.ok()) return read.status();
    bytes.resize(old_size + *read);
    if (*read == 0) return bytes;
  }
}

TemporaryFile::TemporaryFile(TemporaryFile&& other) noexcept
    : env_(other.env_), path_(std::exchange(other.path_, "")) {}

TemporaryFile::~TemporaryFile() {
  if (!path_.empty()) (void)env_->RemoveFile(path_);
}

Result<TemporaryFile> WriteTemporaryFile(Env& env, const std::string& directory,
                                         std::string_view name, std::string_view bytes) {
  const std::string path = fmt::format("{}/.{}.{:016x}.tmp", directory, name, RandomSuffix());
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                          env.OpenWritable(path, {.mode = WritableFileOptions::Mode::kCreateNew,
                                                  .permissions = kFileMode}));
  TemporaryFile temporary(env, path);  // ours from here: removed on every failure below
  SKIPPR_RETURN_IF_ERROR(file->WriteAt(0, bytes));
  SKIPPR_RETURN_IF_ERROR(file->Sync());
  SKIPPR_RETURN_IF_ERROR(file->Close());
  return temporary;
}

Status WriteFileAtomically(Env& env, const std::string& path, std::string_view bytes) {
  const std::string directory = DirectoryOf(path);
  const std::string name = std::filesystem::path(path).filename().string();
  SKIPPR_ASSIGN_OR_RETURN(TemporaryFile temporary, WriteTemporaryFile(env, directory, name, bytes));
  SKIPPR_RETURN_IF_ERROR(env.RenameFile(temporary.path(), path));
  temporary.Release();
  return env.SyncDirectory(directory);
}

}  // namespace skippr
