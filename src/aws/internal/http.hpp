// Internal to aws/: one HTTP exchange over libcurl, signed with SigV4 by curl itself, and the XML
// reading the S3 API's answers need.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aws/aws.hpp"

namespace skippr::aws::internal {

struct Signing {
  std::string service;  // "s3", "dynamodb", "sts"
  std::string region;
  Credentials credentials;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string_view body;
  // Receives a successful (2xx) response's body as it arrives; without one it is collected in
  // HttpResponse::body. Error bodies are always collected (they explain the error).
  const ByteSink* on_body = nullptr;
  std::optional<Signing> signing;  // nullopt: sent unsigned (instance metadata, STS web identity)
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds stall_timeout{30};
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  uint64_t body_bytes = 0;  // received, including those handed to on_body
  std::string Header(const std::string& lower_case_name) const;
};

// Keeps one curl handle (and its connections) across exchanges. Not thread-safe.
class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The response, whatever its status; Unavailable when no complete response arrived (connection
  // refused or reset, timeout): the request may or may not have taken effect. A failed on_body
  // Status is returned as it is.
  Result<HttpResponse> Perform(const HttpRequest& request);

 private:
  void* handle_;  // CURL*
};

// AWS's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ as %XX (upper-case hex); '/' too unless
// `keep_slashes`.
std::string UriEncode(std::string_view text, bool keep_slashes);

// The inner text of each <tag>...</tag> (or empty for <tag/>) in `xml`, in order, not decoded.
// Elements of one name are not nested in the answers read here.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);
// The first one's decoded text, or nullopt.
std::optional<std::string> XmlText(std::string_view xml, std::string_view tag);
// Resolves &amp; &lt; &gt; &quot; &apos; and numeric character references.
std::string XmlDecode(std::string_view text);
// Escapes text for an XML element.
std::string XmlEscape(std::string_view text);

// Sleeps before retry `attempt` (1-based): capped exponential backoff with full jitter.
void BackOff(const RetryPolicy& policy, int attempt);

// Unsigned GET/PUT for the credential providers (instance metadata, container, STS).
Result<HttpResponse> PlainRequest(const std::string& method, const std::string& url,
                                  const std::vector<std::string>& headers,
                                  std::chrono::seconds timeout);

}  // namespace skippr::aws::internal
