// The DynamoDB JSON API (aws.hpp): one POST per action, signed by curl for the "dynamodb" service.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "aws/internal/http.hpp"
#include "aws/internal/service.hpp"
#include "core/hash.hpp"

namespace skippr::aws {

namespace {

using nlohmann::json;

constexpr size_t kBatchWriteItems = 25;  // BatchWriteItem's limit
constexpr int kTableActiveChecks = 120;  // 250 ms apart: half a minute
constexpr std::chrono::milliseconds kTableCheckInterval{250};

// "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException" → its last part.
std::string ErrorType(const json& answer) {
  const std::string type = answer.value("__type", std::string());
  const size_t hash = type.rfind('#');
  return hash == std::string::npos ? type : type.substr(hash + 1);
}

std::string ErrorMessage(const json& answer) {
  if (answer.contains("message")) return answer["message"].get<std::string>();
  return answer.value("Message", std::string());
}

bool IsRetryable(long status, const std::string& type) {
  return status >= 500 || type == "ProvisionedThroughputExceededException" ||
         type == "ThrottlingException" || type == "RequestLimitExceeded" ||
         type == "InternalServerError" || type == "ServiceUnavailable";
}

Status ErrorStatus(const std::string& what, long status, const json& answer,
                   const std::string& credentials_source) {
  const std::string type = ErrorType(answer);
  const std::string said =
      fmt::format("{}{}{}", type.empty() ? fmt::format("HTTP {}", status) : type,
                  ErrorMessage(answer).empty() ? "" : ": ", ErrorMessage(answer));
  const std::string message = fmt::format("{}: {}", what, said);
  if (type == "ConditionalCheckFailedException" || type == "TransactionCanceledException" ||
      type == "ResourceInUseException") {
    return Status::Conflict(message);
  }
  if (type == "ResourceNotFoundException") return Status::NotFound(message);
  if (type == "ValidationException" || type == "SerializationException") {
    return Status::InvalidArgument(message);
  }
  if (status == 403 || type == "UnrecognizedClientException" ||
      type == "MissingAuthenticationTokenException" || type == "InvalidSignatureException" ||
      type == "AccessDeniedException") {
    return Status::IOError(fmt::format("{}; check the credentials (from {}) and the IAM policy",
                                       message, credentials_source));
  }
  return Status::IOError(message);
}

}  // namespace

struct DynamoClient::Impl {
  DynamoOptions options;
  std::unique_ptr<internal::ServiceSetup> setup;
  internal::HttpClient http;

  Result<json> Call(std::string_view action, const json& request) {
    const std::string what =
        request.contains("TableName")
            ? fmt::format("dynamodb {} {}", action, request["TableName"].get<std::string>())
            : fmt::format("dynamodb {}", action);
    const std::string body = request.dump();
    Status last;
    for (int attempt = 1; attempt <= options.retry.max_attempts; ++attempt) {
      if (attempt > 1) internal::BackOff(options.retry, attempt - 1);
      internal::HttpRequest http_request;
      http_request.method = "POST";
      http_request.url = setup->endpoint() + "/";
      http_request.body = body;
      http_request.headers = {"Content-Type: application/x-amz-json-1.0",
                              fmt::format("X-Amz-Target: DynamoDB_20120810.{}", action),
                              "x-amz-content-sha256: " + Sha256Hex(body)};
      http_request.connect_timeout = options.connect_timeout;
      http_request.stall_timeout = options.stall_timeout;
      SKIPPR_ASSIGN_OR_RETURN(http_request.signing,
                              setup->SigningFor("dynamodb", /*allows_anonymous=*/false));
      Result<internal::HttpResponse> response = http.Perform(http_request);
      if (!response.ok()) {
        if (response.status().code() != StatusCode::kUnavailable) return response.status();
        last = Status::Unavailable(fmt::format("{}: {}", what, response.status().message()));
        continue;
      }
      const json answer = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
      if (response->status == 200 && !answer.is_discarded()) return answer;
      const json error = answer.is_discarded() ? json::object() : answer;
      last = ErrorStatus(what, response->status, error, setup->CredentialsSource());
      if (!IsRetryable(response->status, ErrorType(error))) return last;
      spdlog::debug("{}: attempt {} failed: {}", what, attempt, last.message());
    }
    return Status::Unavailable(
        fmt::format("{} (gave up after {} attempts)", last.message(), options.retry.max_attempts));
  }
};

DynamoClient::DynamoClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DynamoClient::~DynamoClient() = default;

Result<std::unique_ptr<DynamoClient>> DynamoClient::Open(const DynamoOptions& options,
                                                         const Environment& environment) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  SKIPPR_ASSIGN_OR_RETURN(impl->setup, internal::ServiceSetup::Resolve(
                                           "DynamoDB", options.region, options.endpoint_url,
                                           {"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"},
                                           "https://dynamodb.{}.amazonaws.com", environment));
  return std::unique_ptr<DynamoClient>(new DynamoClient(std::move(impl)));
}

const std::string& DynamoClient::region() const { return impl_->setup->region(); }
const std::string& DynamoClient::endpoint() const { return impl_->setup->endpoint(); }

Result<json> DynamoClient::Call(std::string_view action, const json& request) {
  return impl_->Call(action, request);
}

Status DynamoClient::ForEachItem(std::string_view action, const json& request,
                                 const std::function<Status(const json& item)>& visit) {
  json page_request = request;
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(json page, Call(action, page_request));
    for (const json& item : page.value("Items", json::array())) {
      SKIPPR_RETURN_IF_ERROR(visit(item));
    }
    if (!page.contains("LastEvaluatedKey")) return Status::OK();
    page_request["ExclusiveStartKey"] = page["LastEvaluatedKey"];
  }
}

Status DynamoClient::BatchWrite(const std::string& table, const std::vector<json>& write_requests) {
  for (size_t begin = 0; begin < write_requests.size(); begin += kBatchWriteItems) {
    const size_t end = std::min(write_requests.size(), begin + kBatchWriteItems);
    json pending = json::array();
    for (size_t i = begin; i < end; ++i) pending.push_back(write_requests[i]);
    for (int attempt = 1; !pending.empty(); ++attempt) {
      if (attempt > impl_->options.retry.max_attempts) {
        return Status::Unavailable(fmt::format(
            "dynamodb BatchWriteItem {}: {} items still unprocessed after {} attempts (throttled)",
            table, pending.size(), impl_->options.retry.max_attempts));
      }
      if (attempt > 1) internal::BackOff(impl_->options.retry, attempt - 1);
      SKIPPR_ASSIGN_OR_RETURN(json answer,
                              Call("BatchWriteItem", {{"RequestItems", {{table, pending}}}}));
      const json unprocessed = answer.value("UnprocessedItems", json::object());
      pending = unprocessed.contains(table) ? unprocessed[table] : json::array();
    }
  }
  return Status::OK();
}

Status DynamoClient::EnsureTable(const std::string& table, const std::string& partition_key,
                                 const std::string& sort_key, bool* created) {
  if (created != nullptr) *created = false;
  const json definition = {{"TableName", table},
                           {"AttributeDefinitions",
                            {{{"AttributeName", partition_key}, {"AttributeType", "S"}},
                             {{"AttributeName", sort_key}, {"AttributeType", "S"}}}},
                           {"KeySchema",
                            {{{"AttributeName", partition_key}, {"KeyType", "HASH"}},
                             {{"AttributeName", sort_key}, {"KeyType", "RANGE"}}}},
                           {"BillingMode", "PAY_PER_REQUEST"}};
  Result<json> described = Call("DescribeTable", {{"TableName", table}});
  if (!described.ok() && described.status().code() == StatusCode::kNotFound) {
    Result<json> made = Call("CreateTable", definition);
    if (made.ok() && created != nullptr) *created = true;
    // Created by another process in between: fine, as long as it becomes ACTIVE.
    if (!made.ok() && made.status().code() != StatusCode::kConflict) return made.status();
  } else if (!described.ok()) {
    return described.status();
  }
  for (int check = 0; check < kTableActiveChecks; ++check) {
    SKIPPR_ASSIGN_OR_RETURN(json answer, Call("DescribeTable", {{"TableName", table}}));
    if (answer["Table"].value("TableStatus", std::string()) == "ACTIVE") return Status::OK();
    std::this_thread::sleep_for(kTableCheckInterval);
  }
  return Status::Unavailable(fmt::format(
      "dynamodb table {} did not become ACTIVE within 30 s; check it in the AWS console", table));
}

Result<bool> DynamoClient::TableExists(const std::string& table) {
  Result<json> described = Call("DescribeTable", {{"TableName", table}});
  if (described.ok()) return true;
  if (described.status().code() == StatusCode::kNotFound) return false;
  return described.status();
}

std::string CreateTableCommand(const std::string& table, const std::string& partition_key,
                               const std::string& sort_key) {
  return fmt::format(
      "aws dynamodb create-table --table-name {0} --attribute-definitions "
      "AttributeName={1},AttributeType=S AttributeName={2},AttributeType=S --key-schema "
      "AttributeName={1},KeyType=HASH AttributeName={2},KeyType=RANGE --billing-mode "
      "PAY_PER_REQUEST",
      table, partition_key, sort_key);
}

}  // namespace skippr::aws
