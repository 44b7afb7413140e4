// cli/manifest_output.h — where `stoker index` and `stoker pack` write the
// dataset manifest (formats/dataset_manifest.h), and the flags that move it
// (--manifest PATH) or leave it out (--no-manifest).
//
// By default it goes beside the shards as stoker-manifest.json when they
// share one folder (the caller says which, or that there is none). It lists
// exactly the shards of this run, so a default manifest that lists other
// shards still present (another prefix packed into the same folder, or one
// shard re-indexed alone) is not replaced: a warning says so and what to pass.
// An explicit --manifest is always written.
// Thread-safety: single-threaded (the CLI's main thread).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "formats/dataset_manifest.h"
#include "stoker/status.h"

namespace stoker::cli {

struct ManifestFlags {
  std::string path;   // --manifest: empty for the default place
  bool skip = false;  // --no-manifest
};
void AddManifestFlags(CLI::App* cmd, ManifestFlags* flags);

// Writes `manifest` at flags.path, else at default_path; with neither (the
// shards span folders), writes nothing and, unless quiet, says why
// (`no_default`). `command` names the subcommand in messages.
Status WriteManifestOutput(const DatasetManifest& manifest, const ManifestFlags& flags,
                           const std::string& default_path, const std::string& no_default, const char* command,
                           bool quiet);

}  // namespace stoker::cli
