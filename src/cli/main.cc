// cli/main.cc — entry point of `stoker`: registers the subcommands, parses,
// and maps the command's Status to stderr and the exit code.
//
// Exit codes: 0 success, 1 the command failed (message on stderr), CLI11's own
// codes for usage errors. No exception leaves main: CLI11 parse errors go
// through app.exit(), anything else unexpected is reported as an internal error.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "io/url.h"

int main(int argc, char** argv) {
  // Named, so usage lines read "stoker ..." and not argv[0]'s path into site-packages.
  CLI::App app{"stoker: pack, inspect and benchmark sharded datasets for deep learning", "stoker"};
  app.require_subcommand(1);
  stoker::Status status;
  stoker::cli::RegisterIoFlags(app);
  stoker::cli::RegisterSynth(app, &status);
  stoker::cli::RegisterPack(app, &status);
  stoker::cli::RegisterIndex(app, &status);
  stoker::cli::RegisterInspect(app, &status);
  stoker::cli::RegisterBench(app, &status);
  stoker::cli::RegisterDoctor(app, &status);
  stoker::cli::RegisterPackTokens(app, &status);
  stoker::cli::RegisterReport(app, &status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stoker: internal error: %s\n", e.what());
    return 1;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "stoker %s: %s\n", app.get_subcommands().front()->get_name().c_str(),
                 stoker::RedactUrls(status.ToString()).c_str());  // a query may hold a credential
    return 1;
  }
  return 0;
}
