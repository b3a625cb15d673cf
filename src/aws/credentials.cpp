// The standard AWS credential chain (aws.hpp). Each provider says nothing (nullopt) when it does
// not apply here, and fails only when it applies and is broken: a half-set environment, a shared
// credentials file whose profile lacks a key, an STS or metadata answer without credentials.
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "aws/internal/http.hpp"

namespace skippr::aws {

namespace {

using internal::PlainRequest;
using Provided = Result<std::optional<Credentials>>;
using Clock = std::chrono::system_clock;

// Temporary credentials are renewed this long before they expire.
constexpr std::chrono::minutes kRenewBefore{5};
// The metadata services answer in milliseconds where they exist; elsewhere their addresses do not
// answer at all, and the chain should give up quickly.
constexpr std::chrono::seconds kMetadataTimeout{2};

std::string Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

std::optional<std::string> NonEmpty(const Environment& environment, const std::string& name) {
  std::optional<std::string> value = environment.Get(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

// "2026-12-05T12:00:00Z" (STS, metadata services).
std::optional<Clock::time_point> ParseIsoTime(const std::string& text) {
  std::tm parts{};
  std::istringstream in(text);
  in >> std::get_time(&parts, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return std::nullopt;
  return Clock::from_time_t(timegm(&parts));
}

Provided FromEnvironment(const Environment& environment) {
  const auto key = NonEmpty(environment, "AWS_ACCESS_KEY_ID");
  const auto secret = NonEmpty(environment, "AWS_SECRET_ACCESS_KEY");
  if (!key && !secret) return std::optional<Credentials>();
  if (!key || !secret) {
    return Status::InvalidConfig(fmt::format(
        "{} is set but {} is not: set both (or neither, to use the shared credentials file or an "
        "instance role)",
        key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
        key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID"));
  }
  Credentials credentials{*key, *secret, NonEmpty(environment, "AWS_SESSION_TOKEN").value_or(""),
                          std::nullopt, "the environment (AWS_ACCESS_KEY_ID)"};
  return std::optional<Credentials>(std::move(credentials));
}

// The [profile] section of an INI file as key → value.
std::map<std::string, std::string> IniSection(std::istream& in, const std::string& section) {
  std::map<std::string, std::string> values;
  bool is_inside = false;
  std::string line;
  while (std::getline(in, line)) {
    const std::string text = Trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      is_inside = Trim(text.substr(1, text.size() - 2)) == section;
      continue;
    }
    const size_t equals = text.find('=');
    if (is_inside && equals != std::string::npos) {
      values[Trim(text.substr(0, equals))] = Trim(text.substr(equals + 1));
    }
  }
  return values;
}

Provided FromSharedFile(const Environment& environment) {
  std::string path;
  if (auto explicit_path = NonEmpty(environment, "AWS_SHARED_CREDENTIALS_FILE")) {
    path = *explicit_path;
  } else if (auto home = NonEmpty(environment, "HOME")) {
    path = *home + "/.aws/credentials";
  } else {
    return std::optional<Credentials>();
  }
  std::ifstream in(path);
  if (!in) return std::optional<Credentials>();
  const std::string profile = NonEmpty(environment, "AWS_PROFILE").value_or("default");
  std::map<std::string, std::string> values = IniSection(in, profile);
  if (values.empty()) return std::optional<Credentials>();
  if (values["aws_access_key_id"].empty() || values["aws_secret_access_key"].empty()) {
    return Status::InvalidConfig(fmt::format(
        "{}: profile [{}] needs both aws_access_key_id and aws_secret_access_key", path, profile));
  }
  Credentials credentials{values["aws_access_key_id"], values["aws_secret_access_key"],
                          values["aws_session_token"], std::nullopt,
                          fmt::format("{} [{}]", path, profile)};
  return std::optional<Credentials>(std::move(credentials));
}

Provided FromWebIdentity(const Environment& environment, const std::string& region) {
  const auto token_file = NonEmpty(environment, "AWS_WEB_IDENTITY_TOKEN_FILE");
  const auto role = NonEmpty(environment, "AWS_ROLE_ARN");
  if (!token_file || !role) return std::optional<Credentials>();
  std::ifstream in(*token_file);
  if (!in) {
    return Status::InvalidConfig(fmt::format(
        "AWS_WEB_IDENTITY_TOKEN_FILE {} cannot be read: check the path and its permissions",
        *token_file));
  }
  std::stringstream token;
  token << in.rdbuf();
  const std::string session = NonEmpty(environment, "AWS_ROLE_SESSION_NAME").value_or("skipprd");
  const std::string endpoint = NonEmpty(environment, "AWS_ENDPOINT_URL_STS")
                                   .value_or(fmt::format("https://sts.{}.amazonaws.com", region));
  const std::string url = fmt::format(
      "{}/?Action=AssumeRoleWithWebIdentity&RoleArn={}&RoleSessionName={}&Version=2011-06-15&"
      "WebIdentityToken={}",
      endpoint, internal::UriEncode(*role, false), internal::UriEncode(session, false),
      internal::UriEncode(Trim(token.str()), false));
  SKIPPR_ASSIGN_OR_RETURN(
      internal::HttpResponse response,
      PlainRequest("GET", url, {"Accept: application/xml"}, kMetadataTimeout * 5));
  auto key = internal::XmlText(response.body, "AccessKeyId");
  auto secret = internal::XmlText(response.body, "SecretAccessKey");
  if (response.status != 200 || !key || !secret) {
    return Status::Unavailable(fmt::format(
        "STS AssumeRoleWithWebIdentity for {} answered HTTP {}: {}", *role, response.status,
        internal::XmlText(response.body, "Message").value_or(response.body.substr(0, 200))));
  }
  Credentials credentials{*key, *secret,
                          internal::XmlText(response.body, "SessionToken").value_or(""),
                          ParseIsoTime(internal::XmlText(response.body, "Expiration").value_or("")),
                          fmt::format("web identity ({})", *role)};
  return std::optional<Credentials>(std::move(credentials));
}

// The JSON the container and instance metadata services answer with.
Provided FromMetadataJson(const std::string& body, const std::string& source) {
  const nlohmann::json json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_object() || !json.contains("AccessKeyId") || !json.contains("SecretAccessKey")) {
    return Status::Unavailable(fmt::format("{} answered without credentials", source));
  }
  Credentials credentials{json["AccessKeyId"].get<std::string>(),
                          json["SecretAccessKey"].get<std::string>(),
                          json.value("Token", std::string()),
                          ParseIsoTime(json.value("Expiration", std::string())), source};
  return std::optional<Credentials>(std::move(credentials));
}

Provided FromContainer(const Environment& environment) {
  std::string url;
  if (auto relative = NonEmpty(environment, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
    url = "http://169.254.170.2" + *relative;
  } else if (auto full = NonEmpty(environment, "AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
    url = *full;
  } else {
    return std::optional<Credentials>();
  }
  std::vector<std::string> headers;
  if (auto token = NonEmpty(environment, "AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
    headers.push_back("Authorization: " + *token);
  }
  SKIPPR_ASSIGN_OR_RETURN(internal::HttpResponse response,
                          PlainRequest("GET", url, headers, kMetadataTimeout));
  if (response.status != 200) {
    return Status::Unavailable(
        fmt::format("container credentials at {} answered HTTP {}", url, response.status));
  }
  return FromMetadataJson(response.body, "container credentials");
}

Provided FromInstanceMetadata(const Environment& environment) {
  if (NonEmpty(environment, "AWS_EC2_METADATA_DISABLED").value_or("") == "true") {
    return std::optional<Credentials>();
  }
  const std::string base =
      NonEmpty(environment, "AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or("http://169.254.169.254");
  Result<internal::HttpResponse> token =
      PlainRequest("PUT", base + "/latest/api/token",
                   {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, kMetadataTimeout);
  if (!token.ok() || token->status != 200) return std::optional<Credentials>();  // not on EC2
  const std::vector<std::string> headers = {"X-aws-ec2-metadata-token: " + token->body};
  const std::string roles_url = base + "/latest/meta-data/iam/security-credentials/";
  SKIPPR_ASSIGN_OR_RETURN(internal::HttpResponse roles,
                          PlainRequest("GET", roles_url, headers, kMetadataTimeout));
  const std::string role = Trim(roles.body.substr(0, roles.body.find('\n')));
  if (roles.status != 200 || role.empty()) return std::optional<Credentials>();  // no role
  SKIPPR_ASSIGN_OR_RETURN(internal::HttpResponse answer,
                          PlainRequest("GET", roles_url + role, headers, kMetadataTimeout));
  return FromMetadataJson(answer.body, fmt::format("the instance role {}", role));
}

bool IsFresh(const Credentials& credentials) {
  return !credentials.expires_at || Clock::now() + kRenewBefore < *credentials.expires_at;
}

}  // namespace

CredentialChain::CredentialChain(const Environment& environment, std::string region)
    : environment_(environment), region_(std::move(region)) {}

Result<Credentials> CredentialChain::Current() {
  if (cached_ && IsFresh(*cached_)) return *cached_;
  SKIPPR_ASSIGN_OR_RETURN(Credentials credentials, Resolve());
  cached_ = credentials;
  return credentials;
}

Result<Credentials> CredentialChain::Resolve() {
  const std::function<Provided()> providers[] = {
      [&] { return FromEnvironment(environment_); },
      [&] { return FromSharedFile(environment_); },
      [&] { return FromWebIdentity(environment_, region_); },
      [&] { return FromContainer(environment_); },
      [&] { return FromInstanceMetadata(environment_); },
  };
  for (const auto& provider : providers) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<Credentials> found, provider());
    if (found) return std::move(*found);
  }
  return Status::NotFound(
      "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a "
      "profile in ~/.aws/credentials, or run with an IAM role (web identity, container or "
      "instance metadata)");
}

}  // namespace skippr::aws
