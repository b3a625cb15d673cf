// The AWS APIs skipprd speaks — S3 and DynamoDB — over libcurl, which signs every request
// (CURLOPT_AWS_SIGV4): no signer of our own. Endpoints, region and credentials are found the way
// the AWS SDKs find them, so a machine set up for the AWS CLI works unchanged:
//
//   endpoint     the connector's endpoint_url → AWS_ENDPOINT_URL_S3 (or _DYNAMODB) →
//                AWS_ENDPOINT_URL → AWS's own
//   region       the connector's region → AWS_REGION → AWS_DEFAULT_REGION → us-east-1
//   credentials  AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY(/AWS_SESSION_TOKEN) → the shared
//                credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile
//                AWS_PROFILE or default) → web identity (AWS_WEB_IDENTITY_TOKEN_FILE +
//                AWS_ROLE_ARN, through STS) → container credentials
//                (AWS_CONTAINER_CREDENTIALS_*_URI) → the instance metadata service (IMDSv2;
//                AWS_EC2_METADATA_DISABLED=true skips it); with none anywhere, requests go
//                unsigned (a public bucket reads; anything else is denied, and the error says
//                that no credentials were found)
//
// Requests that fail in a way a retry can cure (a connection refused or reset, a timeout, HTTP 500,
// 502, 503, 504 and 429, S3's SlowDown) are retried with capped exponential backoff and jitter.
// Errors name the operation and the s3:// URI, and say what to check.
//
// An S3Client is not thread-safe (it keeps one connection alive); give each thread its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/env.hpp"
#include "core/environment.hpp"
#include "core/status.hpp"

namespace skippr::aws {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials only
  // When temporary credentials stop working; nullopt for long-term keys.
  std::optional<std::chrono::system_clock::time_point> expires_at;
  std::string source;  // where they came from, for messages ("environment", "~/.aws/credentials")
};

// Finds credentials along the chain above and renews temporary ones before they expire.
class CredentialChain {
 public:
  explicit CredentialChain(const Environment& environment, std::string region);
  // Credentials that are valid for at least a few more minutes. NotFound naming every place
  // searched when there are none.
  Result<Credentials> Current();

 private:
  Result<Credentials> Resolve();
  const Environment& environment_;
  std::string region_;
  std::optional<Credentials> cached_;
};

struct RetryPolicy {
  int max_attempts = 8;
  std::chrono::milliseconds first_backoff{100};
  std::chrono::milliseconds max_backoff{10'000};
};

struct S3Options {
  std::string region;        // empty: from the environment (above)
  std::string endpoint_url;  // empty: from the environment, else AWS's
  // Path-style addressing (http://host/bucket/key): the default for a custom endpoint, since
  // S3-compatible servers seldom resolve <bucket>.<host>; AWS itself gets virtual-hosted style.
  std::optional<bool> path_style;
  RetryPolicy retry;
  std::chrono::seconds connect_timeout{10};
  // A transfer slower than 1 KiB/s for this long is abandoned (and retried): no total timeout, so a
  // large object may take as long as it needs.
  std::chrono::seconds stall_timeout{30};
  // Objects up to this size go in one PUT; larger ones as a multipart upload of parts this size.
  uint64_t multipart_part_bytes = uint64_t{16} << 20;
};

struct ObjectInfo {
  std::string key;
  uint64_t size_bytes = 0;
  std::string etag;           // as S3 gives it, quotes removed
  std::string last_modified;  // ISO 8601, as S3 gives it
};

struct ListPage {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> common_prefixes;  // with a delimiter: the "directories" at this level
  std::optional<std::string> continuation_token;  // more to list when set
};

struct PutOptions {
  // If-None-Match: * — the PUT fails (Conflict) when the key exists. Servers that ignore the header
  // overwrite; callers that need the guarantee also check (HeadObject) after an unknown outcome.
  bool if_none_match = false;
  std::string content_type = "application/octet-stream";
};

// Receives an object's bytes in order; a failed Status stops the download.
using ByteSink = std::function<Status(std::string_view bytes)>;
// Supplies a multipart upload's bytes: fills `buffer` with up to `capacity` bytes, 0 at the end.
using ByteSource = std::function<Result<size_t>(char* buffer, size_t capacity)>;

// A new unlinked file in `directory` (created when missing), open for reading and writing, for an
// object on its way in or out: nothing is left on disk however the process ends. Its descriptor
// belongs to the caller. Failures are IOError, never NotFound (which would say an object is gone).
Result<int> OpenSpoolFile(const std::string& directory);

// "s3://bucket/key" for messages.
std::string S3Uri(std::string_view bucket, std::string_view key);

// Splits "s3://bucket/prefix" into bucket and prefix (without leading '/'); InvalidArgument
// otherwise.
Result<std::pair<std::string, std::string>> ParseS3Uri(std::string_view uri);

class S3Client {
 public:
  // The region, endpoint and credentials as described above. Resolving credentials is deferred to
  // the first request, so a client can be made where none are needed yet.
  static Result<std::unique_ptr<S3Client>> Open(const S3Options& options,
                                                const Environment& environment);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const std::string& region() const;
  const std::string& endpoint() const;  // scheme://host[:port], without a trailing '/'

  // One page of ListObjectsV2 (up to 1000 keys, in UTF-8 binary order). NotFound when the bucket
  // does not exist.
  Result<ListPage> ListObjects(const std::string& bucket, const std::string& prefix,
                               const std::string& delimiter = "",
                               const std::optional<std::string>& continuation_token = {});
  // Every object under `prefix` (no delimiter), page by page, in key order; stops at the first
  // failed Status `visit` returns.
  Status ForEachObject(const std::string& bucket, const std::string& prefix,
                       const std::function<Status(const ObjectInfo&)>& visit);

  // NotFound when there is no such key.
  Result<ObjectInfo> HeadObject(const std::string& bucket, const std::string& key);
  // The object's bytes from `offset` (`length` of them, or to its end), to `sink`, in pieces. With
  // `if_match` the object must still have that ETag (Conflict otherwise: it was replaced). A
  // retried download resumes where the bytes stopped, pinned to the ETag the first answer carried;
  // should a server ignore If-Match and serve a replaced object, the ETag check fails (Conflict)
  // after `sink` saw some of its bytes: on a failure, discard what the sink got.
  Status GetObject(const std::string& bucket, const std::string& key, const ByteSink& sink,
                   uint64_t offset = 0, const std::string& if_match = "",
                   uint64_t length = UINT64_MAX);
  // The object's bytes (pinned to `if_match` when given) written into `fd` from its offset 0;
  // the bytes written. Errors as GetObject's.
  Result<uint64_t> DownloadInto(int fd, const std::string& bucket, const std::string& key,
                                const std::string& if_match = "");
  // A small object whole (metadata, tests).
  Result<std::string> GetObjectText(const std::string& bucket, const std::string& key);

  // One PUT; the ETag S3 gave it.
  Result<std::string> PutObject(const std::string& bucket, const std::string& key,
                                std::string_view bytes, const PutOptions& options = {});
  // `source` until it ends: one PUT when it fits in a part, else a multipart upload (aborted when
  // anything fails, so no parts are left behind).
  Result<std::string> UploadObject(const std::string& bucket, const std::string& key,
                                   const ByteSource& source, const PutOptions& options = {});
  // A server-side copy of `from_key` to `to_key` in `bucket` (the copy appears whole). NotFound
  // when `from_key` is missing.
  Status CopyObject(const std::string& bucket, const std::string& from_key,
                    const std::string& to_key);
  // OK when the key is gone, whether or not it was there.
  Status DeleteObject(const std::string& bucket, const std::string& key);
  // OK when the bucket exists afterwards (created now, or already ours).
  Status CreateBucket(const std::string& bucket);

 private:
  struct Impl;
  explicit S3Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The variables the AWS endpoints, region and credential chain read, copied out of `environment`
// for clients opened later (a pool of them).
MapEnvironment CopyAwsVariables(const Environment& environment);

// Where an S3Env keeps local copies of objects read or written by name (below).
struct LocalCopyOptions {
  std::string directory;  // empty: LocalPathFor* are NotSupported
  uint64_t max_bytes = uint64_t{4} << 30;
};

// An Env (core/env.hpp) over S3, for the components that write their files through an Env: paths
// are s3://bucket/key URIs. A file is an object:
//   - a file open for writing is spooled to an unlinked local file and uploaded whole (multipart
//     when large) at Sync and at Close: it appears whole or not at all, and Sync returning means it
//     is durable. kCreateNew refuses an existing object (and asks the server with If-None-Match);
//     kOpenExisting and kCreateOrOpen start from the object's bytes;
//   - reads are ranged GETs pinned to the ETag the object had when it was opened;
//   - directories are key prefixes: CreateDirectory and SyncDirectory have nothing to do, and
//     ListDirectory lists one level below the prefix;
//   - a rename is a server-side copy then a delete: the new name appears whole, and for a moment
//     both names exist; RemoveFile of a missing object is OK;
//   - locks are NotSupported (a writer lease on S3 lives in the store);
//   - files another component writes or reads by name (DuckDB's Parquet files) have local copies
//     at {LocalCopyOptions::directory}/{bucket}/{key}: LocalPathForWriting hands out the copy's
//     path and SyncFile uploads it; LocalPathForReading downloads the object unless the copy has
//     its size. The copies are a cache, trimmed to max_bytes least recently used first.
// Thread-safe as Env asks: each operation borrows a client (a connection) from a pool.
class S3Env final : public Env {
 public:
  // `spool_directory`: a local directory for files open for writing (created when missing).
  static Result<std::unique_ptr<S3Env>> Open(const S3Options& options,
                                             const Environment& environment,
                                             std::string spool_directory,
                                             LocalCopyOptions local_copies = {});
  ~S3Env() override;

  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     const WritableFileOptions& options) override;
  Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  Result<bool> FileExists(const std::string& path) override;
  Result<std::vector<std::string>> ListDirectory(const std::string& directory) override;
  Result<bool> CreateDirectory(const std::string& path, uint32_t permissions) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RenameFileNoReplace(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status SyncDirectory(const std::string& directory) override;
  Status SyncFile(const std::string& path) override;
  Result<std::string> LocalPathForWriting(const std::string& path) override;
  Result<std::string> LocalPathForReading(const std::string& path) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             uint32_t permissions) override;

  struct Impl;

 private:
  explicit S3Env(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

struct DynamoOptions {
  std::string region;        // empty: from the environment (above)
  std::string endpoint_url;  // empty: AWS_ENDPOINT_URL_DYNAMODB → AWS_ENDPOINT_URL → AWS's
  RetryPolicy retry;
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds stall_timeout{30};
};

// The DynamoDB JSON API. Errors: ConditionalCheckFailedException and TransactionCanceledException
// are Conflict, ResourceNotFoundException NotFound, ValidationException InvalidArgument; throttling
// (ProvisionedThroughputExceeded, Throttling, RequestLimitExceeded) and the service's own errors are
// retried, then Unavailable. Messages name the action and the table. Not thread-safe.
class DynamoClient {
 public:
  // DynamoDB always needs credentials: NotFound (saying where they were looked for) at the first
  // request when there are none.
  static Result<std::unique_ptr<DynamoClient>> Open(const DynamoOptions& options,
                                                    const Environment& environment);
  ~DynamoClient();
  DynamoClient(const DynamoClient&) = delete;
  DynamoClient& operator=(const DynamoClient&) = delete;

  const std::string& region() const;
  const std::string& endpoint() const;

  // One action ("PutItem") with its JSON request; the JSON answer.
  Result<nlohmann::json> Call(std::string_view action, const nlohmann::json& request);
  // Every item a Query or Scan `request` matches, page by page; stops at the first failed Status
  // `visit` returns.
  Status ForEachItem(std::string_view action, const nlohmann::json& request,
                     const std::function<Status(const nlohmann::json& item)>& visit);
  // `write_requests` ({"PutRequest": ...} / {"DeleteRequest": ...}) in BatchWriteItem calls of at
  // most 25, resubmitting what DynamoDB leaves unprocessed (with backoff) until all are written.
  // Not atomic: a failure leaves some written.
  Status BatchWrite(const std::string& table, const std::vector<nlohmann::json>& write_requests);
  // Creates `table` (string partition key and sort key, on-demand capacity) unless it exists, and
  // waits until it is ACTIVE. `created` says whether this call created it.
  Status EnsureTable(const std::string& table, const std::string& partition_key,
                     const std::string& sort_key, bool* created = nullptr);
  // Whether `table` exists (DescribeTable).
  Result<bool> TableExists(const std::string& table);

 private:
  struct Impl;
  explicit DynamoClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The AWS CLI command that creates `table` as EnsureTable does, for messages that tell a user
// without dynamodb:CreateTable what to run.
std::string CreateTableCommand(const std::string& table, const std::string& partition_key = "pk",
                               const std::string& sort_key = "sk");

}  // namespace skippr::aws
