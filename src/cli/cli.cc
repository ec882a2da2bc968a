#include "memwall/cli/cli.h"

#include <exception>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "memwall/graph/error.h"
#include "memwall/graph/interrupt_cleanup.h"
#include "memwall/runtime/probes.h"
#include "terminal_text.h"

namespace memwall::cli {
namespace {

bool is_verb(CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return true;
  }
  return false;
}

}  // namespace

int run(int argc, char** argv) {
  install_interrupt_cleanup();  // an interrupted command leaves no temporaries
  escape_control_characters(std::cout);
  escape_control_characters(std::cerr);
  CLI::App app{"memwall: plan, simulate and run training that does not fit in accelerator memory"};
  app.set_version_flag("--version", "memwall " MEMWALL_VERSION);
  app.require_subcommand(1);
  Action action;
  add_inspect(app, action);
  add_plan(app, action);
  add_simulate(app, action);
  add_layout(app, action);
  add_bench(app, action);
  add_trace(app, action);
  add_calibrate(app, action);
  add_run(app, action);
  add_run_rank(app, action);
  add_alloc_replay(app, action);
  add_models(app, action);
  add_gpus(app, action);
  // CLI11 reports an unknown verb as "A subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-' && !is_verb(app, argv[1])) {
    std::string known;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    std::cerr << fmt::format("memwall: error: unknown verb '{}' (known: {})\n", argv[1], known);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit code 2, like every other bad input.
    std::cerr << fmt::format("memwall: error: {}\n", e.what());
    return 2;
  }
  try {
    return action();
  } catch (const Error& e) {
    std::cerr << fmt::format("memwall: error: {}\n", e.what());
    for (const std::string& note : e.notes()) std::cerr << fmt::format("memwall: note: {}\n", note);
    return 2;
  } catch (const runtime::ProbeError& e) {
    // A probe that cannot measure (memwall/runtime/probes.h), as bad input.
    std::cerr << fmt::format("memwall: error: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "memwall: error: out of memory (input too large)\n";
    return 2;
  } catch (const std::exception& e) {
    // Not a judgement on the input: a memwall bug, reported in one line.
    std::cerr << fmt::format("memwall: error: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace memwall::cli
