// cli/commands.h — the subcommands of the `stoker` command line.
//
// Each subcommand lives in its own file and registers itself on the root app.
// Its callback runs the command and stores the outcome in *status, so that
// main() alone turns a failed Status into a message and exit code 1: no
// subcommand prints its own fatal error or calls exit().
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/manifest_output.h"
#include "stoker/status.h"

namespace stoker::cli {

// pack, callable on its own because `synth --layout shards` is synth loose + pack.
struct PackOptions {
  std::string src_dir;
  std::string out_prefix;
  uint64_t shard_bytes = 256'000'000;
  std::string layout = "auto";            // auto | sa1b | classes
  std::optional<uint64_t> shuffle_seed;   // none: natural name order
  bool rename_wds = false;                // sa1b: "{id}_features.npz" -> "{id}.features.npz"
  bool quiet = false;
  ManifestFlags manifest;                 // default: stoker-manifest.json beside the shards
};
Status RunPack(const PackOptions& options);

// Storage flags (--s3-endpoint, --cache-dir, ...) on the root app; call before the subcommands.
void RegisterIoFlags(CLI::App& app);
void RegisterSynth(CLI::App& app, Status* status);
void RegisterPack(CLI::App& app, Status* status);
void RegisterIndex(CLI::App& app, Status* status);
void RegisterInspect(CLI::App& app, Status* status);
void RegisterBench(CLI::App& app, Status* status);
void RegisterDoctor(CLI::App& app, Status* status);
// `stoker doctor URL...`: latency, bandwidth per reads in flight, the io_depth to use.
Status RunRemoteDoctor(const std::vector<std::string>& sources, bool json, double run_seconds);
void RegisterPackTokens(CLI::App& app, Status* status);
// `stoker report`: listed in the help; the Python entry point runs it (python/stoker/_cli.py).
void RegisterReport(CLI::App& app, Status* status);
// `stoker inspect X.idx`: documents, tokens, dtype and length stats.
Status InspectTokens(const std::string& path, bool json);

}  // namespace stoker::cli
