#include "core/crash.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

namespace skippr {

namespace {
std::atomic<CrashPointObserver> crash_point_observer{nullptr};

const std::string& ArmedCrashPoint() {
  static const std::string point = [] {
    const char* value = std::getenv("SKIPPR_CRASH_POINT");
    return std::string(value == nullptr ? "" : value);
  }();
  return point;
}

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
  const std::string& armed = ArmedCrashPoint();
  if (armed.empty() || armed != name) return;
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
