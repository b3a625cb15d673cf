#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "aws/internal/http.hpp"
#include "aws/internal/service.hpp"
#include "core/check.hpp"
#include "core/hash.hpp"

namespace skippr::aws {

namespace {

using internal::HttpRequest;
using internal::HttpResponse;
using internal::UriEncode;

const std::string kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Unquoted(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

bool IsRetryableStatus(long status, const std::string& code) {
  return status == 500 || status == 502 || status == 503 || status == 504 || status == 429 ||
         code == "SlowDown" || code == "RequestTimeout" || code == "InternalError";
}

// The error a non-2xx answer means, with what to check.
Status ErrorStatus(std::string_view operation, const std::string& uri, const HttpResponse& response,
                   const std::string& credentials_source) {
  const std::string code = internal::XmlText(response.body, "Code").value_or("");
  const std::string message = internal::XmlText(response.body, "Message").value_or("");
  const std::string said = code.empty() ? fmt::format("HTTP {}", response.status)
                                        : fmt::format("HTTP {} {}{}{}", response.status, code,
                                                      message.empty() ? "" : ": ", message);
  if (response.status == 404) {
    if (code == "NoSuchBucket") {
      return Status::NotFound(
          fmt::format("{} {}: the bucket does not exist ({})", operation, uri, said));
    }
    return Status::NotFound(fmt::format("{} {}: not found ({})", operation, uri, said));
  }
  if (response.status == 412) {
    return Status::Conflict(fmt::format("{} {}: precondition failed ({})", operation, uri, said));
  }
  if (response.status == 403) {
    return Status::IOError(fmt::format(
        "{} {}: access denied ({}); check the credentials (from {}) and the bucket's policy",
        operation, uri, said, credentials_source));
  }
  if (response.status == 301 || code == "PermanentRedirect" ||
      code == "AuthorizationHeaderMalformed") {
    const std::string region = response.Header("x-amz-bucket-region");
    return Status::InvalidConfig(
        fmt::format("{} {}: the bucket is in another region{} ({}); set the connector's region",
                    operation, uri, region.empty() ? "" : " (" + region + ")", said));
  }
  return Status::IOError(fmt::format("{} {}: {}", operation, uri, said));
}

}  // namespace

Result<int> OpenSpoolFile(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  std::string pattern = directory + "/s3-spool-XXXXXX";
  const int fd = ::mkostemp(pattern.data(), O_CLOEXEC);
  if (fd < 0) {
    const Status failed =
        ErrnoStatus(errno, fmt::format("cannot create a spool file in {}", directory));
    return Status::IOError(failed.message());
  }
  ::unlink(pattern.c_str());
  return fd;
}

std::string S3Uri(std::string_view bucket, std::string_view key) {
  return fmt::format("s3://{}/{}", bucket, key);
}

Result<std::pair<std::string, std::string>> ParseS3Uri(std::string_view uri) {
  constexpr std::string_view kScheme = "s3://";
  if (uri.substr(0, kScheme.size()) != kScheme) {
    return Status::InvalidArgument(fmt::format("'{}' is not an s3://bucket/prefix URI", uri));
  }
  std::string_view rest = uri.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string bucket(rest.substr(0, slash));
  std::string prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1));
  if (bucket.empty()) {
    return Status::InvalidArgument(
        fmt::format("'{}' names no bucket: use s3://bucket/prefix", uri));
  }
  return std::make_pair(std::move(bucket), std::move(prefix));
}

struct S3Client::Impl {
  S3Options options;
  std::unique_ptr<internal::ServiceSetup> setup;
  bool path_style = false;
  internal::HttpClient http;

  std::string ObjectUrl(const std::string& bucket, const std::string& key) const {
    if (path_style && key.empty()) return fmt::format("{}/{}", setup->endpoint(), bucket);
    if (path_style) {
      return fmt::format("{}/{}/{}", setup->endpoint(), bucket, UriEncode(key, true));
    }
    return fmt::format("{}://{}.{}/{}", setup->scheme(), bucket, setup->host(),
                       UriEncode(key, true));
  }

  // A request for `bucket`/`key` signed for S3; `query` is already canonical (parameters sorted
  // by name, names and values URI-encoded) because curl signs the query as it is written.
  Result<HttpRequest> Request(const std::string& method, const std::string& bucket,
                              const std::string& key, const std::string& query,
                              std::string_view body) {
    HttpRequest request;
    request.method = method;
    request.url = ObjectUrl(bucket, key);
    if (!query.empty()) request.url += "?" + query;
    request.body = body;
    request.headers.push_back("x-amz-content-sha256: " +
                              (body.empty() ? kEmptyPayloadSha256 : Sha256Hex(body)));
    // Unsigned when there are no credentials anywhere, as a public bucket (the seeds' sample)
    // needs.
    SKIPPR_ASSIGN_OR_RETURN(request.signing, setup->SigningFor("s3", /*allows_anonymous=*/true));
    request.connect_timeout = options.connect_timeout;
    request.stall_timeout = options.stall_timeout;
    return request;
  }

  std::string CredentialsSource() { return setup->CredentialsSource(); }

  // Performs `build()`'s request until it gets an answer that is not worth retrying; a 2xx answer
  // is returned, anything else becomes the Status it means.
  Result<HttpResponse> Send(std::string_view operation, const std::string& uri,
                            const std::function<Result<HttpRequest>()>& build) {
    Status last;
    for (int attempt = 1; attempt <= options.retry.max_attempts; ++attempt) {
      if (attempt > 1) internal::BackOff(options.retry, attempt - 1);
      SKIPPR_ASSIGN_OR_RETURN(HttpRequest request, build());
      Result<HttpResponse> response = http.Perform(request);
      if (!response.ok()) {
        if (response.status().code() != StatusCode::kUnavailable) return response.status();
        last = response.status();
        spdlog::debug("{} {}: attempt {} failed: {}", operation, uri, attempt, last.message());
        continue;
      }
      if (response->status >= 200 && response->status < 300) return response;
      const std::string code = internal::XmlText(response->body, "Code").value_or("");
      last = ErrorStatus(operation, uri, *response, CredentialsSource());
      if (!IsRetryableStatus(response->status, code)) return last;
      spdlog::debug("{} {}: attempt {} failed: {}", operation, uri, attempt, last.message());
    }
    return Status::Unavailable(
        fmt::format("{} (gave up after {} attempts)", last.message(), options.retry.max_attempts));
  }
};

S3Client::S3Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
S3Client::~S3Client() = default;

Result<std::unique_ptr<S3Client>> S3Client::Open(const S3Options& options,
                                                 const Environment& environment) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  SKIPPR_ASSIGN_OR_RETURN(
      impl->setup, internal::ServiceSetup::Resolve("S3", options.region, options.endpoint_url,
                                                   {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"},
                                                   "https://s3.{}.amazonaws.com", environment));
  impl->path_style = options.path_style.value_or(impl->setup->is_custom_endpoint());
  return std::unique_ptr<S3Client>(new S3Client(std::move(impl)));
}

const std::string& S3Client::region() const { return impl_->setup->region(); }
const std::string& S3Client::endpoint() const { return impl_->setup->endpoint(); }

Result<ListPage> S3Client::ListObjects(const std::string& bucket, const std::string& prefix,
                                       const std::string& delimiter,
                                       const std::optional<std::string>& continuation_token) {
  // Sorted by name: continuation-token, delimiter, list-type, prefix.
  std::string query;
  if (continuation_token)
    query += "continuation-token=" + UriEncode(*continuation_token, false) + "&";
  if (!delimiter.empty()) query += "delimiter=" + UriEncode(delimiter, false) + "&";
  query += "list-type=2&prefix=" + UriEncode(prefix, false);
  SKIPPR_ASSIGN_OR_RETURN(HttpResponse response, impl_->Send("list", S3Uri(bucket, prefix), [&] {
    return impl_->Request("GET", bucket, "", query, {});
  }));
  ListPage page;
  for (std::string_view contents : internal::XmlElements(response.body, "Contents")) {
    ObjectInfo object;
    object.key = internal::XmlText(contents, "Key").value_or("");
    object.etag = Unquoted(internal::XmlText(contents, "ETag").value_or(""));
    object.last_modified = internal::XmlText(contents, "LastModified").value_or("");
    object.size_bytes = std::stoull(internal::XmlText(contents, "Size").value_or("0"));
    page.objects.push_back(std::move(object));
  }
  for (std::string_view common : internal::XmlElements(response.body, "CommonPrefixes")) {
    page.common_prefixes.push_back(internal::XmlText(common, "Prefix").value_or(""));
  }
  if (internal::XmlText(response.body, "IsTruncated").value_or("false") == "true") {
    page.continuation_token = internal::XmlText(response.body, "NextContinuationToken");
    if (!page.continuation_token) {
      return Status::IOError(fmt::format("list {}: a truncated answer without a continuation token",
                                         S3Uri(bucket, prefix)));
    }
  }
  return page;
}

Status S3Client::ForEachObject(const std::string& bucket, const std::string& prefix,
                               const std::function<Status(const ObjectInfo&)>& visit) {
  std::optional<std::string> token;
  do {
    SKIPPR_ASSIGN_OR_RETURN(ListPage page, ListObjects(bucket, prefix, "", token));
    for (const ObjectInfo& object : page.objects) SKIPPR_RETURN_IF_ERROR(visit(object));
    token = std::move(page.continuation_token);
  } while (token);
  return Status::OK();
}

Result<ObjectInfo> S3Client::HeadObject(const std::string& bucket, const std::string& key) {
  SKIPPR_ASSIGN_OR_RETURN(HttpResponse response, impl_->Send("head", S3Uri(bucket, key), [&] {
    return impl_->Request("HEAD", bucket, key, "", {});
  }));
  ObjectInfo object;
  object.key = key;
  object.etag = Unquoted(response.Header("etag"));
  object.last_modified = response.Header("last-modified");
  const std::string length = response.Header("content-length");
  object.size_bytes = length.empty() ? 0 : std::stoull(length);
  return object;
}

Status S3Client::GetObject(const std::string& bucket, const std::string& key, const ByteSink& sink,
                           uint64_t offset, const std::string& if_match, uint64_t length) {
  if (length == 0) return Status::OK();
  const uint64_t end = length == UINT64_MAX ? UINT64_MAX : offset + length;  // exclusive
  const std::string uri = S3Uri(bucket, key);
  std::string pinned_etag = if_match;
  uint64_t delivered = 0;
  const ByteSink counting = [&](std::string_view bytes) {
    delivered += bytes.size();
    return sink(bytes);
  };
  Status last;
  for (int attempt = 1; attempt <= impl_->options.retry.max_attempts; ++attempt) {
    if (attempt > 1) internal::BackOff(impl_->options.retry, attempt - 1);
    SKIPPR_ASSIGN_OR_RETURN(HttpRequest request, impl_->Request("GET", bucket, key, "", {}));
    const uint64_t from = offset + delivered;
    if (end != UINT64_MAX) {
      request.headers.push_back(fmt::format("Range: bytes={}-{}", from, end - 1));
    } else if (from > 0) {
      request.headers.push_back(fmt::format("Range: bytes={}-", from));
    }
    if (!pinned_etag.empty()) request.headers.push_back("If-Match: \"" + pinned_etag + "\"");
    request.on_body = &counting;
    Result<HttpResponse> response = impl_->http.Perform(request);
    if (!response.ok()) {
      if (response.status().code() != StatusCode::kUnavailable) return response.status();
      last = response.status();
      continue;
    }
    if (response->status == 416 && from > 0) {  // past the end; at the very end, nothing is left
      SKIPPR_ASSIGN_OR_RETURN(ObjectInfo now, HeadObject(bucket, key));
      if (now.size_bytes == from && (pinned_etag.empty() || now.etag == pinned_etag)) {
        return Status::OK();
      }
    }
    if (response->status < 200 || response->status >= 300) {
      const std::string code = internal::XmlText(response->body, "Code").value_or("");
      last = ErrorStatus("get", uri, *response, impl_->CredentialsSource());
      if (response->status == 412) {
        return Status::Conflict(fmt::format(
            "get {}: the object was replaced while it was read (it no longer has ETag {})", uri,
            pinned_etag));
      }
      if (!IsRetryableStatus(response->status, code)) return last;
      continue;
    }
    // Checked here too: not every S3-compatible server honours If-Match.
    const std::string etag = Unquoted(response->Header("etag"));
    if (!pinned_etag.empty() && !etag.empty() && etag != pinned_etag) {
      return Status::Conflict(
          fmt::format("get {}: the object was replaced while it was read (ETag {}, expected {})",
                      uri, etag, pinned_etag));
    }
    if (pinned_etag.empty()) pinned_etag = etag;
    const std::string content_length = response->Header("content-length");
    if (content_length.empty() || response->body_bytes == std::stoull(content_length)) {
      return Status::OK();
    }
    last = Status::Unavailable(fmt::format("get {}: the answer ended after {} of {} bytes", uri,
                                           response->body_bytes, content_length));
  }
  return Status::Unavailable(fmt::format("{} (gave up after {} attempts)", last.message(),
                                         impl_->options.retry.max_attempts));
}

Result<uint64_t> S3Client::DownloadInto(int fd, const std::string& bucket, const std::string& key,
                                        const std::string& if_match) {
  uint64_t written = 0;
  SKIPPR_RETURN_IF_ERROR(GetObject(
      bucket, key,
      [&](std::string_view bytes) {
        while (!bytes.empty()) {
          const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(written));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return ErrnoStatus(errno, "spooling " + S3Uri(bucket, key));
          bytes.remove_prefix(static_cast<size_t>(n));
          written += static_cast<uint64_t>(n);
        }
        return Status::OK();
      },
      0, if_match));
  return written;
}

Result<std::string> S3Client::GetObjectText(const std::string& bucket, const std::string& key) {
  std::string text;
  SKIPPR_RETURN_IF_ERROR(GetObject(bucket, key, [&](std::string_view bytes) {
    text.append(bytes);
    return Status::OK();
  }));
  return text;
}

Result<std::string> S3Client::PutObject(const std::string& bucket, const std::string& key,
                                        std::string_view bytes, const PutOptions& options) {
  SKIPPR_ASSIGN_OR_RETURN(
      HttpResponse response, impl_->Send("put", S3Uri(bucket, key), [&]() -> Result<HttpRequest> {
        SKIPPR_ASSIGN_OR_RETURN(HttpRequest request, impl_->Request("PUT", bucket, key, "", bytes));
        request.headers.push_back("Content-Type: " + options.content_type);
        if (options.if_none_match) request.headers.push_back("If-None-Match: *");
        return request;
      }));
  return Unquoted(response.Header("etag"));
}

Result<std::string> S3Client::UploadObject(const std::string& bucket, const std::string& key,
                                           const ByteSource& source, const PutOptions& options) {
  const std::string uri = S3Uri(bucket, key);
  const size_t part_bytes = impl_->options.multipart_part_bytes;
  std::string part(part_bytes, '\0');
  // Fills `part` from the source; its size is what was read (less than a part only at the end).
  const auto read_part = [&]() -> Result<size_t> {
    size_t filled = 0;
    while (filled < part_bytes) {
      SKIPPR_ASSIGN_OR_RETURN(size_t n, source(part.data() + filled, part_bytes - filled));
      if (n == 0) break;
      filled += n;
    }
    return filled;
  };
  SKIPPR_ASSIGN_OR_RETURN(size_t first_size, read_part());
  if (first_size < part_bytes) {
    return PutObject(bucket, key, std::string_view(part.data(), first_size), options);
  }

  SKIPPR_ASSIGN_OR_RETURN(HttpResponse created,
                          impl_->Send("create multipart upload", uri, [&]() -> Result<HttpRequest> {
                            SKIPPR_ASSIGN_OR_RETURN(
                                HttpRequest request,
                                impl_->Request("POST", bucket, key, "uploads=", {}));
                            request.headers.push_back("Content-Type: " + options.content_type);
                            return request;
                          }));
  const std::optional<std::string> upload_id = internal::XmlText(created.body, "UploadId");
  if (!upload_id) {
    return Status::IOError(
        fmt::format("create multipart upload {}: no UploadId in the answer", uri));
  }
  const std::string upload_query = "uploadId=" + UriEncode(*upload_id, false);
  const auto abort = [&] {
    Result<HttpResponse> aborted = impl_->Send("abort multipart upload", uri, [&] {
      return impl_->Request("DELETE", bucket, key, upload_query, {});
    });
    if (!aborted.ok()) spdlog::warn("{}", aborted.status().message());
  };

  std::string completion = "<CompleteMultipartUpload>";
  size_t size = first_size;
  uint64_t total_bytes = 0;
  for (int number = 1; size > 0; ++number) {
    const std::string_view bytes(part.data(), size);
    const std::string query = fmt::format("partNumber={}&{}", number, upload_query);
    Result<HttpResponse> uploaded = impl_->Send(fmt::format("upload part {} of", number), uri, [&] {
      return impl_->Request("PUT", bucket, key, query, bytes);
    });
    if (!uploaded.ok()) {
      abort();
      return uploaded.status();
    }
    completion += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", number,
                              internal::XmlEscape(uploaded->Header("etag")));
    total_bytes += size;
    Result<size_t> next = read_part();
    if (!next.ok()) {
      abort();
      return next.status();
    }
    size = *next;
  }
  completion += "</CompleteMultipartUpload>";
  Result<HttpResponse> completed = impl_->Send("complete multipart upload", uri, [&] {
    return impl_->Request("POST", bucket, key, upload_query, completion);
  });
  // A retry of a completion whose answer was lost finds the upload gone (S3: NoSuchUpload; some
  // servers answer 500): it took effect when the object is there with every byte uploaded. Callers
  // write fresh keys, so an older object of that size under the key is not a concern.
  if (!completed.ok() && completed.status().code() != StatusCode::kInvalidConfig) {
    Result<ObjectInfo> object = HeadObject(bucket, key);
    if (object.ok() && object->size_bytes == total_bytes) return object->etag;
  }
  // S3 can answer 200 with an error in the body when completing fails late.
  if (completed.ok() && completed->body.find("<Error>") != std::string::npos) {
    completed = Status::IOError(
        fmt::format("complete multipart upload {}: {}", uri,
                    internal::XmlText(completed->body, "Message").value_or(completed->body)));
  }
  if (!completed.ok()) {
    abort();
    return completed.status();
  }
  return Unquoted(internal::XmlText(completed->body, "ETag").value_or(""));
}

Status S3Client::CopyObject(const std::string& bucket, const std::string& from_key,
                            const std::string& to_key) {
  const std::string uri = S3Uri(bucket, to_key);
  SKIPPR_ASSIGN_OR_RETURN(
      HttpResponse response, impl_->Send("copy to", uri, [&]() -> Result<HttpRequest> {
        SKIPPR_ASSIGN_OR_RETURN(HttpRequest request, impl_->Request("PUT", bucket, to_key, "", {}));
        request.headers.push_back(
            fmt::format("x-amz-copy-source: /{}/{}", bucket, UriEncode(from_key, true)));
        return request;
      }));
  // A copy can fail after its 200 has been sent: the error is then in the body.
  if (response.body.find("<Error>") != std::string::npos) {
    return Status::IOError(
        fmt::format("copy {} to {}: {}", S3Uri(bucket, from_key), uri,
                    internal::XmlText(response.body, "Message").value_or(response.body)));
  }
  return Status::OK();
}

Status S3Client::DeleteObject(const std::string& bucket, const std::string& key) {
  Result<HttpResponse> response = impl_->Send(
      "delete", S3Uri(bucket, key), [&] { return impl_->Request("DELETE", bucket, key, "", {}); });
  if (!response.ok() && response.status().code() == StatusCode::kNotFound) return Status::OK();
  return response.status();
}

Status S3Client::CreateBucket(const std::string& bucket) {
  std::string body;
  if (impl_->setup->region() != "us-east-1") {
    body = fmt::format(
        "<CreateBucketConfiguration><LocationConstraint>{}</LocationConstraint>"
        "</CreateBucketConfiguration>",
        impl_->setup->region());
  }
  Result<HttpResponse> response = impl_->Send("create bucket", S3Uri(bucket, ""), [&] {
    return impl_->Request("PUT", bucket, "", "", body);
  });
  if (response.ok()) return Status::OK();
  if (response.status().message().find("BucketAlreadyOwnedByYou") != std::string::npos) {
    return Status::OK();
  }
  return response.status();
}

}  // namespace skippr::aws
