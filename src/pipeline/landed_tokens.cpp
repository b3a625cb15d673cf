// The order tokens a keyed CDC namespace's table already reflects (landing.hpp, LandedTokens).
#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "pipeline/landing.hpp"

namespace skippr::pipeline::internal {

namespace {

std::string KeyPrefix(const std::string& namespace_name) {
  return store::KeyBuilder().Text("landed_key").Text(namespace_name).key();
}
std::string KeyOf(const std::string& namespace_name, std::string_view business_key) {
  return store::KeyBuilder().Text("landed_key").Text(namespace_name).Bytes(business_key).key();
}
std::string TruncateKey(const std::string& namespace_name) {
  return store::KeyBuilder().Text("landed_truncate").Text(namespace_name).key();
}

// Rows `keep` of `batch`, with their CDC changes.
std::shared_ptr<const Batch> RowsOf(const Batch& batch, const std::vector<int64_t>& keep) {
  auto kept = std::make_shared<Batch>();
  kept->namespace_name = batch.namespace_name;
  kept->schema_id = batch.schema_id;
  kept->fields = batch.fields;
  kept->cdc.emplace();
  for (const Column& column : batch.columns) {
    Column& copy = kept->columns.emplace_back(column.type);
    for (const int64_t row : keep) copy.Append(column.ValueAt(row));
  }
  for (const int64_t row : keep) {
    const auto at = static_cast<size_t>(row);
    kept->cdc->Append(RowChange{batch.cdc->mutations[at], std::string(batch.cdc->event_ids[at]),
                                std::string(batch.cdc->order_tokens[at]),
                                std::string(batch.cdc->business_keys[at])});
  }
  kept->num_rows = static_cast<int64_t>(keep.size());
  return kept;
}

}  // namespace

Result<std::optional<std::string>> LandedTokens::ReadKey(const store::ReadTransaction& read,
                                                         const std::string& namespace_name,
                                                         std::string_view business_key) {
  return read.Get(store::Family::kCatalog, KeyOf(namespace_name, business_key));
}

Result<std::optional<std::string>> LandedTokens::ReadTruncate(const store::ReadTransaction& read,
                                                              const std::string& namespace_name) {
  return read.Get(store::Family::kCatalog, TruncateKey(namespace_name));
}

Result<bool> LandedTokens::HasKeys(const store::ReadTransaction& read,
                                   const std::string& namespace_name) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> any_key,
                          read.LastKey(store::Family::kCatalog, KeyPrefix(namespace_name)));
  return any_key.has_value();
}

Result<LandedTokens> LandedTokens::Read(const store::ReadTransaction& read,
                                        const std::string& namespace_name,
                                        const std::vector<std::shared_ptr<const Batch>>& batches) {
  LandedTokens tokens;
  tokens.namespace_name_ = namespace_name;
  tokens.batches_ = &batches;
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> truncate, ReadTruncate(read, namespace_name));
  if (truncate) tokens.landed_truncate_ = std::move(*truncate);
  // A namespace without entries (its first landings: a snapshot, typically) reads nothing per row.
  SKIPPR_ASSIGN_OR_RETURN(const bool has_keys, HasKeys(read, namespace_name));
  if (!has_keys) return tokens;
  for (const std::shared_ptr<const Batch>& batch : batches) {
    if (!batch->cdc) continue;
    for (size_t row = 0; row < batch->cdc->size(); ++row) {
      const std::string_view business_key = batch->cdc->business_keys[row];
      if (business_key.empty() || tokens.landed_.contains(business_key)) continue;
      SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> token,
                              ReadKey(read, namespace_name, business_key));
      if (token) tokens.landed_.emplace(business_key, std::move(*token));
    }
  }
  return tokens;
}

bool LandedTokens::IsLanded(std::string_view business_key, std::string_view order_token) const {
  if (order_token.empty()) return false;  // a change without an order: always applied
  if (!landed_truncate_.empty() && order_token <= landed_truncate_) return true;
  auto landed = landed_.find(business_key);
  return landed != landed_.end() && order_token <= landed->second;
}

std::vector<std::shared_ptr<const Batch>> LandedTokens::NewChanges() const {
  std::vector<std::shared_ptr<const Batch>> changes;
  for (const std::shared_ptr<const Batch>& batch : *batches_) {
    std::vector<int64_t> keep;
    if (batch->cdc) {
      for (int64_t row = 0; row < batch->num_rows; ++row) {
        const auto at = static_cast<size_t>(row);
        if (!IsLanded(batch->cdc->business_keys[at], batch->cdc->order_tokens[at])) {
          keep.push_back(row);
        }
      }
    }
    if (!batch->cdc || keep.size() == static_cast<size_t>(batch->num_rows)) {
      changes.push_back(batch);
    } else {
      changes.push_back(RowsOf(*batch, keep));
    }
  }
  return changes;
}

Status LandedTokens::Record(store::WriteTransaction& write) const {
  std::string newest_truncate = landed_truncate_;
  std::unordered_map<std::string_view, std::string_view> newest;
  for (const std::shared_ptr<const Batch>& batch : *batches_) {
    if (!batch->cdc) continue;
    for (size_t row = 0; row < batch->cdc->size(); ++row) {
      const std::string_view token = batch->cdc->order_tokens[row];
      if (batch->cdc->mutations[row] == Mutation::kTruncate) {
        newest_truncate = std::max(newest_truncate, std::string(token));
        continue;
      }
      const std::string_view business_key = batch->cdc->business_keys[row];
      if (business_key.empty() || token.empty()) continue;
      auto [entry, added] = newest.emplace(business_key, token);
      if (!added && token > entry->second) entry->second = token;
    }
  }
  if (newest_truncate != landed_truncate_) {
    // Every key's older token is covered by the truncate now.
    SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, TruncateKey(namespace_name_),
                                     newest_truncate));
    SKIPPR_RETURN_IF_ERROR(write.DeletePrefix(store::Family::kCatalog, KeyPrefix(namespace_name_)));
  }
  // In key order: the store's B-tree then fills its pages in order.
  std::vector<std::pair<std::string_view, std::string_view>> puts;
  for (const auto& [business_key, token] : newest) {
    if (token <= newest_truncate) continue;
    auto landed = landed_.find(business_key);
    if (newest_truncate == landed_truncate_ && landed != landed_.end() &&
        token <= landed->second) {
      continue;
    }
    puts.emplace_back(business_key, token);
  }
  std::sort(puts.begin(), puts.end());
  for (const auto& [business_key, token] : puts) {
    SKIPPR_RETURN_IF_ERROR(
        write.Put(store::Family::kCatalog, KeyOf(namespace_name_, business_key), token));
  }
  return Status::OK();
}

}  // namespace skippr::pipeline::internal
