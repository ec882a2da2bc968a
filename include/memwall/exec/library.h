// Running a plan with the executor from outside it: libmemwall_exec.so
// (src/exec, the one library built against libtorch) loaded at run time,
// so that only a caller that runs a plan loads libtorch (Note [Executor
// symbols] in src/exec/api/library.cc).
//
//   exec::RunOptions options;  options.steps = 3;  options.check_eager = true;
//   exec::RunResult result;  std::string error;
//   exec::Status s = exec::run_plan(graph, plan, "values/", options, result, error);
//   // or, the step's inputs in memory (memwall/exec/values.h):
//   exec::Status s = exec::run_plan(graph, plan, step_values, options, result, error);
#pragma once
#include <string>

#include "memwall/exec/executor.h"
#include "memwall/exec/values.h"
#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall::exec {

// The running executable's path (/proc/self/exe); throws Error naming why
// it cannot be read.
std::string memwall_executable();

// dlopen of a library of libtorch's (the executor, its CUDA part) as
// Note [Executor symbols] says: RTLD_NOW | RTLD_LOCAL, with RTLD_DEEPBIND
// but under ASan. Returns the handle, or nullptr (dlerror() says why).
void* open_torch_library(const std::string& path);

// The library's entry points: $MEMWALL_EXEC_LIBRARY when set, else
// libmemwall_exec.so beside the running executable, loaded once. Throws
// Error (exit 2) saying why it is missing (built without libtorch, a
// sanitizer build) or broken.
RunFunction load_executor();
RunValuesFunction load_executor_values();

// Runs `plan` on `graph` from the values in directory `values` (what the
// tracer's --values wrote) or in memory. Returns the status; on failure
// `error` is one line. Throws Error when the library cannot be loaded.
Status run_plan(const Graph& graph, const Plan& plan, const std::string& values,
                const RunOptions& options, RunResult& result, std::string& error);
Status run_plan(const Graph& graph, const Plan& plan, const StepValues& values,
                const RunOptions& options, RunResult& result, std::string& error);

}  // namespace memwall::exec
