// Loading the executor (memwall/exec/library.h).
#include "memwall/exec/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "memwall/base/error.h"
#include "memwall/exec/session.h"

namespace memwall::exec {

std::string memwall_executable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail("run: cannot find the memwall executable (/proc/self/exe): {}", ec.message());
  return self.string();
}

void* open_torch_library(const std::string& path) {
  // Note [Executor symbols]: RTLD_LOCAL keeps libtorch's symbols with the
  // library, and RTLD_DEEPBIND makes the library and libtorch look up their
  // own symbols first. Without it libtorch's sgemm_ calls bound to the
  // reference BLAS that memwall already has loaded (CBC, for Checkmate,
  // needs libblas.so.3): ten times slower than torch's own, and with other
  // rounding, so no run matched eager PyTorch bit for bit.
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer runtime refuses RTLD_DEEPBIND (google/sanitizers#611): the
  // runs there differ from eager in their last bits (Note [The executor under
  // sanitizers] in tests/exec/run_checks.h).
  constexpr int kDeepBind = 0;
#else
  constexpr int kDeepBind = RTLD_DEEPBIND;
#endif
  return ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kDeepBind);
}

namespace {

// The library's handle and path, opened once.
struct Library {
  void* handle = nullptr;
  std::string path;
};

const Library& executor_library() {
  static Library loaded;
  if (loaded.handle != nullptr) return loaded;
  std::string path;
  if (const char* chosen = std::getenv("MEMWALL_EXEC_LIBRARY"); chosen != nullptr && *chosen) {
    path = chosen;
  } else {
    path = std::filesystem::path(memwall_executable()).parent_path() / "libmemwall_exec.so";
    if (!std::filesystem::exists(path)) {
      fail(
          "run: this memwall has no executor ({} is missing): it is built only against "
          "memwall's Python environment with torch (scripts/install-deps.sh --torch, then "
          "rebuild), and not in the ThreadSanitizer or fuzz builds",
          path);
    }
  }
  void* handle = open_torch_library(path);
  if (handle == nullptr) fail("run: cannot load the executor {}: {}", path, ::dlerror());
  loaded = {handle, path};
  return loaded;
}

void* symbol(const char* name) {
  const Library& library = executor_library();
  void* found = ::dlsym(library.handle, name);
  if (found == nullptr) fail("run: {} has no {}: a library of another version", library.path, name);
  return found;
}

}  // namespace

RunFunction load_executor() {
  static RunFunction loaded = nullptr;
  if (loaded == nullptr) loaded = reinterpret_cast<RunFunction>(symbol(kRunSymbol));
  return loaded;
}

RunValuesFunction load_executor_values() {
  static RunValuesFunction loaded = nullptr;
  if (loaded == nullptr) loaded = reinterpret_cast<RunValuesFunction>(symbol(kRunValuesSymbol));
  return loaded;
}

Status open_session(const Graph& graph, const Plan& plan, const StepValues& values,
                    const RunOptions& options, std::unique_ptr<Session>& session,
                    std::string& error) {
  static OpenSessionFunction loaded = nullptr;
  if (loaded == nullptr) loaded = reinterpret_cast<OpenSessionFunction>(symbol(kOpenSessionSymbol));
  return loaded(graph, plan, values, options, session, error);
}

Status run_plan(const Graph& graph, const Plan& plan, const std::string& values,
                const RunOptions& options, RunResult& result, std::string& error) {
  return load_executor()(graph, plan, values, options, result, error);
}

Status run_plan(const Graph& graph, const Plan& plan, const StepValues& values,
                const RunOptions& options, RunResult& result, std::string& error) {
  return load_executor_values()(graph, plan, values, options, result, error);
}

}  // namespace memwall::exec
