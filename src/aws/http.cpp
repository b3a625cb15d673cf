#include "aws/internal/http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <random>
#include <thread>

#include "core/check.hpp"

namespace skippr::aws::internal {

namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Exchange {
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  Status sink_status;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    exchange->response->headers.clear();  // a new response (after 100 Continue, or a redirect)
    return line.size();
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return line.size();
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  exchange->response->headers[name] = std::string(value);
  return line.size();
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const std::string_view bytes(data, size * count);
  long status = 0;
  curl_easy_getinfo(exchange->curl, CURLINFO_RESPONSE_CODE, &status);
  exchange->response->body_bytes += bytes.size();
  if (status >= 200 && status < 300 && exchange->request->on_body != nullptr) {
    exchange->sink_status = (*exchange->request->on_body)(bytes);
    return exchange->sink_status.ok() ? bytes.size() : 0;
  }
  exchange->response->body.append(bytes);
  return bytes.size();
}

// What curl sends as the body of a request: the request's bytes, read in order.
struct UploadCursor {
  std::string_view bytes;
  size_t sent = 0;
};

size_t OnUpload(char* buffer, size_t size, size_t count, void* user) {
  auto* cursor = static_cast<UploadCursor*>(user);
  const size_t n = std::min(size * count, cursor->bytes.size() - cursor->sent);
  std::copy_n(cursor->bytes.data() + cursor->sent, n, buffer);
  cursor->sent += n;
  return n;
}

int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* cursor = static_cast<UploadCursor*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > cursor->bytes.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  cursor->sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_case_name) const {
  auto found = headers.find(lower_case_name);
  return found == headers.end() ? std::string() : found->second;
}

HttpClient::HttpClient() {
  InitCurlOnce();
  handle_ = curl_easy_init();
  SKIPPR_CHECK(handle_ != nullptr);
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(handle_)); }

Result<HttpResponse> HttpClient::Perform(const HttpRequest& request) {
  CURL* curl = static_cast<CURL*>(handle_);
  curl_easy_reset(curl);
  HttpResponse response;
  Exchange exchange{curl, &request, &response, Status::OK()};
  UploadCursor upload{request.body, 0};

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT,
                   static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(request.stall_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &exchange);

  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    // The body is read through a callback with its size known, as an upload: curl then sends
    // exactly these bytes with Content-Length, whatever the method.
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, OnUpload);
    curl_easy_setopt(curl, CURLOPT_READDATA, &upload);
    curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, OnSeek);
    curl_easy_setopt(curl, CURLOPT_SEEKDATA, &upload);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    if (request.method == "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "POST");
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  curl_slist* headers = nullptr;
  for (const std::string& header : request.headers)
    headers = curl_slist_append(headers, header.c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  std::string sigv4;
  std::string user;
  if (request.signing) {
    const Signing& signing = *request.signing;
    sigv4 = fmt::format("aws:amz:{}:{}", signing.region, signing.service);
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, signing.credentials.access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, signing.credentials.secret_access_key.c_str());
    if (!signing.credentials.session_token.empty()) {
      headers = curl_slist_append(
          headers, ("x-amz-security-token: " + signing.credentials.session_token).c_str());
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  char error_text[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  if (!exchange.sink_status.ok()) return exchange.sink_status;
  if (code != CURLE_OK) {
    return Status::Unavailable(
        fmt::format("{} {}: {}", request.method, request.url,
                    error_text[0] != 0 ? error_text : curl_easy_strerror(code)));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string UriEncode(std::string_view text, bool keep_slashes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slashes && c == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> found;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag) + ">";
  size_t at = 0;
  while ((at = xml.find(open, at)) != std::string_view::npos) {
    const size_t after_name = at + open.size();
    if (after_name >= xml.size()) break;
    const char next = xml[after_name];
    if (next != '>' && next != ' ' && next != '/') {  // a longer name that starts the same
      at = after_name;
      continue;
    }
    const size_t tag_end = xml.find('>', after_name);
    if (tag_end == std::string_view::npos) break;
    if (xml[tag_end - 1] == '/') {  // <tag/>
      found.emplace_back();
      at = tag_end + 1;
      continue;
    }
    const size_t end = xml.find(close, tag_end + 1);
    if (end == std::string_view::npos) break;
    found.push_back(xml.substr(tag_end + 1, end - tag_end - 1));
    at = end + close.size();
  }
  return found;
}

std::optional<std::string> XmlText(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> elements = XmlElements(xml, tag);
  if (elements.empty()) return std::nullopt;
  return XmlDecode(elements.front());
}

namespace {

void AppendUtf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace

std::string XmlDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    const size_t semicolon = text.find(';', i);
    if (semicolon == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    const std::string_view name = text.substr(i + 1, semicolon - i - 1);
    if (name == "amp")
      out.push_back('&');
    else if (name == "lt")
      out.push_back('<');
    else if (name == "gt")
      out.push_back('>');
    else if (name == "quot")
      out.push_back('"');
    else if (name == "apos")
      out.push_back('\'');
    else if (name.size() > 1 && name[0] == '#') {
      const bool is_hex = name[1] == 'x' || name[1] == 'X';
      const std::string digits(name.substr(is_hex ? 2 : 1));
      char* end = nullptr;
      const unsigned long code_point = std::strtoul(digits.c_str(), &end, is_hex ? 16 : 10);
      if (digits.empty() || *end != '\0' || code_point > 0x10FFFF) {
        out.append(text.substr(i, semicolon - i + 1));
      } else {
        AppendUtf8(out, static_cast<uint32_t>(code_point));
      }
    } else {
      out.append(text.substr(i, semicolon - i + 1));  // not an entity we know: kept as it is
    }
    i = semicolon;
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

void BackOff(const RetryPolicy& policy, int attempt) {
  thread_local std::mt19937_64 random(std::random_device{}());
  const int64_t cap = policy.max_backoff.count();
  const int64_t ceiling =
      std::min<int64_t>(cap, policy.first_backoff.count() << std::min(attempt - 1, 20));
  std::uniform_int_distribution<int64_t> jitter(ceiling / 2, std::max<int64_t>(ceiling, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(random)));
}

Result<HttpResponse> PlainRequest(const std::string& method, const std::string& url,
                                  const std::vector<std::string>& headers,
                                  std::chrono::seconds timeout) {
  HttpClient client;
  HttpRequest request;
  request.method = method;
  request.url = url;
  request.headers = headers;
  request.connect_timeout = timeout;
  request.stall_timeout = timeout;
  return client.Perform(request);
}

}  // namespace skippr::aws::internal
