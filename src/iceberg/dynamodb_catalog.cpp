// The catalog in a DynamoDB table, for warehouses with no database beside them (a lake on S3).
// Items (the layout of the reference's single-table store, §4.2; pk and sk are strings):
//   pk catalog#{sha256(warehouse)}                       sk namespace#{name}  properties
//   pk catalog#{sha256(warehouse)}#namespace#{namespace} sk table#{name}      metadata_location,
//                                                        previous_metadata_location, generation
// Names are written length-prefixed ("7:default"), so no name can run into the next component.
// A commit is one conditional UpdateItem on the table's item: the compare-and-set of its
// metadata_location.
#include "iceberg/internal/catalog_names.hpp"
#include "iceberg/internal/dynamodb_catalog.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

#include "aws/aws.hpp"
#include "core/environment.hpp"
#include "core/hash.hpp"

namespace skippr::iceberg::internal {
namespace {

using nlohmann::json;

using internal::CheckTable;
using internal::CheckText;
using internal::kMaxLocationBytes;
using internal::kMaxNameBytes;

std::string EncodedName(std::string_view name) { return fmt::format("{}:{}", name.size(), name); }

// The warehouse as users write it, without trailing slashes or surrounding blanks.
std::string NormalisedWarehouse(std::string_view warehouse) {
  while (!warehouse.empty() && std::isspace(static_cast<unsigned char>(warehouse.front()))) {
    warehouse.remove_prefix(1);
  }
  while (!warehouse.empty() &&
         (warehouse.back() == '/' || std::isspace(static_cast<unsigned char>(warehouse.back())))) {
    warehouse.remove_suffix(1);
  }
  return std::string(warehouse);
}

json Text(std::string_view text) { return {{"S", std::string(text)}}; }

std::string NowIso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(now));
}

class DynamoCatalog final : public Catalog {
 public:
  DynamoCatalog(std::unique_ptr<aws::DynamoClient> client, std::string table,
                const std::string& warehouse, Env* env)
      : Catalog(env),
        client_(std::move(client)),
        table_(std::move(table)),
        catalog_key_("catalog#" + Sha256Hex(NormalisedWarehouse(warehouse))),
        description_(fmt::format("DynamoDB catalog table '{}' (warehouse {}, endpoint {})", table_,
                                 NormalisedWarehouse(warehouse), client_->endpoint())) {}

  Status CreateNamespace(const std::string& namespace_name) override {
    SKIPPR_RETURN_IF_ERROR(CheckText("namespace", namespace_name, kMaxNameBytes));
    std::lock_guard lock(mutex_);
    Result<json> put =
        client_->Call("PutItem", {{"TableName", table_},
                                  {"Item",
                                   {{"pk", Text(catalog_key_)},
                                    {"sk", Text(NamespaceSortKey(namespace_name))},
                                    {"properties", {{"M", {{"exists", Text("true")}}}}},
                                    {"updated_at", Text(NowIso8601())}}},
                                  {"ConditionExpression", "attribute_not_exists(pk)"}});
    if (!put.ok() && put.status().code() != StatusCode::kConflict) return Failed(put.status());
    return Status::OK();
  }

  Status CreateTable(const TableIdentifier& table, const std::string& metadata_location) override {
    SKIPPR_RETURN_IF_ERROR(CheckTable(table));
    SKIPPR_RETURN_IF_ERROR(CheckText("metadata location", metadata_location, kMaxLocationBytes));
    std::lock_guard lock(mutex_);
    SKIPPR_ASSIGN_OR_RETURN(std::optional<json> namespace_item,
                            GetItem(catalog_key_, NamespaceSortKey(table.table_namespace)));
    if (!namespace_item) {
      return Status::NotFound(fmt::format("namespace '{}' does not exist in the {}",
                                          table.table_namespace, description_));
    }
    Result<json> put =
        client_->Call("PutItem", {{"TableName", table_},
                                  {"Item",
                                   {{"pk", Text(TablePartitionKey(table.table_namespace))},
                                    {"sk", Text(TableSortKey(table.table_name))},
                                    {"metadata_location", Text(metadata_location)},
                                    {"generation", {{"N", "1"}}},
                                    {"updated_at", Text(NowIso8601())}}},
                                  {"ConditionExpression", "attribute_not_exists(pk)"}});
    if (put.status().code() == StatusCode::kConflict) {
      return Status::Conflict(
          fmt::format("table {} already exists in the {}", table.ToString(), description_));
    }
    return put.ok() ? Status::OK() : Failed(put.status());
  }

  Result<std::string> LoadTable(const TableIdentifier& table) override {
    SKIPPR_RETURN_IF_ERROR(CheckTable(table));
    std::lock_guard lock(mutex_);
    SKIPPR_ASSIGN_OR_RETURN(std::optional<json> item, GetTableItem(table));
    if (!item) return NoSuchTable(table);
    return (*item)["metadata_location"]["S"].get<std::string>();
  }

  Status CompareAndSwap(const TableIdentifier& table, const std::string& expected_location,
                        const std::string& new_location) override {
    SKIPPR_RETURN_IF_ERROR(CheckTable(table));
    SKIPPR_RETURN_IF_ERROR(CheckText("metadata location", new_location, kMaxLocationBytes));
    std::lock_guard lock(mutex_);
    Result<json> updated = client_->Call(
        "UpdateItem", {{"TableName", table_},
                       {"Key", TableKey(table)},
                       {"UpdateExpression",
                        "SET metadata_location = :new, previous_metadata_location = :expected, "
                        "updated_at = :now ADD generation :one"},
                       {"ConditionExpression", "metadata_location = :expected"},
                       {"ExpressionAttributeValues",
                        {{":new", Text(new_location)},
                         {":expected", Text(expected_location)},
                         {":now", Text(NowIso8601())},
                         {":one", {{"N", "1"}}}}}});
    if (updated.ok()) return Status::OK();
    if (updated.status().code() != StatusCode::kConflict) return Failed(updated.status());
    // The condition failed: the table is gone, or another writer moved its pointer.
    SKIPPR_ASSIGN_OR_RETURN(std::optional<json> item, GetTableItem(table));
    if (!item) return NoSuchTable(table);
    return Status::Conflict(fmt::format(
        "commit conflict on table {}: the {} points at {}, not at {} which this commit was based "
        "on; another writer committed first. Reload the table and retry",
        table.ToString(), description_, (*item)["metadata_location"]["S"].get<std::string>(),
        expected_location));
  }

  Result<std::vector<std::string>> ListTables(const std::string& namespace_name) override {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    const std::string prefix = "table#";
    Status listed = client_->ForEachItem(
        "Query",
        {{"TableName", table_},
         {"ConsistentRead", true},
         {"KeyConditionExpression", "pk = :pk AND begins_with(sk, :prefix)"},
         {"ExpressionAttributeValues",
          {{":pk", Text(TablePartitionKey(namespace_name))}, {":prefix", Text(prefix)}}}},
        [&](const json& item) {
          names.push_back(item["sk"]["S"].get<std::string>().substr(prefix.size()));
          return Status::OK();
        });
    if (!listed.ok()) return Failed(listed);
    std::sort(names.begin(), names.end());
    return names;
  }

  const std::string& description() const override { return description_; }

 private:
  std::string NamespaceSortKey(std::string_view namespace_name) const {
    return "namespace#" + EncodedName(namespace_name);
  }
  std::string TablePartitionKey(std::string_view namespace_name) const {
    return catalog_key_ + "#namespace#" + EncodedName(namespace_name);
  }
  static std::string TableSortKey(std::string_view table_name) {
    return "table#" + std::string(table_name);
  }
  json TableKey(const TableIdentifier& table) const {
    return {{"pk", Text(TablePartitionKey(table.table_namespace))},
            {"sk", Text(TableSortKey(table.table_name))}};
  }

  Result<std::optional<json>> GetItem(const std::string& pk, const std::string& sk) {
    Result<json> got = client_->Call("GetItem", {{"TableName", table_},
                                                 {"Key", {{"pk", Text(pk)}, {"sk", Text(sk)}}},
                                                 {"ConsistentRead", true}});
    if (!got.ok()) return Failed(got.status());
    if (!got->contains("Item")) return std::optional<json>();
    return std::optional<json>((*got)["Item"]);
  }

  Result<std::optional<json>> GetTableItem(const TableIdentifier& table) {
    return GetItem(TablePartitionKey(table.table_namespace), TableSortKey(table.table_name));
  }

  Status NoSuchTable(const TableIdentifier& table) const {
    return Status::NotFound(
        fmt::format("table {} does not exist in the {}", table.ToString(), description_));
  }

  Status Failed(const Status& failure) const {
    return Status(failure.code(), fmt::format("{}: {}", description_, failure.message()));
  }

  std::mutex mutex_;  // the client is not thread-safe
  std::unique_ptr<aws::DynamoClient> client_;
  std::string table_;
  std::string catalog_key_;
  std::string description_;
};

}  // namespace

Result<std::unique_ptr<Catalog>> OpenDynamoCatalog(const CatalogOptions& options) {
  if (options.warehouse.empty()) {
    return Status::InvalidArgument("a DynamoDB catalog needs the warehouse it catalogs");
  }
  static const ProcessEnvironment kProcessEnvironment;
  const Environment& environment =
      options.environment != nullptr ? *options.environment : kProcessEnvironment;
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<aws::DynamoClient> client,
                          aws::DynamoClient::Open(options.dynamodb, environment));
  if (Status ensured = client->EnsureTable(options.dynamodb_table, "pk", "sk"); !ensured.ok()) {
    return Status(ensured.code(), fmt::format("cannot open the DynamoDB catalog table '{}': {}",
                                              options.dynamodb_table, ensured.message()));
  }
  return std::unique_ptr<Catalog>(std::make_unique<DynamoCatalog>(
      std::move(client), options.dynamodb_table, options.warehouse, options.env));
}

}  // namespace skippr::iceberg::internal
