#include "core/crash.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

namespace skippr {

namespace {
std::atomic<CrashPointObserver> crash_point_observer{nullptr};

// SKIPPR_CRASH_POINT=<name>[@<hit>]: the point, and on which of its hits to crash (from 1).
struct ArmedPoint {
  std::string name;
  uint64_t hit = 1;
};

const ArmedPoint& ArmedCrashPoint() {
  static const ArmedPoint point = [] {
    const char* value = std::getenv("SKIPPR_CRASH_POINT");
    ArmedPoint armed{value == nullptr ? "" : value};
    if (const size_t at = armed.name.rfind('@'); at != std::string::npos) {
      const char* count = armed.name.c_str() + at + 1;
      char* end = nullptr;
      const unsigned long long hit = std::strtoull(count, &end, 10);
      if (end != count && *end == '\0' && hit > 0) {
        armed.hit = hit;
        armed.name.resize(at);
      }
    }
    return armed;
  }();
  return point;
}

std::atomic<uint64_t> armed_point_hits{0};

double SecondsFromEnv(const char* name, double fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return fallback;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  return end != value && seconds >= 0 ? seconds : fallback;
}
}  // namespace

void CrashPoint(std::string_view name) {
  if (CrashPointObserver observer = crash_point_observer.load(std::memory_order_acquire)) {
    observer(name);
    return;
  }
  const ArmedPoint& armed = ArmedCrashPoint();
  if (armed.name.empty() || armed.name != name) return;
  if (armed_point_hits.fetch_add(1, std::memory_order_relaxed) + 1 != armed.hit) return;
  spdlog::default_logger()->flush();
  kill(getpid(), SIGKILL);
}

void SetCrashPointObserver(CrashPointObserver observer) {
  crash_point_observer.store(observer, std::memory_order_release);
}

void StartChaosMode() {
  const double min_seconds = SecondsFromEnv("SKIPPR_CHAOS_MIN_SECONDS", 15);
  const double max_seconds = std::max(min_seconds, SecondsFromEnv("SKIPPR_CHAOS_MAX_SECONDS", 60));
  std::random_device random;
  std::uniform_real_distribution<double> delay(min_seconds, max_seconds);
  const double seconds = delay(random);
  spdlog::warn("Chaos mode: this run will be killed with SIGKILL after {:.1f} s", seconds);
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    spdlog::warn("Chaos mode throwing a random exit...");
    spdlog::default_logger()->flush();
    kill(getpid(), SIGKILL);
  }).detach();
}

}  // namespace skippr
