// aws/: the S3 client against a real S3-compatible server (s3rver on loopback), and the credential
// chain against files and variables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "aws/aws.hpp"
#include "aws/internal/http.hpp"
#include "support/aws_servers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::aws {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class S3ClientTest : public testing::ServerSuite<S3ClientTest, testing::S3Server> {
 public:
  static std::unique_ptr<testing::S3Server> StartServer(std::string* why_not) {
    return testing::S3Server::Start(why_not);
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    bucket_ = "bucket-" + std::to_string(++bucket_count_);
    server_->CreateBucket(bucket_);
    client_ = Open({});
  }

  std::unique_ptr<S3Client> Open(S3Options options) {
    environment_ = MapEnvironment(server_->ClientEnvironment());
    auto client = S3Client::Open(options, environment_);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static int bucket_count_;
  MapEnvironment environment_;
  std::string bucket_;
  std::unique_ptr<S3Client> client_;
};

int S3ClientTest::bucket_count_ = 0;

TEST_F(S3ClientTest, PutGetHeadAndDeleteRoundTripAnyKey) {
  // Keys with spaces, reserved URI characters, XML's specials and non-ASCII letters.
  const std::vector<std::string> keys = {"plain.json", "dir/with space/file (1).csv",
                                         "a&b<c>'d\"e.json", "plus+equals=percent%.txt",
                                         "ünïcödé/日本.jsonl"};
  for (const std::string& key : keys) {
    ASSERT_TRUE(client_->PutObject(bucket_, key, "contents of " + key).ok()) << key;
  }
  std::vector<std::string> listed;
  ASSERT_TRUE(client_
                  ->ForEachObject(bucket_, "",
                                  [&](const ObjectInfo& object) {
                                    listed.push_back(object.key);
                                    return Status::OK();
                                  })
                  .ok());
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(listed, sorted);
  for (const std::string& key : keys) {
    auto text = client_->GetObjectText(bucket_, key);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, "contents of " + key);
    auto head = client_->HeadObject(bucket_, key);
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    EXPECT_EQ(head->size_bytes, ("contents of " + key).size());
    EXPECT_EQ(head->etag.size(), 32u) << head->etag;  // MD5 hex, quotes removed
  }
  ASSERT_TRUE(client_->DeleteObject(bucket_, keys[0]).ok());
  ASSERT_TRUE(client_->DeleteObject(bucket_, keys[0]).ok());  // gone already: still OK
  EXPECT_EQ(client_->HeadObject(bucket_, keys[0]).status().code(), StatusCode::kNotFound);
}

TEST_F(S3ClientTest, ListingPagesThroughMoreThanAThousandKeysWithAPrefixAndADelimiter) {
  for (int i = 0; i < 1005; ++i) {
    ASSERT_TRUE(client_->PutObject(bucket_, fmt::format("in/{:04}.json", i), "{}").ok());
  }
  ASSERT_TRUE(client_->PutObject(bucket_, "in/sub/x.json", "{}").ok());
  ASSERT_TRUE(client_->PutObject(bucket_, "out/y.json", "{}").ok());
  std::vector<std::string> keys;
  const Status listed = client_->ForEachObject(bucket_, "in/", [&](const ObjectInfo& object) {
    keys.push_back(object.key);
    return Status::OK();
  });
  ASSERT_TRUE(listed.ok()) << listed.ToString();
  ASSERT_EQ(keys.size(), 1006u);
  EXPECT_EQ(keys.front(), "in/0000.json");
  EXPECT_EQ(keys.back(), "in/sub/x.json");
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));

  auto top = client_->ListObjects(bucket_, "", "/");
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_TRUE(top->objects.empty());
  EXPECT_THAT(top->common_prefixes, ElementsAre("in/", "out/"));
}

TEST_F(S3ClientTest, ALargeUploadGoesInPartsAndReadsBackFromAnyOffset) {
  S3Options options;
  options.multipart_part_bytes = 5 << 20;  // S3's smallest part
  std::unique_ptr<S3Client> client = Open(options);
  std::string payload(12 << 20, '\0');
  std::mt19937_64 random(7);
  for (char& c : payload) c = static_cast<char>(random());
  size_t offset = 0;
  auto etag = client->UploadObject(bucket_, "big.bin", [&](char* buffer, size_t capacity) {
    const size_t n = std::min<size_t>({capacity, payload.size() - offset, 1 << 20});
    std::copy_n(payload.data() + offset, n, buffer);
    offset += n;
    return Result<size_t>(n);
  });
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  auto head = client->HeadObject(bucket_, "big.bin");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size_bytes, payload.size());

  std::string tail;
  ASSERT_TRUE(client
                  ->GetObject(
                      bucket_, "big.bin",
                      [&](std::string_view bytes) {
                        tail.append(bytes);
                        return Status::OK();
                      },
                      7'000'000)
                  .ok());
  EXPECT_TRUE(tail == payload.substr(7'000'000));
  // From exactly the end: nothing, and no error.
  std::string none;
  const Status at_end = client->GetObject(
      bucket_, "big.bin",
      [&](std::string_view bytes) {
        none.append(bytes);
        return Status::OK();
      },
      payload.size());
  ASSERT_TRUE(at_end.ok()) << at_end.ToString();
  EXPECT_TRUE(none.empty());
}

TEST_F(S3ClientTest, ASmallUploadIsOnePut) {
  const std::string payload = "just a few bytes";
  bool given = false;
  auto etag = client_->UploadObject(bucket_, "small.txt", [&](char* buffer, size_t capacity) {
    if (given) return Result<size_t>(size_t{0});
    given = true;
    std::copy(payload.begin(), payload.end(), buffer);
    return Result<size_t>(payload.size());
  });
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  EXPECT_THAT(*etag, ::testing::Not(HasSubstr("-")));
  EXPECT_EQ(*client_->GetObjectText(bucket_, "small.txt"), payload);
}

TEST_F(S3ClientTest, AReadPinnedToAnETagFailsWhenTheObjectWasReplaced) {
  auto first = client_->PutObject(bucket_, "k", "version one");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(client_->PutObject(bucket_, "k", "version two").ok());
  const Status pinned = client_->GetObject(
      bucket_, "k", [](std::string_view) { return Status::OK(); }, 0, *first);
  EXPECT_EQ(pinned.code(), StatusCode::kConflict) << pinned.ToString();
}

TEST_F(S3ClientTest, MissingKeysAndBucketsAreNotFoundNamingTheUri) {
  const Status key =
      client_->GetObject(bucket_, "nope", [](std::string_view) { return Status::OK(); });
  EXPECT_EQ(key.code(), StatusCode::kNotFound);
  EXPECT_THAT(key.message(), HasSubstr("s3://" + bucket_ + "/nope"));
  auto bucket = client_->ListObjects("no-such-bucket", "");
  EXPECT_EQ(bucket.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(bucket.status().message(), HasSubstr("the bucket does not exist"));
}

// No credentials anywhere: requests go unsigned, as reading a public bucket needs.
MapEnvironment Anonymous(const std::string& endpoint) {
  return MapEnvironment({{"AWS_ENDPOINT_URL_S3", endpoint},
                         {"HOME", "/nonexistent"},
                         {"AWS_EC2_METADATA_DISABLED", "true"}});
}

TEST_F(S3ClientTest, WithoutCredentialsAPublicBucketIsReadUnsigned) {
  ASSERT_TRUE(client_->PutObject(bucket_, "public.json", "{}").ok());
  const MapEnvironment anonymous = Anonymous(server_->endpoint());
  auto client = S3Client::Open({}, anonymous);
  ASSERT_TRUE(client.ok());
  auto listed = (*client)->ListObjects(bucket_, "");  // s3rver lets anyone read
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->objects.size(), 1u);
}

TEST_F(S3ClientTest, RequestsRetryUntilTheServerIsBack) {
  ASSERT_TRUE(client_->PutObject(bucket_, "k", "survives a restart").ok());
  std::string why_not;
  std::thread restart([&] {
    // Down for a moment: the client's first attempts are refused.
    ASSERT_TRUE(server_->Restart(&why_not)) << why_not;
  });
  auto text = client_->GetObjectText(bucket_, "k");
  restart.join();
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "survives a restart");
}

TEST_F(S3ClientTest, AnUnreachableEndpointGivesUpNamingItAfterTheRetries) {
  S3Options options;
  options.endpoint_url = fmt::format("http://127.0.0.1:{}", testing::FreeLoopbackPort());
  options.retry.max_attempts = 3;
  options.retry.first_backoff = std::chrono::milliseconds(1);
  auto client = S3Client::Open(options, environment_);
  ASSERT_TRUE(client.ok());
  auto listed = (*client)->ListObjects(bucket_, "");
  EXPECT_EQ(listed.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(listed.status().message(), HasSubstr("gave up after 3 attempts"));
  EXPECT_THAT(listed.status().message(), HasSubstr(options.endpoint_url));
}

// ----- faults, injected by the proxy in front of the server ------------------------------------

class S3ClientFaults : public testing::ServerSuite<S3ClientFaults, testing::S3Server> {
 public:
  static std::unique_ptr<testing::S3Server> StartServer(std::string* why_not) {
    auto server = testing::S3Server::Start(why_not, {.fault_proxy = true});
    if (server) server->CreateBucket("faults");
    return server;
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    server_->InjectFaults(nlohmann::json::object());
    environment_ = MapEnvironment(server_->ClientEnvironment());
    S3Options options;
    options.retry.first_backoff = std::chrono::milliseconds(5);
    options.multipart_part_bytes = 5 << 20;
    auto client = S3Client::Open(options, environment_);
    ASSERT_TRUE(client.ok());
    client_ = std::move(client).value();
  }

  MapEnvironment environment_;
  std::unique_ptr<S3Client> client_;
};

std::string RandomBytes(size_t size, uint64_t seed) {
  std::string bytes(size, '\0');
  std::mt19937_64 random(seed);
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

TEST_F(S3ClientFaults, ServerErrorsAndThrottlingAreRetriedUntilTheyPass) {
  server_->InjectFaults({{"status_every", 2}, {"status", 500}});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client_->PutObject("faults", fmt::format("retried/{}", i), "v").ok());
  }
  server_->InjectFaults({{"status_every", 2}, {"status", 503}, {"code", "SlowDown"}});
  auto page = client_->ListObjects("faults", "retried/");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->objects.size(), 5u);
  EXPECT_EQ(*client_->GetObjectText("faults", "retried/3"), "v");
  EXPECT_GT(server_->FaultCounters()["statuses"].get<int>(), 0);

  // Throttled on every attempt: the client gives up, naming what the server said.
  server_->InjectFaults({{"status_every", 1}, {"status", 503}, {"code", "SlowDown"}});
  auto throttled = client_->GetObjectText("faults", "retried/0");
  EXPECT_EQ(throttled.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(throttled.status().message(), HasSubstr("SlowDown"));
  EXPECT_THAT(throttled.status().message(), HasSubstr("gave up after 8 attempts"));
}

TEST_F(S3ClientFaults, ADownloadCutMidBodyResumesWhereItStoppedWithoutABytesTwice) {
  const std::string payload = RandomBytes(3 << 20, 11);
  ASSERT_TRUE(client_->PutObject("faults", "cut.bin", payload).ok());
  server_->InjectFaults({{"reset_body_every", 2}});  // the second GET is cut halfway
  std::string first;
  ASSERT_TRUE(client_
                  ->GetObject("faults", "cut.bin",
                              [&](std::string_view bytes) {
                                first.append(bytes);
                                return Status::OK();
                              })
                  .ok());
  std::string resumed;
  const Status got = client_->GetObject("faults", "cut.bin", [&](std::string_view bytes) {
    resumed.append(bytes);
    return Status::OK();
  });
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_TRUE(first == payload);
  EXPECT_TRUE(resumed == payload) << resumed.size() << " bytes";
  const nlohmann::json counters = server_->FaultCounters();
  EXPECT_EQ(counters["resets"], 1);
  EXPECT_EQ(counters["ranged_gets"], 1) << "the retry asked only for the bytes still missing";
}

TEST_F(S3ClientFaults, APutWhoseAnswerWasLostIsRetriedAndTheObjectIsWhole) {
  server_->InjectFaults({{"lose_put_every", 2}});
  ASSERT_TRUE(client_->PutObject("faults", "lost/a", "first").ok());
  auto second = client_->PutObject("faults", "lost/b", "second, answer lost once");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(server_->FaultCounters()["lost_puts"], 1);
  EXPECT_EQ(*client_->GetObjectText("faults", "lost/b"), "second, answer lost once");

  // A multipart upload whose completion took effect but whose answer was lost: the retry finds the
  // upload gone and the object whole.
  const std::string payload = RandomBytes(11 << 20, 12);  // parts of 5, 5 and 1 MiB
  server_->InjectFaults({{"lose_put_every", 5}});         // create, 3 parts, then the completion
  size_t offset = 0;
  auto uploaded = client_->UploadObject("faults", "lost/big", [&](char* buffer, size_t capacity) {
    const size_t n = std::min(capacity, payload.size() - offset);
    std::copy_n(payload.data() + offset, n, buffer);
    offset += n;
    return Result<size_t>(n);
  });
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().ToString();
  EXPECT_GE(server_->FaultCounters()["lost_puts"].get<int>(), 1);
  auto whole = client_->GetObjectText("faults", "lost/big");
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(*whole == payload);
}

TEST_F(S3ClientFaults, RequestsWhoseAnswersStallAreTimedOutAndRetriedWithoutDuplicates) {
  S3Options options;
  options.retry.first_backoff = std::chrono::milliseconds(5);
  options.multipart_part_bytes = 5 << 20;
  options.stall_timeout = std::chrono::seconds(1);
  auto client = S3Client::Open(options, environment_);
  ASSERT_TRUE(client.ok());
  // Every third request takes effect and then answers nothing for 3 s.
  server_->InjectFaults({{"stall_every", 3}, {"stall_ms", 3000}});
  for (int i = 0; i < 4; ++i) {
    auto put = (*client)->PutObject("faults", fmt::format("stalled/{}", i),
                                    fmt::format("value {}", i));
    ASSERT_TRUE(put.ok()) << put.status().ToString();
  }
  const std::string payload = RandomBytes(11 << 20, 13);
  size_t offset = 0;
  auto uploaded =
      (*client)->UploadObject("faults", "stalled/big", [&](char* buffer, size_t capacity) {
        const size_t n = std::min(capacity, payload.size() - offset);
        std::copy_n(payload.data() + offset, n, buffer);
        offset += n;
        return Result<size_t>(n);
      });
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().ToString();
  for (int i = 0; i < 4; ++i) {
    auto text = (*client)->GetObjectText("faults", fmt::format("stalled/{}", i));
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, fmt::format("value {}", i));
  }
  auto whole = (*client)->GetObjectText("faults", "stalled/big");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_TRUE(*whole == payload);
  auto page = (*client)->ListObjects("faults", "stalled/");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->objects.size(), 5u) << "no object twice, none missing";
  EXPECT_GE(server_->FaultCounters()["stalls"].get<int>(), 3);
}

TEST_F(S3ClientFaults, ADenialOfAnUnsignedRequestSaysNoCredentialsWereFound) {
  server_->InjectFaults({{"status_every", 1}, {"status", 403}, {"code", "AccessDenied"}});
  const MapEnvironment anonymous = Anonymous(server_->endpoint());
  auto client = S3Client::Open({}, anonymous);
  ASSERT_TRUE(client.ok());
  auto listed = (*client)->ListObjects("faults", "");
  ASSERT_FALSE(listed.ok());
  EXPECT_THAT(listed.status().message(), HasSubstr("access denied (HTTP 403 AccessDenied"));
  EXPECT_THAT(listed.status().message(), HasSubstr("sent unsigned, anonymously"));
  EXPECT_THAT(listed.status().message(), HasSubstr("set AWS_ACCESS_KEY_ID"));
}

// ----- configuration and credentials, no server -------------------------------------------------

TEST(S3ClientOptions, EndpointAndRegionComeFromTheConnectorThenTheEnvironment) {
  MapEnvironment environment({{"AWS_ENDPOINT_URL", "http://generic:1"},
                              {"AWS_ENDPOINT_URL_S3", "http://s3-only:2/"},
                              {"AWS_DEFAULT_REGION", "eu-west-1"}});
  auto from_environment = S3Client::Open({}, environment);
  ASSERT_TRUE(from_environment.ok());
  EXPECT_EQ((*from_environment)->endpoint(), "http://s3-only:2");
  EXPECT_EQ((*from_environment)->region(), "eu-west-1");
  S3Options options;
  options.endpoint_url = "https://minio.internal:9000";
  options.region = "auto";
  auto from_options = S3Client::Open(options, environment);
  ASSERT_TRUE(from_options.ok());
  EXPECT_EQ((*from_options)->endpoint(), "https://minio.internal:9000");
  EXPECT_EQ((*from_options)->region(), "auto");
  auto aws = S3Client::Open({}, MapEnvironment());
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ((*aws)->endpoint(), "https://s3.us-east-1.amazonaws.com");

  options.endpoint_url = "minio:9000";
  auto bad = S3Client::Open(options, environment);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidConfig);
  EXPECT_THAT(bad.status().message(), HasSubstr("is not an http:// or https:// URL"));
}

TEST(S3Credentials, TheChainTakesTheEnvironmentThenTheSharedFileProfile) {
  testing::TempDir dir;
  const std::string file = dir.Write("credentials",
                                     "[default]\naws_access_key_id = DEFAULTKEY\n"
                                     "aws_secret_access_key = defaultsecret\n\n"
                                     "# a comment\n[ci]\naws_access_key_id=CIKEY\n"
                                     "aws_secret_access_key=cisecret\naws_session_token=token\n");
  MapEnvironment environment(
      {{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_EC2_METADATA_DISABLED", "true"}});
  auto from_file = CredentialChain(environment, "us-east-1").Current();
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->access_key_id, "DEFAULTKEY");
  EXPECT_EQ(from_file->secret_access_key, "defaultsecret");

  environment.Set("AWS_PROFILE", "ci");
  auto profile = CredentialChain(environment, "us-east-1").Current();
  ASSERT_TRUE(profile.ok());
  EXPECT_EQ(profile->access_key_id, "CIKEY");
  EXPECT_EQ(profile->session_token, "token");
  EXPECT_THAT(profile->source, HasSubstr("[ci]"));

  environment.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  environment.Set("AWS_SECRET_ACCESS_KEY", "envsecret");
  auto from_environment = CredentialChain(environment, "us-east-1").Current();
  ASSERT_TRUE(from_environment.ok());
  EXPECT_EQ(from_environment->access_key_id, "ENVKEY");
}

TEST(S3Credentials, HalfSetOrMissingCredentialsSayWhatToSet) {
  MapEnvironment half({{"AWS_ACCESS_KEY_ID", "KEY"}, {"AWS_EC2_METADATA_DISABLED", "true"}});
  auto partial = CredentialChain(half, "us-east-1").Current();
  EXPECT_EQ(partial.status().code(), StatusCode::kInvalidConfig);
  EXPECT_THAT(partial.status().message(), HasSubstr("AWS_SECRET_ACCESS_KEY is not"));

  MapEnvironment none({{"HOME", "/nonexistent"}, {"AWS_EC2_METADATA_DISABLED", "true"}});
  auto missing = CredentialChain(none, "us-east-1").Current();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("AWS_ACCESS_KEY_ID"));
}

TEST(S3Xml, ElementsAndEntitiesDecode) {
  const std::string xml =
      "<R xmlns=\"x\"><Contents><Key>a&amp;b&lt;&#x41;&#66;&#x65e5;</Key></Contents>"
      "<Contents><Key/></Contents><KeyCount>2</KeyCount></R>";
  std::vector<std::string> keys;
  for (auto contents : internal::XmlElements(xml, "Contents")) {
    keys.push_back(internal::XmlText(contents, "Key").value_or("?"));
  }
  EXPECT_THAT(keys, ElementsAre("a&b<AB\xe6\x97\xa5", ""));
  EXPECT_EQ(internal::XmlText(xml, "KeyCount"), "2");  // not confused with <Key>
  EXPECT_EQ(internal::XmlText(xml, "Missing"), std::nullopt);
  EXPECT_EQ(internal::XmlDecode(internal::XmlEscape("<a & 'b'>")), "<a & 'b'>");
  EXPECT_EQ(internal::UriEncode("a b/ü~", true), "a%20b/%C3%BC~");
  EXPECT_EQ(internal::UriEncode("a/b", false), "a%2Fb");
}

}  // namespace
}  // namespace skippr::aws
