// Test helpers for Status and Result: a failure prints the Status's message.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>

#include "core/status.hpp"

namespace skippr::testing {

// The value of a Result the test cannot go on without; aborts (after reporting) when it failed.
template <typename T>
T ValueOrDie(Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) std::abort();
  return std::move(result).value();
}

inline void ExpectOk(const Status& status) { EXPECT_TRUE(status.ok()) << status.ToString(); }

}  // namespace skippr::testing
