// Internal to aws/: what every AWS service client resolves when it opens — the region, the
// endpoint, the credential chain — and signs its requests with.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "aws/aws.hpp"
#include "aws/internal/http.hpp"

namespace skippr::aws::internal {

// The variables the endpoints, region and credential chain read, copied out of `environment` for a
// client that resolves them later.
MapEnvironment CopyAwsVariables(const Environment& environment);

class ServiceSetup {
 public:
  // `service_name` names the service in messages ("S3"); `endpoint_variables` are read in order
  // when `endpoint_option` is empty, and `default_endpoint` ("https://s3.{}.amazonaws.com", the
  // region in place of {}) is used when none is set.
  static Result<std::unique_ptr<ServiceSetup>> Resolve(
      std::string_view service_name, const std::string& region_option,
      const std::string& endpoint_option, std::initializer_list<const char*> endpoint_variables,
      std::string_view default_endpoint, const Environment& environment);

  const std::string& region() const { return region_; }
  const std::string& scheme() const { return scheme_; }      // "https"
  const std::string& host() const { return host_; }          // "s3.us-east-1.amazonaws.com"
  const std::string& endpoint() const { return endpoint_; }  // scheme://host[:port]
  bool is_custom_endpoint() const { return is_custom_endpoint_; }

  // How to sign a request for `signing_service` ("s3", "dynamodb"); nullopt (unsigned) when no
  // credentials exist anywhere and `allows_anonymous`. Other credential problems fail.
  Result<std::optional<Signing>> SigningFor(const std::string& signing_service,
                                            bool allows_anonymous);
  // Where the credentials came from, for messages about denied requests.
  std::string CredentialsSource();

 private:
  ServiceSetup() = default;
  MapEnvironment environment_;  // the AWS variables, copied: the chain reads them later
  std::string region_;
  std::string scheme_;
  std::string host_;
  std::string endpoint_;
  bool is_custom_endpoint_ = false;
  std::unique_ptr<CredentialChain> credentials_;
};

}  // namespace skippr::aws::internal
