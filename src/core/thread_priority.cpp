#include "core/thread_priority.hpp"

#include <sys/resource.h>

#include <cerrno>

namespace skippr {

void LowerThisThreadsPriority() {
  // On Linux PRIO_PROCESS with 0 is the calling thread alone (its nice value is its own).
  errno = 0;
  const int nice_value = getpriority(PRIO_PROCESS, 0);
  if (nice_value == -1 && errno != 0) return;
  setpriority(PRIO_PROCESS, 0, nice_value + kBackgroundNiceSteps);
}

}  // namespace skippr
