// Durable file helpers over an Env (core/env.hpp), whose errors name the path: a file written here
// survives a crash once the call returns (its data is synced, and so is the directory entry naming
// it).
#pragma once

#include <string>
#include <string_view>

#include "core/env.hpp"
#include "core/status.hpp"

namespace skippr {

// Creates the missing components of `directory` (with `permissions`), syncing each parent so that
// a new entry survives a crash (a file synced inside a directory whose own entry was lost is lost
// too). Components that exist keep their mode.
Status CreateDirectoriesDurably(Env& env, const std::string& directory,
                                uint32_t permissions = 0755);

// The directory part of `path` ("." for a bare name).
std::string DirectoryOf(const std::string& path);

// Creates `directory` and every missing parent with mode 0700, durably (CreateDirectoriesDurably
// with 0700) — DATA_DIR, pipeline, store, WAL and log directories hold data and connector state
// only this user may read. The Env chmods after mkdir, so neither a permissive nor a strict umask
// changes the mode; components that exist keep theirs. `what` names the directory in errors
// ("pipeline", "log").
Status CreatePrivateDirectories(Env& env, const std::string& directory, std::string_view what);

Result<std::string> ReadWholeFile(Env& env, const std::string& path);

// A durable file under a temporary name, removed on destruction unless Release()d (renamed away).
class TemporaryFile {
 public:
  TemporaryFile(Env& env, std::string path) : env_(&env), path_(std::move(path)) {}
  TemporaryFile(TemporaryFile&& other) noexcept;
  TemporaryFile& operator=(TemporaryFile&&) = delete;
  ~TemporaryFile();
  const std::string& path() const { return path_; }
  void Release() { path_.clear(); }

 private:
  Env* env_;
  std::string path_;
};

// Writes `bytes` to a fresh `.{name}.{random}.tmp` in `directory` (mode 0644: other tools read what
// we write) and fdatasyncs it. The leading dot keeps readers' directory listings from taking it for
// a real file. An fdatasync failure is final for the file (the kernel may have dropped its dirty
// pages; a retry on the same descriptor could falsely succeed): it is removed.
Result<TemporaryFile> WriteTemporaryFile(Env& env, const std::string& directory,
                                         std::string_view name, std::string_view bytes);

// Replaces `path` with `bytes` atomically and durably: temporary file, fdatasync, rename, directory
// fsync. Readers see the old or the new file, never a part.
Status WriteFileAtomically(Env& env, const std::string& path, std::string_view bytes);

}  // namespace skippr
