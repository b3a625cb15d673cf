// Invariant checks. SKIPPR_CHECK stays on in release builds: it guards places where a wrong answer
// would be silent data loss. SKIPPR_DCHECK is for hot paths and compiles out with NDEBUG.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace skippr::internal {
[[noreturn]] inline void CheckFailed(const char* condition, const char* file, int line,
                                     const char* detail) {
  std::fprintf(stderr, "skipprd: internal invariant failed at %s:%d: %s%s%s\n", file, line,
               condition, detail[0] ? " — " : "", detail);
  std::abort();
}
}  // namespace skippr::internal

#define SKIPPR_CHECK_MSG(condition, detail)                                                    \
  do {                                                                                         \
    if (!(condition)) ::skippr::internal::CheckFailed(#condition, __FILE__, __LINE__, detail); \
  } while (0)
#define SKIPPR_CHECK(condition) SKIPPR_CHECK_MSG(condition, "")

#ifdef NDEBUG
#define SKIPPR_DCHECK(condition) \
  do {                           \
  } while (0)
#else
#define SKIPPR_DCHECK(condition) SKIPPR_CHECK(condition)
#endif
