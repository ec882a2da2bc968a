#include "memwall/cli/cli.h"

#include <exception>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "memwall/graph/error.h"

namespace memwall::cli {

int run(int argc, char** argv) {
  CLI::App app{"memwall: plan, simulate and run training that does not fit in accelerator memory"};
  app.require_subcommand(1);
  Action action;
  add_inspect(app, action);
  add_models(app, action);
  add_gpus(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
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
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "memwall: error: out of memory (input too large)\n";
    return 2;
  }
}

}  // namespace memwall::cli
