// cli/io_flags.cc — the storage options every subcommand shares: where S3
// lives, the local cache of remote objects, the retry budget. They override
// the STOKER_* / AWS_* environment (io/reader.h) for this process, and may
// stand before or after the subcommand (`stoker --cache-dir D inspect URL`,
// `stoker inspect URL --cache-dir D`).
// Thread-safety: parse-time only, before any command runs.
#include <memory>
#include <string>

#include "cli/commands.h"
#include "io/reader.h"

namespace stoker::cli {

void RegisterIoFlags(CLI::App& app) {
  auto o = std::make_shared<IoOptions>(DefaultIoOptions());
  auto set = [o](auto field) {
    return [o, field](const auto& v) {
      o.get()->*field = v;
      SetDefaultIoOptions(*o);
    };
  };
  app.add_option_function<std::string>("--s3-endpoint", set(&IoOptions::s3_endpoint),
                                       "an S3-compatible endpoint (path-style), e.g. http://127.0.0.1:9000")
      ->group("Storage");
  app.add_option_function<std::string>("--cache-dir", set(&IoOptions::cache_dir),
                                       "cache remote objects here (bounded by --cache-bytes, LRU)")
      ->group("Storage");
  app.add_option_function<uint64_t>("--cache-bytes", set(&IoOptions::cache_bytes), "the cache's byte budget")
      ->group("Storage");
  app.add_option_function<std::string>("--profile", set(&IoOptions::profile), "AWS profile (default: AWS_PROFILE)")
      ->group("Storage");
  app.add_option_function<std::string>("--region", set(&IoOptions::region), "AWS region (default: the environment's)")
      ->group("Storage");
  app.add_option_function<double>(
         "--retry-deadline-s",
         [o](double s) {
           o->retry_deadline_ms = static_cast<int>(s * 1000);
           SetDefaultIoOptions(*o);
         },
         "how long one remote request keeps retrying transient faults (default 120)")
      ->group("Storage");
  app.add_option_function<int>("--io-attempts", set(&IoOptions::attempts), "cap on tries per remote request (0: none)")
      ->group("Storage");
  app.add_option_function<int>("--io-timeout-ms", set(&IoOptions::timeout_ms), "limit of one attempt")
      ->group("Storage");
  app.fallthrough();  // subcommands pass these up, so they may follow the subcommand too
}

}  // namespace stoker::cli
