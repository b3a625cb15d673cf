#include "aws/internal/service.hpp"

#include <fmt/format.h>

namespace skippr::aws::internal {

namespace {

// The variables the endpoints, region and credential chain read, copied when a client is opened.
constexpr const char* kAwsVariables[] = {"AWS_ENDPOINT_URL",
                                         "AWS_ENDPOINT_URL_S3",
                                         "AWS_ENDPOINT_URL_DYNAMODB",
                                         "AWS_ENDPOINT_URL_STS",
                                         "AWS_REGION",
                                         "AWS_DEFAULT_REGION",
                                         "AWS_ACCESS_KEY_ID",
                                         "AWS_SECRET_ACCESS_KEY",
                                         "AWS_SESSION_TOKEN",
                                         "AWS_SHARED_CREDENTIALS_FILE",
                                         "AWS_PROFILE",
                                         "HOME",
                                         "AWS_WEB_IDENTITY_TOKEN_FILE",
                                         "AWS_ROLE_ARN",
                                         "AWS_ROLE_SESSION_NAME",
                                         "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                         "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                         "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                                         "AWS_EC2_METADATA_DISABLED",
                                         "AWS_EC2_METADATA_SERVICE_ENDPOINT"};

std::string FirstSet(const Environment& environment, std::initializer_list<const char*> names,
                     std::string fallback) {
  for (const char* name : names) {
    std::optional<std::string> value = environment.Get(name);
    if (value && !value->empty()) return *value;
  }
  return fallback;
}

}  // namespace

MapEnvironment CopyAwsVariables(const Environment& environment) {
  MapEnvironment copy;
  for (const char* name : kAwsVariables) {
    if (std::optional<std::string> value = environment.Get(name)) copy.Set(name, *value);
  }
  return copy;
}

Result<std::unique_ptr<ServiceSetup>> ServiceSetup::Resolve(
    std::string_view service_name, const std::string& region_option,
    const std::string& endpoint_option, std::initializer_list<const char*> endpoint_variables,
    std::string_view default_endpoint, const Environment& environment) {
  std::unique_ptr<ServiceSetup> setup(new ServiceSetup());
  setup->environment_ = CopyAwsVariables(environment);
  setup->region_ = region_option.empty()
                       ? FirstSet(environment, {"AWS_REGION", "AWS_DEFAULT_REGION"}, "us-east-1")
                       : region_option;
  std::string endpoint =
      endpoint_option.empty() ? FirstSet(environment, endpoint_variables, "") : endpoint_option;
  setup->is_custom_endpoint_ = !endpoint.empty();
  if (endpoint.empty()) endpoint = fmt::format(fmt::runtime(default_endpoint), setup->region_);
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string::npos ||
      (endpoint.substr(0, scheme_end) != "http" && endpoint.substr(0, scheme_end) != "https")) {
    return Status::InvalidConfig(fmt::format(
        "{} endpoint '{}' is not an http:// or https:// URL (for example http://127.0.0.1:9000)",
        service_name, endpoint));
  }
  setup->scheme_ = endpoint.substr(0, scheme_end);
  setup->host_ = endpoint.substr(scheme_end + 3);
  if (setup->host_.empty() || setup->host_.find('/') != std::string::npos) {
    return Status::InvalidConfig(fmt::format(
        "{} endpoint '{}' must be scheme://host[:port] with no path", service_name, endpoint));
  }
  setup->endpoint_ = endpoint;
  setup->credentials_ = std::make_unique<CredentialChain>(setup->environment_, setup->region_);
  return setup;
}

Result<std::optional<Signing>> ServiceSetup::SigningFor(const std::string& signing_service,
                                                        bool allows_anonymous) {
  Result<Credentials> current = credentials_->Current();
  if (current.ok()) {
    return std::optional<Signing>(Signing{signing_service, region_, std::move(current).value()});
  }
  if (allows_anonymous && current.status().code() == StatusCode::kNotFound) {
    return std::optional<Signing>();
  }
  return current.status();
}

std::string ServiceSetup::CredentialsSource() {
  Result<Credentials> current = credentials_->Current();
  if (current.ok()) return current->source;
  return "nowhere: the request was sent unsigned, anonymously, because " +
         current.status().message();
}

}  // namespace skippr::aws::internal

namespace skippr::aws {

MapEnvironment CopyAwsVariables(const Environment& environment) {
  return internal::CopyAwsVariables(environment);
}

}  // namespace skippr::aws
