// io/aws_sources.h — the places AWS credentials are fetched from, one call
// each, and the parsers of their answers. io/aws_credentials.cc decides which
// source applies (the chain) and keeps what they return fresh; nothing here
// caches or orders.
//
//   STS AssumeRoleWithWebIdentity  unsigned form POST, XML answer
//   STS AssumeRole                 SigV4-signed ("aws:amz:<region>:sts") POST
//   container endpoint             GET <uri> with Authorization: <token>, JSON
//   EC2 instance metadata          IMDSv2 token PUT, then role name and JSON
//                                  (IMDSv1 when the token PUT is refused)
//   credential_process             /bin/sh -c <command>, JSON on stdout
//
// Timeouts follow botocore: metadata 1 s connect / 2 s total, STS a few
// seconds; connection errors, timeouts and 5xx are retried a few times.
// Errors name the source and the cause (STS's Code and Message, the
// command's exit status and stderr).
// Thread-safety: free functions without shared state; any thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "io/aws_credentials.h"

namespace stoker::aws {

// "2026-11-25T13:00:00Z", with optional fractional seconds and a "+hh:mm"
// offset instead of "Z".
Result<std::chrono::system_clock::time_point> ParseIso8601(std::string_view text);

// An STS answer (AssumeRole, AssumeRoleWithWebIdentity): its Credentials, or
// the ErrorResponse's Code and Message as an error.
Result<AwsCredentials> ParseStsResponse(const std::string& xml);

// The JSON of the container endpoint and of EC2 metadata (AccessKeyId,
// SecretAccessKey, Token, Expiration).
Result<AwsCredentials> ParseMetadataJson(const std::string& json);

// credential_process's JSON: Version 1, AccessKeyId, SecretAccessKey,
// optional SessionToken and Expiration (none: the keys do not expire).
Result<AwsCredentials> ParseProcessJson(const std::string& json);

// STS at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
// https://sts.<region>.amazonaws.com.
std::string StsEndpoint(const std::string& region);

struct WebIdentityRole {
  std::string role_arn, session_name, token_file;
  int duration_s = 0;  // 0: STS's default
};
// Reads the token file anew on every call (it is rotated by the orchestrator).
Result<AwsCredentials> AssumeRoleWithWebIdentity(const std::string& sts_endpoint, const WebIdentityRole& role);

struct AssumedRole {
  std::string role_arn, session_name, external_id;
  int duration_s = 0;
};
Result<AwsCredentials> AssumeRole(const std::string& sts_endpoint, const std::string& region, const AssumedRole& role,
                                  const AwsCredentials& source);

// token_file (read on every call) wins over token; both "": no header.
Result<AwsCredentials> FetchContainerCredentials(const std::string& uri, const std::string& token,
                                                 const std::string& token_file);

// EC2 instance metadata at endpoint (no trailing slash). NotFound when
// nothing answers there or the instance has no role: the chain's "no source";
// any other failure is IoError. attempts: tries per request.
Result<AwsCredentials> FetchInstanceCredentials(const std::string& endpoint, int attempts);

Result<AwsCredentials> RunCredentialProcess(const std::string& command);

}  // namespace stoker::aws
