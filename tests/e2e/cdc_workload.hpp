// The randomized change workload the CDC tests share: an `accounts (id bigint PRIMARY KEY, v text,
// n numeric(10, 2))` table changed by random multi-statement transactions, synced across kills and
// crash points, checked after every round.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "support/temp_dir.hpp"

namespace skippr::testing {

// Random transactions of inserts, updates (some changing the key, some setting n NULL), deletes
// and now and then a TRUNCATE, each several statements long; new ids from `next_id` on.
std::string RandomTransactions(std::mt19937& random, int transactions, int64_t& next_id);

struct CdcRounds {
  const TempDir* dir = nullptr;
  std::string pipeline;
  std::function<void(const std::string&)> sql;  // runs SQL on the source database
  // `sync -p <pipeline> --once` with extra environment.
  std::function<ProcessResult(std::map<std::string, std::string>)> sync;
  std::vector<std::string> crash_points;  // one per round, in turn
  int rounds = 3;
  uint32_t seed = 1;
};

// Each round: 60 random transactions (round 2 also truncates the table and inserts a row in one
// transaction), two syncs SIGKILLed at random moments, 20 more transactions, a sync crashed at the
// round's crash point, and a sync to the end; then `check(round)`, which may stop the rounds by
// failing fatally. Returns the next free id.
int64_t RunCdcRounds(const CdcRounds& rounds, int64_t next_id,
                     const std::function<void(int round)>& check);

}  // namespace skippr::testing
