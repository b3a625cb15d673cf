// The randomized change workload the CDC tests share (cdc_workload.hpp).
#include "e2e/cdc_workload.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>

#include "e2e/skipprd_runner.hpp"

namespace skippr::testing {

std::string RandomTransactions(std::mt19937& random, int transactions, int64_t& next_id) {
  std::string sql;
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<int> statements(1, 6);
  for (int t = 0; t < transactions; ++t) {
    sql += "BEGIN;";
    for (int s = statements(random); s > 0; --s) {
      const int64_t target = std::uniform_int_distribution<int64_t>(1, next_id)(random);
      switch (kind(random)) {
        case 0: case 1: case 2:
          sql += fmt::format("INSERT INTO accounts VALUES ({}, 'new {}', {}.25);", next_id, next_id,
                             next_id % 1000);
          ++next_id;
          break;
        case 3: case 4: case 5:
          sql += fmt::format("UPDATE accounts SET v = v || '+', n = n + 1 WHERE id = {};", target);
          break;
        case 6:
          sql += fmt::format("UPDATE accounts SET n = NULL WHERE id = {};", target);
          break;
        case 7:
          sql += fmt::format("DELETE FROM accounts WHERE id = {};", target);
          if (target % 97 == 0) sql += "TRUNCATE accounts;";  // now and then, all of them
          break;
        default:
          // A key change: delete of the old key, insert of the new one.
          sql += fmt::format("UPDATE accounts SET id = {} WHERE id = {};", next_id, target);
          ++next_id;
      }
    }
    sql += "COMMIT;";
  }
  return sql;
}

int64_t RunCdcRounds(const CdcRounds& rounds, int64_t next_id,
                     const std::function<void(int round)>& check) {
  std::mt19937 random(rounds.seed);
  std::uniform_int_distribution<int> delay_ms(20, 500);
  for (int round = 0; round < rounds.rounds; ++round) {
    rounds.sql(RandomTransactions(random, 60, next_id));
    if (round == 2) {
      rounds.sql("BEGIN; TRUNCATE accounts; INSERT INTO accounts VALUES (1, 'back', 1); COMMIT;");
    }
    for (int kill = 0; kill < 2; ++kill) {
      SyncAndKillAfter(*rounds.dir, rounds.pipeline,
                       std::chrono::milliseconds(delay_ms(random)),
                       {{"BUFFER_THRESHOLD_BYTES", "20000"}});
    }
    rounds.sql(RandomTransactions(random, 20, next_id));
    const std::string& crash_point =
        rounds.crash_points[static_cast<size_t>(round) % rounds.crash_points.size()];
    EXPECT_NE(rounds.sync({{"SKIPPR_CRASH_POINT", crash_point}}).exit_code, 0) << crash_point;
    const ProcessResult synced = rounds.sync({});
    EXPECT_EQ(synced.exit_code, 0) << "round " << round << ": " << synced.err << synced.out;
    if (synced.exit_code != 0) return next_id;
    check(round);
    if (::testing::Test::HasFatalFailure()) return next_id;
  }
  return next_id;
}

}  // namespace skippr::testing
