// io/hf.h — the Hugging Face Hub as a store, addressed as huggingface_hub's
// HfFileSystem spells it: "hf://datasets/ORG/NAME/PATH" (a dataset),
// "hf://spaces/ORG/NAME/PATH", "hf://ORG/NAME/PATH" (a model), with a
// revision as "NAME@REV" (a branch, tag or commit; "main" when left out).
//
// A file is read through the Hub's resolve URL,
// {endpoint}/datasets/ORG/NAME/resolve/REV/PATH, which answers with a
// redirect to its CDN (io/http_reader.h follows it; the token stays behind).
// The endpoint is IoOptions::hf_endpoint (HF_ENDPOINT, as huggingface_hub
// reads it); IoOptions::hf_token (HF_TOKEN, else huggingface_hub's token
// file) goes as "Authorization: Bearer" to the endpoint's host only.
// A glob is matched against the Hub's tree API ({endpoint}/api/datasets/
// ORG/NAME/tree/REV/DIR?recursive=true, every page of it): one listing of the
// directory above the first wildcard.
// Thread-safety: free functions; HfTokenFromEnvironment reads the environment and a file.
#pragma once

#include <string>
#include <vector>

#include "io/http_reader.h"

namespace stoker {

struct HfUrl {
  std::string kind;      // "datasets", "spaces", or "models"
  std::string repo;      // "ORG/NAME"
  std::string revision;  // "main" unless given
  std::string path;      // inside the repository ("" : its root)
  std::string prefix;    // the URL up to the path: "hf://datasets/ORG/NAME@REV/"
};
Result<HfUrl> ParseHfUrl(const std::string& url);

// HF_TOKEN, else the file huggingface_hub's login writes ("" : none).
std::string HfTokenFromEnvironment();

// The resolve URL of an hf:// file, with the token and the loader's own
// headers for the Hub's host.
Result<HttpTarget> HfTarget(const std::string& hf_url, const IoOptions& options);

// The files of the repository under `dir` (recursively), as repository paths.
Result<std::vector<std::string>> HfListFiles(const HfUrl& repo, const std::string& dir, const IoOptions& options);

}  // namespace stoker
