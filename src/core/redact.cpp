#include "core/redact.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace skippr {

namespace {

struct SecretRegistry {
  std::shared_mutex mutex;
  std::vector<std::string> secrets;  // longest first, so a secret inside another is masked whole
};

SecretRegistry& Registry() {
  static SecretRegistry* registry = new SecretRegistry();  // never destroyed: used at exit too
  return *registry;
}

bool EndsAuthority(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '<' ||
         c == '>' || c == '`';
}

// Where each URI userinfo password in `text` lies: [begin, end) after "scheme://user:" and
// before the '@' that ends the userinfo (the last '@' before the next space or quote).
std::vector<std::pair<size_t, size_t>> UriPasswords(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t search = 0;
  while (true) {
    const size_t scheme_end = text.find("://", search);
    if (scheme_end == std::string_view::npos) break;
    const size_t userinfo = scheme_end + 3;
    size_t segment_end = userinfo;
    while (segment_end < text.size() && !EndsAuthority(text[segment_end])) ++segment_end;
    const std::string_view segment = text.substr(userinfo, segment_end - userinfo);
    const size_t at = segment.rfind('@');
    const size_t colon = at == std::string_view::npos ? at : segment.substr(0, at).find(':');
    if (colon != std::string_view::npos && colon + 1 < at) {
      spans.emplace_back(userinfo + colon + 1, userinfo + at);
    }
    search = userinfo;
  }
  return spans;
}

// `password=value` (any case, as libpq writes key=value connection strings; the value quoted
// with '...' or up to the next space).
std::vector<std::pair<size_t, size_t>> KeyValuePasswords(std::string_view text) {
  static constexpr std::string_view kKey = "password";
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i + kKey.size() < text.size(); ++i) {
    bool matches = true;
    for (size_t k = 0; k < kKey.size() && matches; ++k) {
      matches = std::tolower(static_cast<unsigned char>(text[i + k])) == kKey[k];
    }
    if (!matches) continue;
    size_t value = i + kKey.size();
    while (value < text.size() && text[value] == ' ') ++value;
    if (value >= text.size() || text[value] != '=') continue;
    ++value;
    while (value < text.size() && text[value] == ' ') ++value;
    size_t end = value;
    if (end < text.size() && text[end] == '\'') {
      end = text.find('\'', end + 1);
      end = end == std::string_view::npos ? text.size() : end + 1;
    } else {
      while (end < text.size() && !EndsAuthority(text[end]) && text[end] != ',' &&
             text[end] != ';')
        ++end;
    }
    if (end > value) spans.emplace_back(value, end);
    i = end;
  }
  return spans;
}

std::string MaskSpans(std::string_view text, std::vector<std::pair<size_t, size_t>> spans) {
  if (spans.empty()) return std::string(text);
  std::sort(spans.begin(), spans.end());
  std::string out;
  size_t copied = 0;
  for (const auto& [begin, end] : spans) {
    if (end <= copied) continue;
    out.append(text.substr(copied, std::max(begin, copied) - copied));
    out.append(kRedacted);
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

void Learn(SecretRegistry& registry, std::string value) {
  if (value.size() < kMinSecretBytes) return;
  if (std::find(registry.secrets.begin(), registry.secrets.end(), value) != registry.secrets.end())
    return;
  registry.secrets.push_back(std::move(value));
  std::stable_sort(registry.secrets.begin(), registry.secrets.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

// The secret as it appears inside a JSON string (a --output json event, a stored run record).
std::string JsonEscaped(std::string_view value) {
  std::string escaped;
  for (char c : value) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      escaped += c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : "";
      if (c != '\n' && c != '\t' && c != '\r') {
        char unicode[8];
        std::snprintf(unicode, sizeof(unicode), "\\u%04x", static_cast<unsigned char>(c));
        escaped += unicode;
      }
    } else {
      escaped += c;
    }
  }
  return escaped;
}

ssize_t WriteRedactedToFd2(void* /*cookie*/, const char* data, size_t size) {
  const std::string text = Redact(std::string_view(data, size));
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    written += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(size);  // the caller's bytes are consumed, whatever we wrote
}

}  // namespace

void RegisterSecret(std::string_view value) {
  SecretRegistry& registry = Registry();
  std::unique_lock lock(registry.mutex);
  Learn(registry, std::string(value));
  Learn(registry, JsonEscaped(value));
  for (const auto& spans : {UriPasswords(value), KeyValuePasswords(value)}) {
    for (const auto& [begin, end] : spans) {
      std::string part(value.substr(begin, end - begin));
      if (part.size() >= 2 && part.front() == '\'' && part.back() == '\'')
        part = part.substr(1, part.size() - 2);
      Learn(registry, std::move(part));
    }
  }
}

std::string Redact(std::string_view text) {
  std::string learned_masked;
  {
    SecretRegistry& registry = Registry();
    std::shared_lock lock(registry.mutex);
    std::vector<std::pair<size_t, size_t>> spans;
    for (const std::string& secret : registry.secrets) {
      for (size_t at = text.find(secret); at != std::string_view::npos;
           at = text.find(secret, at + secret.size())) {
        spans.emplace_back(at, at + secret.size());
      }
    }
    learned_masked = MaskSpans(text, std::move(spans));
  }
  std::vector<std::pair<size_t, size_t>> shapes = UriPasswords(learned_masked);
  for (const auto& span : KeyValuePasswords(learned_masked)) shapes.push_back(span);
  return MaskSpans(learned_masked, std::move(shapes));
}

void RedactStandardError() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    cookie_io_functions_t functions{};
    functions.write = WriteRedactedToFd2;
    FILE* redacting = fopencookie(nullptr, "w", functions);
    if (redacting == nullptr) return;  // stderr stays as it was: better than no stderr
    std::fflush(stderr);
    setvbuf(redacting, nullptr, _IOLBF, 64 * 1024);
    stderr = redacting;
  });
}

void ForgetSecretsForTesting() {
  SecretRegistry& registry = Registry();
  std::unique_lock lock(registry.mutex);
  registry.secrets.clear();
}

}  // namespace skippr
