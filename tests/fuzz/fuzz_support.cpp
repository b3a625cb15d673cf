#include "fuzz/fuzz_support.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "wal/segment.hpp"

namespace skippr::fuzz {

namespace fs = std::filesystem;

void InvariantFailed(const char* condition, const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s — %s\n", file, line, condition,
               what.c_str());
  std::abort();
}

namespace {

std::string MakePrivateDirectory() {
  const fs::path parent = fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                                                        : fs::temp_directory_path();
  std::string pattern = (parent / "skippr-fuzz-XXXXXX").string();
  FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr, std::strerror(errno));
  return pattern;
}

// Every ScratchFile's directory, removed at exit (libFuzzer ends with exit(), not by returning).
std::vector<std::string>& DirectoriesToRemove() {
  static std::vector<std::string>* directories = [] {
    auto* list = new std::vector<std::string>();
    std::atexit([] {
      std::error_code ignored;
      for (const std::string& directory : DirectoriesToRemove()) fs::remove_all(directory, ignored);
    });
    return list;
  }();
  return *directories;
}

void WriteWhole(const std::string& path, const void* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, path + ": " + std::strerror(errno));
  const char* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, at, size);
    FUZZ_CHECK(written > 0, path + ": " + std::strerror(errno));
    at += written;
    size -= static_cast<size_t>(written);
  }
  ::close(fd);
}

}  // namespace

ScratchFile::ScratchFile(const std::string& file_name)
    : directory_(MakePrivateDirectory()), path_(directory_ + "/" + file_name) {
  DirectoriesToRemove().push_back(directory_);
}

void ScratchFile::Write(const uint8_t* data, size_t size) const { WriteWhole(path_, data, size); }

void ScratchFile::WriteBeside(const std::string& file_name, std::string_view contents) const {
  const std::string path = directory_ + "/" + file_name;
  if (contents.empty()) {
    ::unlink(path.c_str());
    return;
  }
  WriteWhole(path, contents.data(), contents.size());
}

bool SameColumn(const Column& a, const Column& b) {
  if (!(a.type == b.type) || a.length != b.length || a.validity != b.validity ||
      a.fixed != b.fixed || a.offsets != b.offsets || a.bytes != b.bytes ||
      a.children.size() != b.children.size()) {
    return false;
  }
  for (size_t i = 0; i < a.children.size(); ++i) {
    if (!SameColumn(a.children[i], b.children[i])) return false;
  }
  return true;
}

bool SameBatch(const Batch& a, const Batch& b) {
  if (a.namespace_name != b.namespace_name || a.schema_id != b.schema_id || a.fields != b.fields ||
      a.num_rows != b.num_rows || a.columns.size() != b.columns.size() ||
      a.cdc.has_value() != b.cdc.has_value()) {
    return false;
  }
  for (size_t i = 0; i < a.columns.size(); ++i) {
    if (!SameColumn(a.columns[i], b.columns[i])) return false;
  }
  if (!a.cdc) return true;
  return a.cdc->mutations == b.cdc->mutations && a.cdc->event_ids == b.cdc->event_ids &&
         a.cdc->order_tokens == b.cdc->order_tokens && a.cdc->business_keys == b.cdc->business_keys;
}

void CheckWalRoundTrip(const std::vector<Batch>& batches) {
  wal::SegmentHeader header;
  header.instance_id = "0123456789abcdef0123456789abcdef";  // every store has one
  header.pipeline = "fuzz";
  header.segment_id = 1;
  header.sequence = 1;
  header.source_positions = "{}";
  const wal::SegmentBytes bytes = wal::EncodeSegment(header, batches);
  const std::string_view view(bytes.data(), bytes.size());
  Result<wal::SegmentReader> verified = wal::SegmentReader::VerifyBytes(view, "fuzz.seg");
  FUZZ_CHECK(verified.ok(), verified.status().message());
  Result<wal::SegmentReader> reader = wal::SegmentReader::FromBytes(std::string(view), "fuzz.seg");
  FUZZ_CHECK(reader.ok(), reader.status().message());
  FUZZ_CHECK(reader->slices().size() == batches.size(), "slice count");
  for (uint32_t ordinal = 0; ordinal < batches.size(); ++ordinal) {
    Result<Batch> decoded = reader->ReadSlice(ordinal);
    FUZZ_CHECK(decoded.ok(), decoded.status().message());
    FUZZ_CHECK(SameBatch(*decoded, batches[ordinal]),
               fmt::format("slice {} decodes to another batch than was encoded", ordinal));
  }
}

void CheckCodeIn(const Status& status, std::initializer_list<StatusCode> allowed,
                 std::string_view context) {
  for (StatusCode code : allowed) {
    if (status.code() == code) return;
  }
  InvariantFailed("status code allowed", __FILE__, __LINE__,
                  fmt::format("{}: unexpected {}", context, status.ToString()));
}

}  // namespace skippr::fuzz
