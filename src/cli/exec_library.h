// Loading the executor (libmemwall_exec.so, src/exec) at run time: only
// `memwall run` needs libtorch, so only it loads the library.
#pragma once
#include <string>

#include "memwall/exec/executor.h"

namespace memwall::cli {

// The running memwall executable's path (/proc/self/exe); throws Error
// naming why it cannot be read.
std::string memwall_executable();

// The library's run function: $MEMWALL_EXEC_LIBRARY when set, else
// libmemwall_exec.so beside the memwall binary. Throws Error (exit 2) saying
// why it is missing (built without libtorch, a sanitizer build) or broken.
exec::RunFunction load_executor();

}  // namespace memwall::cli
