#include "core/random.hpp"

#include <fmt/format.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace skippr {

Status FillRandom(uint8_t* bytes, size_t size) {
  size_t filled = 0;
  while (filled < size) {
    const ssize_t got = getrandom(bytes + filled, size - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return Status::IOError(
          fmt::format("the kernel refused random bytes (getrandom): {}", std::strerror(errno)));
    }
    filled += static_cast<size_t>(got);
  }
  return Status::OK();
}

Result<std::string> RandomHex(size_t byte_count) {
  std::vector<uint8_t> bytes(byte_count);
  SKIPPR_RETURN_IF_ERROR(FillRandom(bytes.data(), bytes.size()));
  std::string text;
  text.reserve(2 * byte_count);
  for (uint8_t byte : bytes) text += fmt::format("{:02x}", byte);
  return text;
}

}  // namespace skippr
