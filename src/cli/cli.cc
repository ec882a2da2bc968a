#include "memwall/cli/cli.h"

#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "commands.h"
#include "memwall/alloc/error.h"
#include "memwall/base/error.h"
#include "memwall/base/interrupt_cleanup.h"
#include "memwall/report/terminal_text.h"
#include "memwall/runtime/nvme_engine.h"
#include "memwall/runtime/probes.h"

namespace memwall::cli {
namespace {

bool is_verb(CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return true;
  }
  return false;
}

// `text` on one line: a message that holds line breaks (a library's, or
// the system's) has them replaced by "; ", and none at its end.
std::string one_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  std::string out;
  for (const char c : text) {
    if (c == '\n') {
      out += "; ";
    } else if (c != '\r') {
      out += c;
    }
  }
  return out;
}

std::string error_line(std::string_view text) {
  return fmt::format("memwall: error: {}\n", one_line(text));
}

}  // namespace

ErrorExit error_exit(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    ErrorExit exit{error_line(e.what()), 2};
    for (const std::string& note : e.notes()) {
      exit.text += fmt::format("memwall: note: {}\n", one_line(note));
    }
    return exit;
  } catch (const std::bad_alloc&) {
    return {"memwall: error: out of memory (input too large)\n", 2};
  } catch (const runtime::ProbeError& e) {
    // A probe that cannot measure (memwall/runtime/probes.h): the device
    // cannot hold its bytes, fio cannot run; said as bad input was.
    return {error_line(e.what()), 2};
  } catch (const alloc::Error& e) {
    // The allocator refused memwall's own use of it, or its backend (host
    // mappings, the CUDA driver) failed: the run failed, not the input.
    return {error_line(e.what()), 1};
  } catch (const runtime::NvmeError& e) {
    // The swap files could not be made, written or read back (I/O errors,
    // io_uring, checksums): the run failed, not the input.
    return {error_line(e.what()), 1};
  } catch (const std::exception& e) {
    // Not a judgement on the input: a memwall bug, reported in one line.
    return {error_line(fmt::format("internal error: {}", e.what())), 1};
  } catch (...) {
    return {error_line("internal error: an exception of unknown type"), 1};
  }
}

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
  } catch (...) {
    const ErrorExit exit = error_exit(std::current_exception());
    std::cerr << exit.text;
    return exit.code;
  }
}

}  // namespace memwall::cli
