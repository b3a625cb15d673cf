// SKIPPR_TEST_SCALE: how big the heavy tests' data is. 1 (the default) is the size each test was
// written for; the sanitizer builds run with 0.1 (Makefile SANITIZER_TEST_SCALE), where ASan and
// TSan make every row several times dearer. A scaled test still runs every step and every check,
// on fewer rows. Row counts scale, and so do random samples (kills at random moments, random
// streams) down to a floor: the full sample runs in `make test`, the sanitizers need the code paths
// a few times, not the statistics. Named crash points and fault matrices never scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace skippr::testing {

// Whether this build runs under a sanitizer, whose allocator keeps freed memory (ASan's
// quarantine) and maps shadow memory: resident-set checks hold only without one.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

inline double TestScale() {
  static const double scale = [] {
    const char* text = std::getenv("SKIPPR_TEST_SCALE");
    if (text == nullptr || *text == '\0') return 1.0;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(value > 0) || value > 1) {
      // A typo must not silently run the full size (or none): say so and stop.
      std::fprintf(stderr, "SKIPPR_TEST_SCALE='%s' is not a number in (0, 1]\n", text);
      std::abort();
    }
    return value;
  }();
  return scale;
}

// `rows` at the test scale, rounded to a multiple of `multiple` (so per-file or per-round splits
// stay exact) and at least `multiple`.
inline int64_t Scaled(int64_t rows, int64_t multiple = 1) {
  const auto scaled = static_cast<int64_t>(std::llround(static_cast<double>(rows) * TestScale()));
  return std::max(multiple, scaled / multiple * multiple);
}

// How many rounds of a random sample (kills at random moments, random seeds) to run: `rounds` at
// the test scale, at least `at_least`.
inline int ScaledRounds(int rounds, int at_least) {
  const auto scaled = static_cast<int>(std::llround(rounds * TestScale()));
  return std::max(std::min(rounds, at_least), scaled);
}

}  // namespace skippr::testing
