// io/aws_credentials.h — AWS credentials the way the SDKs find them, kept
// fresh while a loader runs.
//
// The chain, in botocore's order; the first source that yields keys wins:
//   1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
//      (skipped when AwsSettings::profile names a profile, as botocore skips
//      it for a profile given to its session)
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
//      http://169.254.169.254; AWS_EC2_METADATA_DISABLED=true skips it). A
//      probe: nothing there, no role, or an odd answer (a firewall answering
//      for the address) is "no source", as in botocore, the last with a line
//      on stderr.
// None: requests go unsigned (public buckets).
// STS is reached at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
// https://sts.<region>.amazonaws.com.
//
// Temporary credentials (an expiry) are refreshed ahead of it: once less than
// the refresh margin is left, one caller fetches new ones while the others go
// on with the current, still valid ones; only when none are valid does Get()
// wait. A refresh that fails while the current ones are still valid keeps
// them (one line on stderr) and is tried again a little later. A request the
// store refuses for an expired token calls Invalidate and is signed again
// with fresh ones.
// A source that is configured but fails (STS refuses, a token file is
// missing, credential_process exits non-zero) is an error naming the source,
// the profile and the cause, never a silent unsigned request. Only the
// instance metadata probe may come back empty (nothing answers: not on EC2);
// that "no source" is remembered, so the chain probes it once per settings.
// Thread-safety: a provider's methods from any thread at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
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

// How long before expiry a refresh starts: botocore's margins (15 min
// advisory: one caller refreshes, the others go on; 10 min mandatory: callers
// wait for new ones), scaled down for short-lived credentials to a quarter
// and an eighth of their lifetime, so 60-s credentials are fetched every
// 45 s, not on every request.
struct RefreshMargins {
  std::chrono::system_clock::duration advisory, mandatory;
};
RefreshMargins MarginsFor(std::chrono::system_clock::duration lifetime);

// The provider that each source of the chain is wrapped in: fetch() gets new
// credentials from the source (an error names it); `first`, when given, is
// used until its margin. clock: the wall clock (tests inject theirs).
using CredentialFetch = std::function<Result<AwsCredentials>()>;
using WallClock = std::function<std::chrono::system_clock::time_point()>;
std::shared_ptr<CredentialProvider> NewRefreshingProvider(CredentialFetch fetch, WallClock clock = nullptr,
                                                          std::optional<AwsCredentials> first = std::nullopt);

// The process's provider for these settings (one per profile and region, so
// every reader of a store shares one cache; the AWS_* variables the chain
// reads are part of the key, so a changed environment resolves anew);
// nullptr when the chain finds no source (unsigned requests). The first call
// fetches once, so a configured source that fails is reported here.
Result<std::shared_ptr<CredentialProvider>> SharedCredentialChain(const AwsSettings& settings);

// The region: settings.region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
// region in the config file, else us-east-1.
std::string ResolveAwsRegion(const AwsSettings& settings);

}  // namespace stoker
