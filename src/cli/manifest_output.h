// cli/manifest_output.h — where `stoker index` and `stoker pack` write the
// dataset manifest (formats/dataset_manifest.h), and the flags that move it
// (--manifest PATH) or leave it out (--no-manifest).
//
// By default it goes beside the shards as stoker-manifest.json when they
// share one folder (the caller says which, or that there is none), and is
// the folder's: an existing one's entries for other shards still there (see
// ManifestPlace::by_sidecar) are kept, so
// indexing shards one at a time, or again, leaves a manifest of them all,
// in natural name order. Entries of shards that are gone are dropped, and so
// are those of `owned_prefix` ("<prefix>-": pack's earlier runs of the same
// prefix) not written now. A kept entry under another key rule leaves the
// manifest as it was, with a warning. An explicit --manifest lists exactly
// this run's shards.
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

struct ManifestPlace {
  std::string default_path;  // empty: there is none (the shards span folders), because of `why_none`
  std::string why_none;
  std::string owned_prefix;  // see above: its "<prefix>-<digits>.tar" shards; empty: none
  // URL shards indexed into --out-dir are listed by name there: an entry is
  // still there while its sidecar is, rather than its shard.
  bool by_sidecar = false;
};

// Writes `manifest` at flags.path, else at place.default_path (merged, see
// above); with neither, writes nothing and, unless quiet, says why.
// `command` names the subcommand in messages.
Status WriteManifestOutput(const DatasetManifest& manifest, const ManifestFlags& flags, const ManifestPlace& place,
                           const char* command, bool quiet);

}  // namespace stoker::cli
