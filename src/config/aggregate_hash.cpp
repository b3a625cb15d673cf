// The canonical aggregate config hash (seeds/materialised-views.txt: a change rebuilds the
// aggregate). Its input format is frozen: changing it would rebuild every user's aggregates on
// upgrade.
#include <fmt/format.h>

#include <algorithm>

#include "config/config.hpp"
#include "core/hash.hpp"

namespace skippr::config {

namespace {
// Length-prefixed, so no choice of names can make two different configs print the same text.
void AppendField(std::string& out, std::string_view text) {
  out += fmt::format("{}:{};", text.size(), text);
}
}  // namespace

std::string AggregateConfig::ConfigHash() const {
  std::string canonical = "skippr.aggregate.v1;";
  AppendField(canonical, id);
  canonical += fmt::format("keys={};", key_fields.size());
  for (const std::string& key : key_fields) AppendField(canonical, key);
  std::vector<const AggregateMeasure*> sorted;
  for (const AggregateMeasure& measure : measures) sorted.push_back(&measure);
  std::sort(sorted.begin(), sorted.end(),
            [](const AggregateMeasure* a, const AggregateMeasure* b) { return a->name < b->name; });
  canonical += fmt::format("measures={};", sorted.size());
  for (const AggregateMeasure* measure : sorted) {
    AppendField(canonical, measure->name);
    AppendField(canonical, measure->kind == MeasureKind::kSum ? "sum" : "count");
    AppendField(canonical, measure->field);
  }
  return Sha256Hex(canonical);
}

}  // namespace skippr::config
