// cli/report.cc — `stoker report` in the native command's help.
//
// The report (HTML drawn from a run's JSON lines) is Python: the `stoker`
// entry point that pip installs (python/stoker/_cli.py) runs it before it ever
// reaches this binary. The subcommand is registered here so that `stoker
// --help` lists it; run on this binary directly, it says where it lives
// instead of CLI11's "A subcommand is required".
#include <memory>
#include <string>

#include "cli/commands.h"

namespace stoker::cli {

void RegisterReport(CLI::App& app, Status* status) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write an HTML report of a run's JSON lines (runs in Python: the pip-installed `stoker`, "
      "or `python -m stoker.report`)");
  // The Python command's arguments (python/stoker/report.py), so that they parse here too.
  auto jsonl = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("JSONL", *jsonl, "the run's JSON lines (Loader(..., jsonl=PATH))")->required();
  cmd->add_option("-o,--output", *output, "the HTML page to write (default: RUN.html)");
  cmd->callback([status] {
    *status = FailedPrecondition(
        "report is drawn in Python, not by this native binary: run it through the pip-installed "
        "`stoker report RUN.jsonl [-o RUN.html]` or `python -m stoker.report RUN.jsonl`");
  });
}

}  // namespace stoker::cli
