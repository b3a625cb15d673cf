#include "sources/sources.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "sources/source_kinds.hpp"

namespace skippr::sources {

namespace {
constexpr int kPositionFormatVersion = 1;

// offsets family: ("partition", <partition id>) → JSON (docs/formats/store.md, "offsets family").
std::string PartitionKey(const std::string& partition) {
  return store::KeyBuilder().Text("partition").Text(partition).key();
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
          if (json.at("format_version").get<int>() != kPositionFormatVersion) {
            failure = Status::NotSupported(fmt::format(
                "source position of '{}' has format version {}; this skipprd reads {}", *partition,
                json.at("format_version").get<int>(), kPositionFormatVersion));
            return false;
          }
          PartitionPosition& position = positions[*partition];
          position.size_bytes = json.at("size_bytes").get<uint64_t>();
          position.mtime_ns = json.at("mtime_ns").get<int64_t>();
          position.records_consumed = json.at("records_consumed").get<uint64_t>();
          position.byte_offset = json.at("byte_offset").get<uint64_t>();
          position.next_line = json.at("next_line").get<uint64_t>();
          position.is_closed = json.at("is_closed").get<bool>();
        } catch (const nlohmann::json::exception& error) {
          failure = Status::Corruption(fmt::format("source position of '{}' is unreadable: {}",
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
    const nlohmann::json json = {{"format_version", kPositionFormatVersion},
                                 {"size_bytes", position.size_bytes},
                                 {"mtime_ns", position.mtime_ns},
                                 {"records_consumed", position.records_consumed},
                                 {"byte_offset", position.byte_offset},
                                 {"next_line", position.next_line},
                                 {"is_closed", position.is_closed}};
    SKIPPR_RETURN_IF_ERROR(transaction.Put(store::Family::kOffsets, PartitionKey(partition), json.dump()));
  }
  return Status::OK();
}

Result<std::unique_ptr<Source>> MakeSource(const config::ConnectorConfig& connector) {
  if (connector.kind == "Sample") return internal::MakeSampleSource(connector);
  if (connector.kind == "File") return internal::MakeFileSource(connector);
  return Status::NotSupported(fmt::format(
      "the {} source is not available in this build yet; sources available: File, Sample",
      connector.kind));
}

}  // namespace skippr::sources
