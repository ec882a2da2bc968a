// The `memwall` command.
#pragma once

#include <exception>
#include <string>

namespace memwall::cli {

// Runs the command line; returns the process exit code (0 ok, 2 bad input,
// 1 a run that failed).
int run(int argc, char** argv);

// What the command prints on stderr for the exception that ended a verb,
// and its exit code. The error is one line (`memwall: error: ...`), then
// memwall::Error's notes, each line ending in '\n'. Exit code 2 for bad
// input: memwall::Error, and memory running out on an input too large; 1
// for a run that failed: the allocator's and the NVMe engine's own errors
// (alloc::Error, runtime::NvmeError), which a verb converts into
// memwall::Error where they judge the user's input; 1 also for anything
// else, a memwall bug, said as "internal error".
struct ErrorExit {
  std::string text;
  int code = 1;
};
ErrorExit error_exit(std::exception_ptr error);

}  // namespace memwall::cli
