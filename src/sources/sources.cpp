#include "sources/sources.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "sources/postgres_source.hpp"
#include "sources/source_kinds.hpp"

namespace skippr::sources {

namespace {
// Version 2 adds the file's version, its resume point with the fingerprint of what was read, and
// the hash of the bytes a re-read skips; version 1 positions are read as unverified.
constexpr int kPositionFormatVersion = 2;

// offsets family: ("partition", <partition id>) → JSON (docs/formats/store.md, "offsets family").
// An id too long for a key (LMDB keys end at 511 bytes: a deep path, a long S3 key) is keyed by its
// first bytes and the SHA-256 of the whole id, and the position keeps the whole id.
constexpr size_t kLongestPartitionKeyBytes = 480;
constexpr size_t kHashedIdPrefixBytes = 200;  // at most 400 bytes once escaped
constexpr std::string_view kHashedIdMarker = "\x01sha256:";

bool IsHashedKey(const std::string& key) { return key.size() > kLongestPartitionKeyBytes; }

std::string PartitionKey(const std::string& partition) {
  std::string key = store::KeyBuilder().Text("partition").Text(partition).key();
  if (!IsHashedKey(key)) return key;
  const std::string hashed = partition.substr(0, kHashedIdPrefixBytes) +
                             std::string(kHashedIdMarker) + Sha256Hex(partition);
  key = store::KeyBuilder().Text("partition").Text(hashed).key();
  SKIPPR_CHECK(!IsHashedKey(key));
  return key;
}

std::string Hex64(uint64_t value) { return fmt::format("{:016x}", value); }
uint64_t FromHex64(const nlohmann::json& text) {
  const std::string digits = text.get<std::string>();
  size_t parsed = 0;
  const uint64_t value = std::stoull(digits, &parsed, 16);
  if (parsed != digits.size() || digits.size() != 16) {
    throw std::invalid_argument("'" + digits + "' is not 16 hex digits");
  }
  return value;
}

nlohmann::json ResumeToJson(const ResumePoint& resume) {
  return {{"file_offset", resume.prefix.file_bytes},
          {"head_hash", Hex64(resume.prefix.head_hash)},
          {"tail_hash", Hex64(resume.prefix.tail_hash)},
          {"fingerprint_bytes", resume.prefix.window_bytes},
          {"byte_offset", resume.byte_offset},
          {"line", resume.line},
          {"records", resume.records}};
}

ResumePoint ResumeFromJson(const nlohmann::json& json) {
  return {{json.at("file_offset").get<uint64_t>(), FromHex64(json.at("head_hash")),
           FromHex64(json.at("tail_hash")), json.at("fingerprint_bytes").get<uint64_t>()},
          json.at("byte_offset").get<uint64_t>(),
          json.at("line").get<uint64_t>(),
          json.at("records").get<uint64_t>()};
}

// Format 1 knew where to go on but could not check the file: its unfinished files resume as they
// did then (a plain JSON-lines file at its byte offset, anything else by skipping records).
void UpgradeFormat1(PartitionPosition& position) {
  position.is_unverified = true;
  if (position.byte_offset > 0) {
    position.resume = {{position.byte_offset, 0, 0, 0}, position.byte_offset, position.next_line,
                       position.records_consumed};
  }
}

PartitionPosition PositionFromJson(const nlohmann::json& json) {
  const int version = json.at("format_version").get<int>();
  PartitionPosition position;
  position.size_bytes = json.at("size_bytes").get<uint64_t>();
  position.mtime_ns = json.at("mtime_ns").get<int64_t>();
  position.records_consumed = json.at("records_consumed").get<uint64_t>();
  position.byte_offset = json.at("byte_offset").get<uint64_t>();
  position.next_line = json.at("next_line").get<uint64_t>();
  position.is_closed = json.at("is_closed").get<bool>();
  if (version == 1) {
    UpgradeFormat1(position);
    return position;
  }
  position.version = json.at("version").get<uint64_t>();
  position.version_reason = json.value("version_reason", std::string());
  position.resume = ResumeFromJson(json.at("resume"));
  position.skipped_bytes_hash = FromHex64(json.at("skipped_bytes_hash"));
  position.ends_at_line_end = json.at("ends_at_line_end").get<bool>();
  position.cursor = json.value("cursor", std::string());
  position.object_etag = json.value("object_etag", std::string());
  return position;
}

nlohmann::json PositionToJson(const PartitionPosition& position) {
  // A pass that reads a file fingerprints what it read: only positions loaded from format 1 are
  // unverified, and they are never written back.
  SKIPPR_CHECK_MSG(!position.is_unverified, "a position without a fingerprint is being saved");
  nlohmann::json json = {{"format_version", kPositionFormatVersion},
                         {"size_bytes", position.size_bytes},
                         {"mtime_ns", position.mtime_ns},
                         {"records_consumed", position.records_consumed},
                         {"byte_offset", position.byte_offset},
                         {"next_line", position.next_line},
                         {"is_closed", position.is_closed},
                         {"version", position.version},
                         {"resume", ResumeToJson(position.resume)},
                         {"skipped_bytes_hash", Hex64(position.skipped_bytes_hash)},
                         {"ends_at_line_end", position.ends_at_line_end}};
  if (!position.version_reason.empty()) json["version_reason"] = position.version_reason;
  if (!position.cursor.empty()) json["cursor"] = position.cursor;
  if (!position.object_etag.empty()) json["object_etag"] = position.object_etag;
  return json;
}

template <typename Transaction>
Result<SourcePositions> LoadFrom(const Transaction& transaction) {
  SourcePositions positions;
  Status failure;
  SKIPPR_RETURN_IF_ERROR(transaction.Scan(
      store::Family::kOffsets, store::KeyBuilder().Text("partition").key(),
      [&](std::string_view key, std::string_view value) {
        store::KeyReader reader(key);
        Result<std::string> kind = reader.Text();
        Result<std::string> partition = kind.ok() ? reader.Text() : kind;
        if (!partition.ok()) {
          failure = partition.status();
          return false;
        }
        try {
          const nlohmann::json json = nlohmann::json::parse(value);
          const int version = json.at("format_version").get<int>();
          if (version < 1 || version > kPositionFormatVersion) {
            failure = Status::NotSupported(fmt::format(
                "source position of '{}' has format version {}; this skipprd reads 1 to {}: run "
                "a newer skipprd on this DATA_DIR",
                *partition, version, kPositionFormatVersion));
            return false;
          }
          // A long id's key holds a hash of it; the position holds it whole.
          positions[json.value("partition", *partition)] = PositionFromJson(json);
        } catch (const std::exception& error) {
          failure = Status::Corruption(fmt::format(
              "source position of '{}' is unreadable: {}; the store is damaged: restore DATA_DIR "
              "from a backup",
              *partition, error.what()));
          return false;
        }
        return true;
      }));
  SKIPPR_RETURN_IF_ERROR(failure);
  return positions;
}
}  // namespace

Result<SourcePositions> LoadPositions(const store::ReadTransaction& transaction) {
  return LoadFrom(transaction);
}
Result<SourcePositions> LoadPositions(const store::WriteTransaction& transaction) {
  return LoadFrom(transaction);
}

Status SavePositions(store::WriteTransaction& transaction, const SourcePositions& positions) {
  for (const auto& [partition, position] : positions) {
    nlohmann::json json = PositionToJson(position);
    const std::string key = PartitionKey(partition);
    if (key != store::KeyBuilder().Text("partition").Text(partition).key()) {
      json["partition"] = partition;
    }
    SKIPPR_RETURN_IF_ERROR(transaction.Put(store::Family::kOffsets, key, json.dump()));
  }
  return Status::OK();
}

std::vector<SourceCheck> CheckSource(const config::ConnectorConfig& connector,
                                     const std::string& source_name) {
  if (connector.kind == "Postgres") return postgres::CheckPostgres(connector, source_name);
  if (connector.kind == "S3") return internal::CheckS3(connector, source_name);
  return {};
}

Result<std::optional<ServerState>> ReadServerState(const config::ConnectorConfig& connector,
                                                   const std::string& source_name) {
  if (connector.kind == "Postgres") return postgres::ReadSlotState(connector, source_name);
  return std::optional<ServerState>();
}

void LayoutBoard::Publish(std::shared_ptr<const schema::RecordLayout> layout) {
  std::lock_guard lock(mutex_);
  layout_ = std::move(layout);
}

std::shared_ptr<const schema::RecordLayout> LayoutBoard::Current() const {
  std::lock_guard lock(mutex_);
  return layout_;
}

Result<std::unique_ptr<Source>> MakeSource(const config::ConnectorConfig& connector,
                                           const std::string& source_name) {
  if (connector.kind == "Sample") return internal::MakeSampleSource(connector);
  if (connector.kind == "File") return internal::MakeFileSource(connector);
  if (connector.kind == "Postgres") return postgres::MakePostgresSource(connector, source_name);
  if (connector.kind == "S3") return internal::MakeS3Source(connector, source_name);
  return Status::NotSupported(fmt::format(
      "the {} source is not available in this build yet; sources available: File, Postgres, "
      "S3, Sample",
      connector.kind));
}

}  // namespace skippr::sources
