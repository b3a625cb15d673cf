// tests/transform: random CDC streams for the transform.aggregates processor, and the oracle that
// recomputes every measure from the final rows. Shared by aggregates_test and its crash driver.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/batch.hpp"

namespace skippr::testing {

// orders(customer_id long, region string?, amount_cents long, price decimal(12,2), weight double,
// note string?), grouped by (customer_id, region).
inline config::AggregateConfig OrdersAggregate() {
  config::AggregateConfig aggregate;
  aggregate.id = "order_totals";
  aggregate.key_fields = {"customer_id", "region"};
  // Sorted by name, as the config loader leaves them.
  aggregate.measures = {{"amount_total", config::MeasureKind::kSum, "amount_cents"},
                        {"note_count", config::MeasureKind::kCount, "note"},
                        {"price_total", config::MeasureKind::kSum, "price"},
                        {"row_count", config::MeasureKind::kCount, "*"},
                        {"weight_total", config::MeasureKind::kSum, "weight"}};
  return aggregate;
}

struct OrderRow {
  int64_t customer_id = 0;
  std::optional<std::string> region;
  int64_t amount_cents = 0;
  int64_t price_cents = 0;
  double weight = 0;
  std::optional<std::string> note;
};

inline std::vector<Field> OrderFields() {
  return {{1, "customer_id", LogicalType::Long(), true},
          {2, "region", LogicalType::String(), true},
          {3, "amount_cents", LogicalType::Long(), true},
          {4, "price", LogicalType::Decimal(12, 2).value(), true},
          {5, "weight", LogicalType::Double(), true},
          {6, "note", LogicalType::String(), true}};
}

// What the final rows are: the last image per live entity, plus every entity-less insert.
class OrdersOracle {
 public:
  void Upsert(const std::string& entity, const OrderRow& row) { live_[entity] = row; }
  void Delete(const std::string& entity) { live_.erase(entity); }
  void Append(const OrderRow& row) { appended_.push_back(row); }
  bool IsLive(const std::string& entity) const { return live_.contains(entity); }

  using Key = std::vector<std::optional<std::string>>;
  using Measures = std::vector<std::optional<std::string>>;

  // Measure texts in the aggregate's measure order, as transform::ReadAggregate prints them.
  std::map<Key, Measures> Recompute() const {
    struct Totals {
      int64_t rows = 0, amount = 0, price = 0, notes = 0;
      double weight = 0;
    };
    std::map<Key, Totals> totals;
    const auto add = [&](const OrderRow& row) {
      Totals& t = totals[{std::to_string(row.customer_id), row.region}];
      ++t.rows;
      t.amount += row.amount_cents;
      t.price += row.price_cents;
      t.weight += row.weight;
      t.notes += row.note ? 1 : 0;
    };
    for (const auto& [entity, row] : live_) add(row);
    for (const OrderRow& row : appended_) add(row);
    std::map<Key, Measures> result;
    for (const auto& [key, t] : totals) {
      const int64_t price_abs = t.price < 0 ? -t.price : t.price;
      result[key] = {
          std::to_string(t.amount), std::to_string(t.notes),
          fmt::format("{}{}.{:02}", t.price < 0 ? "-" : "", price_abs / 100, price_abs % 100),
          std::to_string(t.rows), fmt::format("{}", t.weight)};
    }
    return result;
  }

 private:
  std::map<std::string, OrderRow> live_;
  std::vector<OrderRow> appended_;
};

// Random batches of inserts, updates, deletes and primary-key changes (delete of the old entity
// and insert of a new one in the same batch), some without CDC (appends), some replayed copies of
// an earlier batch (their order tokens dedup them). The oracle follows along.
class OrdersStream {
 public:
  explicit OrdersStream(uint64_t seed) : random_(seed) {}

  Batch NextBatch(OrdersOracle& oracle) {
    if (!history_.empty() && Chance(0.1)) return history_[Pick(history_.size())];  // a replay
    const bool is_cdc = !Chance(0.15);
    const int64_t rows = 1 + static_cast<int64_t>(Pick(40));
    Batch batch = Empty(is_cdc);
    for (int64_t i = 0; i < rows; ++i) {
      if (!is_cdc) {
        const OrderRow row = RandomRow();
        AppendRow(batch, row, Mutation::kInsert, "");
        oracle.Append(row);
        continue;
      }
      const std::string entity = fmt::format("e{}", Pick(entity_count_));
      const double dice = Uniform();
      if (oracle.IsLive(entity) && dice < 0.1) {  // primary-key change
        AppendRow(batch, RandomRow(), Mutation::kDelete, entity);
        oracle.Delete(entity);
        const std::string moved = fmt::format("e{}", entity_count_++);
        const OrderRow row = RandomRow();
        AppendRow(batch, row, Mutation::kInsert, moved);
        oracle.Upsert(moved, row);
      } else if (dice < 0.3) {
        AppendRow(batch, RandomRow(), Mutation::kDelete, entity);
        oracle.Delete(entity);
      } else {
        const OrderRow row = RandomRow();
        const Mutation mutation = dice < 0.7   ? Mutation::kUpdate
                                  : dice < 0.9 ? Mutation::kInsert
                                               : Mutation::kSnapshot;
        AppendRow(batch, row, mutation, entity);
        oracle.Upsert(entity, row);
      }
    }
    std::string reason;
    if (!batch.Validate(&reason))
      throw std::runtime_error("a generated batch is invalid: " + reason);
    if (is_cdc) history_.push_back(batch);
    return batch;
  }

 private:
  bool Chance(double p) { return Uniform() < p; }
  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(random_); }
  uint64_t Pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random_); }

  OrderRow RandomRow() {
    OrderRow row;
    row.customer_id = static_cast<int64_t>(Pick(5));
    if (!Chance(0.2)) row.region = Chance(0.5) ? "north" : "south";
    row.amount_cents = static_cast<int64_t>(Pick(100'000)) - 20'000;
    row.price_cents = static_cast<int64_t>(Pick(1'000'000)) - 100'000;
    row.weight = static_cast<double>(Pick(4000)) * 0.25;  // exact in binary: sums do not drift
    if (Chance(0.6)) row.note = "n" + std::to_string(Pick(9));
    return row;
  }

  Batch Empty(bool is_cdc) {
    Batch batch;
    batch.namespace_name = "orders";
    batch.schema_id = 1;
    batch.fields = OrderFields();
    for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
    if (is_cdc) batch.cdc.emplace();
    return batch;
  }

  void AppendRow(Batch& batch, const OrderRow& row, Mutation mutation, const std::string& entity) {
    batch.columns[0].Append(Value::Int(row.customer_id));
    batch.columns[1].Append(row.region ? Value::String(*row.region) : Value::Null());
    batch.columns[2].Append(Value::Int(row.amount_cents));
    batch.columns[3].Append(Value::Decimal(row.price_cents, 12, 2));
    batch.columns[4].Append(Value::Double(row.weight));
    batch.columns[5].Append(row.note ? Value::String(*row.note) : Value::Null());
    ++batch.num_rows;
    if (!batch.cdc) return;
    batch.cdc->mutations.push_back(mutation);
    batch.cdc->event_ids.push_back(fmt::format("ev{}", next_token_));
    batch.cdc->order_tokens.push_back(fmt::format("{:016}", next_token_++));
    batch.cdc->business_keys.push_back(entity);
  }

  std::mt19937_64 random_;
  uint64_t entity_count_ = 30;
  uint64_t next_token_ = 1;
  std::vector<Batch> history_;
};

}  // namespace skippr::testing
