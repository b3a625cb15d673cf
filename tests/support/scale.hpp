// SKIPPR_TEST_SCALE: how big the heavy tests' data is. 1 (the default) is the size each test was
// written for; the sanitizer builds run with 0.1 (Makefile SANITIZER_TEST_SCALE), where ASan and
// TSan make every row several times dearer. A scaled test still runs every step and every check,
// on fewer rows; only row counts scale, never the number of crash points or kills.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace skippr::testing {

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

}  // namespace skippr::testing
