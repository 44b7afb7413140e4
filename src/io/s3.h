// io/s3.h — S3 addressing and credentials: "s3://bucket/key" becomes an
// HttpTarget signed by libcurl's built-in AWS SigV4 (CURLOPT_AWS_SIGV4
// "aws:amz:<region>:s3").
//
// Endpoint: IoOptions::s3_endpoint (STOKER_S3_ENDPOINT, AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL) addressed path-style (<endpoint>/<bucket>/<key>, as
// S3-compatible servers want); without one, AWS virtual-hosted style
// (https://<bucket>.s3.<region>.amazonaws.com/<key>).
// Credentials: the AWS chain of io/aws_credentials.h (environment, profile
// with keys, role or credential_process, web identity, container, EC2
// instance role) for IoOptions::profile and ::region, shared by every target
// and refreshed ahead of expiry; none: unsigned requests (public buckets).
// Region: IoOptions::region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
// region in AWS_CONFIG_FILE (~/.aws/config), else us-east-1.
// Thread-safety: free functions; they read the environment and files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/http_reader.h"

namespace stoker {

struct S3Url {
  std::string bucket;
  std::string key;
};
Result<S3Url> ParseS3Url(const std::string& url);

// Percent-encodes all but unreserved characters (and '/' when keep_slash).
std::string UriEscape(const std::string& s, bool keep_slash);

// The [section] of an INI-style AWS file: key -> value.
std::map<std::string, std::string> ReadAwsIniSection(const std::string& text, const std::string& section);

Result<HttpTarget> S3Target(const std::string& s3_url, const IoOptions& options);

// Keys of the bucket under prefix (ListObjectsV2, every page), sorted.
Result<std::vector<std::string>> S3ListKeys(const std::string& bucket, const std::string& prefix,
                                            const IoOptions& options);

}  // namespace stoker
