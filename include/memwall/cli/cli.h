// The `memwall` command.
#pragma once

namespace memwall::cli {

// Runs the command line; returns the process exit code (0 ok, 2 bad input).
int run(int argc, char** argv);

}  // namespace memwall::cli
