// io/aws_credentials.h — AWS credentials the way the SDKs find them, kept
// fresh while a loader runs.
//
// The chain, in botocore's order; the first source that yields keys wins:
//   1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
//   2. the profile (AwsSettings::profile, else AWS_PROFILE, else "default") in
//      AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and AWS_CONFIG_FILE
//      (~/.aws/config): static keys; role_arn with source_profile (STS
//      AssumeRole signed with the source's keys) or with
//      credential_source/web_identity_token_file; credential_process (its JSON
//      on stdout)
//   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
//      (+ AWS_ROLE_SESSION_NAME) -> STS AssumeRoleWithWebIdentity
//   4. container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (http://169.254.170.2)
//      or _FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)
//   5. EC2 instance metadata, IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT, else
//      http://169.254.169.254; AWS_EC2_METADATA_DISABLED=true skips it)
// None: requests go unsigned (public buckets).
// STS is reached at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
// https://sts.<region>.amazonaws.com.
//
// Temporary credentials (an expiry) are refreshed ahead of it: once less than
// the refresh margin is left, one caller fetches new ones while the others go
// on with the current, still valid ones; only when none are valid does Get()
// wait. A request the store refuses for an expired token calls Invalidate and
// is signed again with fresh ones.
// Thread-safety: a provider's methods from any thread at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "stoker/status.h"

namespace stoker {

struct AwsCredentials {
  std::string key, secret, token;  // token: "" for long-term keys
  // When they stop working; max() for keys that do not expire.
  std::chrono::system_clock::time_point expires = std::chrono::system_clock::time_point::max();
  std::string source;  // where they came from, for messages: "environment", "web identity (role ...)"
};

// What a loader chooses; "" takes the environment's value.
struct AwsSettings {
  std::string profile;
  std::string region;
};

class CredentialProvider {
 public:
  virtual ~CredentialProvider() = default;
  // Current credentials, refreshed ahead of expiry. An error names the source
  // that failed and why (an STS refusal, an unreadable token file).
  virtual Result<AwsCredentials> Get() = 0;
  // A request signed with `seen` was refused as expired: the next Get()
  // fetches anew (unless another thread already did).
  virtual void Invalidate(const AwsCredentials& seen) = 0;
  // How many times credentials were fetched from their source (tests, report).
  virtual int64_t fetches() const = 0;
};

// The process's provider for these settings (one per profile and region, so
// every reader of a store shares one cache); nullptr when the chain finds no
// source (unsigned requests).
Result<std::shared_ptr<CredentialProvider>> SharedCredentialChain(const AwsSettings& settings);

// The region: settings.region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
// region in the config file, else us-east-1.
std::string ResolveAwsRegion(const AwsSettings& settings);

}  // namespace stoker
