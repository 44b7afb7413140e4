// stoker/storage_options.h — how a loader reaches remote storage (HTTP(S),
// S3): where the store is, whose credentials sign, and how long a request may
// keep retrying before the run fails.
//
// Each loader carries its own (LoaderOptions::storage), filled from the
// environment when the loader is made (StorageOptionsFromEnvironment) and
// overridden by keyword, so two loaders of one process can read two stores.
//   STOKER_S3_ENDPOINT, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL: an
//     S3-compatible endpoint, addressed path-style
//   AWS_PROFILE, AWS_REGION / AWS_DEFAULT_REGION: profile and region (io/aws_credentials.h)
//   STOKER_IO_RETRY_DEADLINE_S (120)  how long one request keeps retrying
//   STOKER_IO_ATTEMPTS (0)         a cap on tries per request (0: the deadline alone)
//   STOKER_IO_TIMEOUT_MS (30000)   one attempt's limit (connect + transfer)
//   STOKER_IO_STALL_MS (10000)     an attempt that receives no byte this long is retried
//   STOKER_IO_BACKOFF_MS (100)     first retry delay; doubles, jittered, capped
//   STOKER_IO_BACKOFF_MAX_MS (5000)
//   STOKER_CACHE_DIR, STOKER_CACHE_BYTES (64 GiB): the local cache of remote
//     objects (io/cache_reader.h); no directory, no cache.
//   HF_ENDPOINT (https://huggingface.co), HF_TOKEN (else the token file
//     huggingface_hub writes: HF_TOKEN_PATH, $HF_HOME/token,
//     ~/.cache/huggingface/token): where hf:// URLs go (io/hf.h) and the
//     bearer token sent to that host only.
// Thread-safety: a value type.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace stoker {

struct StorageOptions {
  std::string s3_endpoint;  // "" : AWS, virtual-hosted style
  std::string profile;      // "" : AWS_PROFILE, else "default"
  std::string region;       // "" : AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1
  // Transient faults (5xx, 429, resets, timeouts, stalls, a name that stops
  // resolving) are retried with backoff until this deadline per request, so
  // an outage shorter than it costs time, not the run. Permanent answers
  // (403, 404, 412, a changed object) fail at once.
  int retry_deadline_ms = 120000;
  int attempts = 0;         // >0: also stop after this many tries
  int timeout_ms = 30000;   // one attempt
  int stall_ms = 10000;     // one attempt with no byte received for this long
  int backoff_ms = 100;
  int backoff_max_ms = 5000;
  std::string cache_dir;    // "" : no cache
  uint64_t cache_bytes = 64ull << 30;
  // Headers sent with every request for an http(s):// or hf:// object, to
  // that URL's own scheme, host and port only: never on to a host a redirect
  // names (io/http_reader.h). S3 requests are signed instead.
  std::map<std::string, std::string> http_headers;
  std::string hf_endpoint = "https://huggingface.co";
  std::string hf_token;  // "" : hf:// requests carry no Authorization
};

// The environment's settings now (read at each call: a loader made after
// os.environ changed sees the change).
StorageOptions StorageOptionsFromEnvironment();

}  // namespace stoker
