// A landing's batches as DuckDB sees them (internal/landing_sql.hpp).
#include "sinks/internal/landing_sql.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace skippr::sinks::internal {

namespace {

constexpr std::string_view kLandingPipeline = "skippr_landing";

}  // namespace

Status RegisterLanding(query::Engine& engine, const schema::NamespaceSchema& namespace_schema,
                       const std::vector<std::shared_ptr<const Batch>>& batches) {
  query::TableSource source;
  source.pipeline = std::string(kLandingPipeline);
  source.namespace_name = namespace_schema.name;
  source.fields = namespace_schema.fields;
  source.batches = query::BatchList::InMemory(batches);
  return engine.RegisterTable(std::move(source));
}

std::string LandingScan(const std::string& namespace_name, bool with_change_columns) {
  return fmt::format("wal_scan({}, {}{})", query::QuoteLiteral(kLandingPipeline),
                     query::QuoteLiteral(namespace_name),
                     with_change_columns ? ", with_change_columns := true" : "");
}

bool CarriesOrderTokens(const std::vector<std::shared_ptr<const Batch>>& batches) {
  return std::any_of(batches.begin(), batches.end(),
                     [](const auto& batch) { return batch->cdc.has_value(); });
}

std::string KeysCompared(const std::vector<std::string>& keys, std::string_view left,
                         std::string_view right, std::string_view op) {
  std::vector<std::string> terms;
  for (const std::string& key : keys) {
    terms.push_back(
        fmt::format("{0}.{3} {2} {1}.{3}", left, right, op, query::QuoteIdentifier(key)));
  }
  return fmt::format("{}", fmt::join(terms, " AND "));
}

std::string QuotedList(const std::vector<std::string>& names, std::string_view prefix) {
  std::vector<std::string> quoted;
  for (const std::string& name : names) {
    quoted.push_back(std::string(prefix) + query::QuoteIdentifier(name));
  }
  return fmt::format("{}", fmt::join(quoted, ", "));
}

std::string NewestChangePerKeySql(const std::string& namespace_name,
                                  const std::vector<std::string>& key_columns) {
  const std::string changes = LandingScan(namespace_name, true);
  const std::string truncate =
      fmt::format("(SELECT max({}) FROM {} WHERE {})", query::kOrderTokenColumn, changes,
                  query::kTruncateColumn);
  return fmt::format(
      "SELECT * EXCLUDE ({0}, {1}) FROM {2} WHERE NOT {0} AND (({3}) IS NULL OR {4} > ({3})) "
      "QUALIFY row_number() OVER (PARTITION BY {5} ORDER BY {4} DESC, {6} DESC) = 1",
      query::kTruncateColumn, query::kLandedColumn, changes, truncate, query::kOrderTokenColumn,
      QuotedList(key_columns), query::kOrdinalColumn);
}

std::string LandingTruncateSql(const std::string& namespace_name) {
  return fmt::format("SELECT count(*), coalesce(hex(max({})), '') FROM {} WHERE {}",
                     query::kOrderTokenColumn, LandingScan(namespace_name, true),
                     query::kTruncateColumn);
}

}  // namespace skippr::sinks::internal
