// Deadletter totals in the catalog family and the counts `status` shows (landing.hpp,
// docs/formats/deadletters.md).
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

Result<DeadletterCounts> ReadDeadletterCounts(const store::ReadTransaction& read,
                                              const std::vector<wal::SegmentEntry>& live_segments) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> text,
                          read.Get(store::Family::kCatalog, TotalsKey()));
  SKIPPR_ASSIGN_OR_RETURN(const DeadletterTotals totals, TotalsFromJson(text));
  SKIPPR_ASSIGN_OR_RETURN(const LandingState landing, ReadLandingState(read));
  DeadletterCounts counts;
  for (const wal::SegmentEntry& segment : live_segments) {
    for (const wal::SliceSummary& slice : segment.slices) {
      if (slice.namespace_name != schema::kDeadlettersNamespace) continue;
      if (!landing.landed.contains({segment.segment_id, slice.ordinal})) {
        counts.live += static_cast<uint64_t>(slice.rows);
      }
    }
  }
  counts.landed = totals.landed;
  counts.discarded = totals.discarded;
  counts.committed = counts.live + counts.landed + counts.discarded;
  return counts;
}

}  // namespace skippr::pipeline::internal
