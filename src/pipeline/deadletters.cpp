// Deadletter totals in the catalog family and the live deadletter rows (landing.hpp): what
// `status` counts (docs/formats/deadletters.md).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "pipeline/landing.hpp"

namespace skippr::pipeline::internal {

namespace {

constexpr int kTotalsFormatVersion = 1;

std::string TotalsKey() { return store::KeyBuilder().Text("deadletter_totals").key(); }

Result<DeadletterTotals> TotalsFromJson(const std::optional<std::string>& text) {
  DeadletterTotals totals;
  if (!text) return totals;
  try {
    const nlohmann::json json = nlohmann::json::parse(*text);
    totals.landed = json.at("landed").get<uint64_t>();
    totals.discarded = json.at("discarded").get<uint64_t>();
    return totals;
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(fmt::format(
        "the deadletter totals record in the store's catalog is unreadable ({}); the store is "
        "damaged: restore DATA_DIR from a backup",
        error.what()));
  }
}

}  // namespace

Result<DeadletterTotals> ReadDeadletterTotals(const store::ReadTransaction& read) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> text,
                          read.Get(store::Family::kCatalog, TotalsKey()));
  return TotalsFromJson(text);
}

Status AddDeadletterTotals(store::WriteTransaction& write, const DeadletterTotals& added) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> text,
                          write.Get(store::Family::kCatalog, TotalsKey()));
  SKIPPR_ASSIGN_OR_RETURN(DeadletterTotals totals, TotalsFromJson(text));
  totals.landed += added.landed;
  totals.discarded += added.discarded;
  return write.Put(store::Family::kCatalog, TotalsKey(),
                   nlohmann::json{{"format_version", kTotalsFormatVersion},
                                  {"landed", totals.landed},
                                  {"discarded", totals.discarded}}
                       .dump());
}

int64_t LiveDeadletterRows(const std::vector<wal::SegmentEntry>& segments,
                           const std::set<lake::SliceRef>& landed) {
  int64_t rows = 0;
  for (const wal::SegmentEntry& segment : segments) {
    for (const wal::SliceSummary& slice : segment.slices) {
      if (slice.namespace_name != schema::kDeadlettersNamespace) continue;
      if (!landed.contains({segment.segment_id, slice.ordinal})) rows += slice.rows;
    }
  }
  return rows;
}

}  // namespace skippr::pipeline::internal
