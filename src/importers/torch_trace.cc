// Runs the embedded PyTorch tracer in a child process and reads its graph.
//
// Note [Tracer process]
// The Python package is written to a fresh private directory (mkdtemp) and
// run as `python3 <dir>/memwall/__main__.py ARGS`, with standard input from
// /dev/null and its standard output and error on pipes that this process
// reads as they come. What the child prints (the user script's own output,
// PyTorch's warnings) is passed on to memwall's standard error as it
// arrives, so a user sees their script's progress and memwall's standard
// output stays its table or JSON; only the tracer's one-line verdict
// "memwall-trace: error: <message>" (exit code 2) is held back, and becomes
// the Error's message. A failing child that printed no verdict (a crash, a
// signal) is described by its last line, or, when it ran a user's script,
// blamed on the script (Note [A script that exits] in python/memwall/cli.py). A deadline bounds the
// whole run: past it the child is killed and the error says so. The directory, and the child, are
// removed on every path out, SIGINT and SIGTERM included (interrupt_cleanup.h). The sweep
// (run_torch_tracer) captures the child's standard output instead of passing it on.
#include "memwall/importers/torch_trace.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/base/interrupt_cleanup.h"
#include "memwall/base/private_dir.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"

namespace memwall::importers {
namespace {

constexpr std::string_view kErrorPrefix = "memwall-trace: error: ";

// The tracer's one-line verdict, if it wrote one.
std::optional<std::string> verdict(const std::string& err) {
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(kErrorPrefix, 0) == 0) return line.substr(kErrorPrefix.size());
  }
  return std::nullopt;
}

// The last non-empty line of stderr.
std::string last_line(const std::string& err) {
  std::string last;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// Note [A script that exits] (python/memwall/cli.py): a tracer that ends
// without its output or its verdict was ended from inside, and a user's
// script is what runs there. `script`: the request's FILE.py:FUNCTION.
[[noreturn]] void script_ended(const std::string& script, int code) {
  fail(
      "trace: {}: the script ended the tracer's process (exit code {}, with no verdict from the "
      "tracer: os._exit does so) before the trace was written: its function must return (model, "
      "batch, loss_fn, optimizer) and the training step must return to the tracer",
      script.substr(0, script.rfind(':')), code);
}

}  // namespace

#ifndef MEMWALL_PYTHON_ENV_KEY
#error "CMakeLists.txt defines MEMWALL_PYTHON_ENV_KEY from python/requirements.txt"
#endif

std::string memwall_env_python() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string cache = xdg != nullptr && *xdg != '\0' ? std::string(xdg)
                            : home != nullptr              ? std::string(home) + "/.cache"
                                                           : std::string("/nonexistent/.cache");
  return cache + "/memwall/venv-" MEMWALL_PYTHON_ENV_KEY "/bin/python";
}

namespace {

// The first executable `name` in $PATH, or `name` itself when there is none.
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

}  // namespace

// Note [Tracer interpreter] in torch_trace.h.
std::string tracer_python(const std::string& chosen) {
  if (!chosen.empty()) return chosen;
  const char* env = std::getenv("MEMWALL_PYTHON");
  if (env != nullptr && *env != '\0') return env;
  const std::string own = memwall_env_python();
  const std::string marker =
      std::filesystem::path(own).parent_path().parent_path() / ".memwall-complete";
  if (access(marker.c_str(), F_OK) == 0 && access(own.c_str(), X_OK) == 0) return own;
  return on_path("python3");
}

namespace {

// Writes `text` to a new file `path` (the private directory's: no other
// process writes there, so no temporary and rename).
void write_new_file(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail("trace: cannot create {}: {}", path, std::strerror(errno));
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      fail("trace: cannot write {}: {}", path, std::strerror(error));
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0) fail("trace: cannot write {}: {}", path, std::strerror(errno));
}

}  // namespace

std::string write_python_package(PrivateDir& dir) {
  std::set<std::string> made;
  for (const PythonFile& f : python_package_files()) {
    const std::string path(f.path);
    // Its directories first, each once: an interrupt removes a directory
    // after the files in it (Note [Interrupt cleanup]).
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      const std::string sub = path.substr(0, slash);
      if (made.insert(sub).second) dir.subdir(sub);
    }
    write_new_file(dir.file(path), f.source);
  }
  return dir.path() + "/memwall/__main__.py";
}

namespace {

// A pipe whose ends close with it.
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("trace: cannot create a pipe: {}", std::strerror(errno));
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    for (const int fd : {read, write}) {
      if (fd >= 0) ::close(fd);
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
};

void pass_on(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;  // memwall's stderr is gone: nothing to pass on to
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// The child's standard error, line by line: every line passed on but the
// tracer's verdict, and all of it kept for verdict() and last_line().
struct ErrorStream {
  std::string all;
  std::string partial;
  void take(std::string_view chunk) {
    all.append(chunk);
    partial.append(chunk);
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      line(std::string_view(partial).substr(start, nl + 1 - start));
    }
    partial.erase(0, start);
  }
  void finish() {
    if (!partial.empty()) line(partial);
    partial.clear();
  }
  static void line(std::string_view text) {
    if (!text.starts_with(kErrorPrefix)) pass_on(text);
  }
};

struct ChildOutput {
  std::string out;  // its standard output, when captured
  std::string err;
};

// Reads both pipes until the child closes them or the deadline passes;
// false on the deadline.
bool drain(int out_fd, int err_fd, bool capture_out, double timeout_s, ChildOutput& got) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  ErrorStream err;
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open = 2;
  char chunk[1 << 14];
  while (open > 0) {
    const auto left = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    const int ready = ::poll(fds, 2, static_cast<int>(std::min(left, 1e9)) + 1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("trace: waiting for the tracer: {}", std::strerror(errno));
    }
    for (pollfd& p : fds) {
      if (p.fd < 0 || p.revents == 0) continue;
      const ssize_t n = ::read(p.fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // end of file, or an error that ends the stream
        p.fd = -1;
        --open;
        continue;
      }
      const std::string_view text(chunk, static_cast<size_t>(n));
      if (p.fd == err_fd) {
        err.take(text);
      } else if (capture_out) {
        got.out.append(text);
      } else {
        pass_on(text);
      }
    }
  }
  err.finish();
  got.err = std::move(err.all);
  return true;
}

// Note [Tracer process]. `user_script`: the script the tracer runs, if
// any, blamed for an end without a verdict (Note [A script that exits]).
ChildOutput run_tracer_in(PrivateDir& dir, const std::vector<std::string>& args, bool capture_out,
                          double timeout_s, const std::string& chosen_python,
                          const std::string& user_script = {}) {
  const std::string python = tracer_python(chosen_python);
  if (access(python.c_str(), X_OK) != 0) {
    fail(
        "trace: no Python interpreter at {} (scripts/install-deps.sh --torch makes memwall's, "
        "with torch from PyPI; or name one with --python or MEMWALL_PYTHON)",
        python);
  }
  if (!(timeout_s > 0) || !std::isfinite(timeout_s)) {
    fail("trace: the time limit must be a positive number of seconds (got {})", timeout_s);
  }
  const std::string script = write_python_package(dir);

  std::vector<std::string> argv_text = {python, script};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  Pipe out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write, STDERR_FILENO);
  // An interrupt between the spawn and the registration would leave the
  // child running.
  const SpawnedChild child = spawn_killed_on_interrupt(python, &actions, argv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (child.error != 0) fail("trace: cannot run {}: {}", python, std::strerror(child.error));
  const pid_t pid = child.pid;
  ::close(out.write);
  ::close(err.write);
  out.write = err.write = -1;

  ChildOutput got;
  bool finished = false;
  try {
    finished = drain(out.read, err.read, capture_out, timeout_s, got);
  } catch (...) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw;
  }
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("trace: waiting for {}: {}", python, std::strerror(errno));
  }
  if (!finished) {
    fail("trace: the PyTorch tracer did not finish within {:g} s (--timeout); it was stopped",
         timeout_s);
  }
  if (WIFSIGNALED(status)) {
    fail("trace: the PyTorch tracer was killed by signal {}{}", WTERMSIG(status),
         WTERMSIG(status) == SIGKILL ? " (out of memory?)" : "");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (const std::optional<std::string> line = verdict(got.err)) fail("trace: {}", *line);
    if (!user_script.empty()) script_ended(user_script, WEXITSTATUS(status));
    const std::string line = last_line(got.err);
    if (line.empty())
      fail("trace: the PyTorch tracer failed with exit code {}", WEXITSTATUS(status));
    fail("trace: {}", line);
  }
  return got;
}

// What a tracer that exited 0 must have written.
void require_output(const std::string& path, const TorchTraceRequest& request) {
  if (std::filesystem::exists(path)) return;
  if (!request.script.empty()) script_ended(request.script, 0);
  fail("trace: the PyTorch tracer exited without writing {} (a tracer bug)",
       std::filesystem::path(path).filename().string());
}

}  // namespace

std::string run_torch_tracer(const std::vector<std::string>& args, double timeout_s,
                             const std::string& python) {
  PrivateDir dir("memwall-trace");
  return run_tracer_in(dir, args, /*capture_out=*/true, timeout_s, python).out;
}

namespace {

std::vector<std::string> tracer_args(const TorchTraceRequest& request) {
  const int sources = int{!request.torchvision.empty()} + int{!request.script.empty()} +
                      int{!request.builtin.empty()} + int{!request.hf.empty()} +
                      int{!request.hf_config.empty()};
  if (sources != 1) {
    fail(
        "trace: give exactly one of --torchvision NAME, --script FILE.py:FUNCTION, --hf NAME and "
        "--hf-config FILE");
  }
  std::vector<std::string> args;
  if (!request.hf.empty() || !request.hf_config.empty()) {
    if (request.hf.empty()) {
      args = {"--hf-config", request.hf_config};
    } else {
      args = {"--hf", request.hf};
    }
    args.insert(args.end(), {"--batch", std::to_string(request.batch), "--optimizer",
                             request.optimizer, "--dtype", request.dtype});
    if (request.seq > 0) args.insert(args.end(), {"--seq", std::to_string(request.seq)});
    if (request.lora_rank > 0) {
      args.insert(args.end(), {"--lora", std::to_string(request.lora_rank)});
      if (!request.lora_targets.empty()) {
        args.insert(args.end(), {"--lora-targets", request.lora_targets});
      }
      if (request.lora_alpha > 0) {
        args.insert(args.end(), {"--lora-alpha", fmt::format("{}", request.lora_alpha)});
      }
    }
  } else if (!request.torchvision.empty()) {
    args = {"--torchvision", request.torchvision, "--batch", std::to_string(request.batch),
            "--optimizer",   request.optimizer};
    if (request.image > 0) {
      args.push_back("--image");
      args.push_back(std::to_string(request.image));
    }
  } else if (!request.builtin.empty()) {
    args = {"--builtin", request.builtin};
  } else {
    args = {"--script", request.script};
  }
  if (request.measure) args.push_back("--measure");
  if (!request.kernels.empty()) {
    if (request.kernels != "cuda" && request.kernels != "cpu") {
      fail("trace: unknown kernels '{}' (cuda or cpu)", request.kernels);
    }
    if (request.measure && request.kernels == "cuda") {
      fail("trace: --measure runs the CPU's kernels; --kernels cuda needs the meta-device trace");
    }
    args.push_back("--kernels");
    args.push_back(request.kernels);
  }
  if (request.threads < 0) fail("trace: the thread count must be positive");
  if (request.threads > 0) {
    args.push_back("--threads");
    args.push_back(std::to_string(request.threads));
  }
  return args;
}

Graph read_traced_graph(const std::string& path) {
  Graph graph;
  try {
    graph = read_graph_file(path);
  } catch (const Error& e) {
    fail("trace: the tracer's graph is invalid (a tracer bug): {}", e.what());
  }
  // In-place updates of activations become versions (Note [Buffer versions]).
  version_in_place_updates(graph);
  validate(graph);
  return graph;
}

}  // namespace

Graph trace_torch(const TorchTraceRequest& request) {
  std::vector<std::string> args = tracer_args(request);
  PrivateDir dir("memwall-trace");
  const std::string graph_path = dir.file("graph.json");
  dir.file("graph.json.tmp");  // the tracer writes through it
  args.push_back("--out");
  args.push_back(graph_path);
  run_tracer_in(dir, args, /*capture_out=*/false, request.timeout_s, request.python,
                request.script);
  require_output(graph_path, request);
  return read_traced_graph(graph_path);
}

MeasuredStep trace_and_measure(const TorchTraceRequest& request) {
  std::vector<std::string> args = tracer_args(request);
  PrivateDir dir("memwall-trace");
  const std::string graph_path = dir.file("graph.json");
  const std::string measured_path = dir.file("measured.json");
  dir.file("graph.json.tmp");
  dir.file("measured.json.tmp");
  args.insert(args.end(), {"--out", graph_path, "--measure-peak", measured_path});
  run_tracer_in(dir, args, /*capture_out=*/false, request.timeout_s, request.python,
                request.script);
  require_output(graph_path, request);
  require_output(measured_path, request);
  MeasuredStep step;
  step.graph = read_traced_graph(graph_path);
  try {
    std::ifstream in(measured_path);
    const nlohmann::json m = nlohmann::json::parse(in);
    step.measured_peak_bytes = m.at("measured_peak_bytes").get<uint64_t>();
    step.baseline_bytes = m.at("baseline_bytes").get<uint64_t>();
    step.measured_peak_op = m.at("measured_peak_op").get<std::string>();
    step.measured_peak_node = m.at("measured_peak_node").get<std::string>();
    step.threads = m.at("threads").get<int>();
    for (const nlohmann::json& op : m.at("op_scratch")) {
      step.op_scratch.emplace_back(op.at(0).get<std::string>(), op.at(1).get<uint64_t>());
    }
  } catch (const std::exception& e) {
    fail("trace: the tracer's measurement is invalid (a tracer bug): {}", e.what());
  }
  return step;
}

struct RunTrace::Impl {
  std::optional<PrivateDir> dir;  // a fresh trace's; none for kept values
  Graph graph;
  std::string values;
};

RunTrace::RunTrace(const std::string& values) : impl_(std::make_unique<Impl>()) {
  for (const char* name : {"graph.json", "state.json", "state.bin"}) {
    if (!std::filesystem::exists(values + "/" + name)) {
      fail("{}: no {} (the directory `memwall run --keep-values` writes)", values, name);
    }
  }
  impl_->values = values;
  impl_->graph = read_traced_graph(values + "/graph.json");
}

RunTrace::RunTrace(const TorchTraceRequest& request, int steps, int64_t seed)
    : impl_(std::make_unique<Impl>()) {
  if (request.measure) fail("trace: a run's trace does not measure op times");
  if (request.device != "cpu" && request.device != "cuda") {
    fail("trace: unknown device '{}' for a run's values (cpu or cuda)", request.device);
  }
  // The values come from the kernels that will run them (Note [The CUDA run]).
  if (!request.kernels.empty() && request.kernels != request.device) {
    fail("trace: a run on the {} replays its own kernels, not {}'s",
         request.device == "cuda" ? "GPU" : "emulated device", request.kernels);
  }
  if (steps <= 0) fail("trace: the number of steps must be positive");
  std::vector<std::string> args = tracer_args(request);
  // Made and registered here, so that an interrupt removes it with its files.
  PrivateDir& dir = impl_->dir.emplace("memwall-trace");
  impl_->values = dir.subdir("values");
  std::vector<std::string> names = {"graph.json", "state.json", "state.bin", "eager.json",
                                    "eager.bin"};
  for (int r = 1; r < request.ranks; ++r) {
    names.push_back(fmt::format("inputs{}.json", r));
    names.push_back(fmt::format("inputs{}.bin", r));
  }
  for (const std::string& name : names) {
    dir.file("values/" + name);
    dir.file("values/" + name + ".tmp");
  }
  args.insert(args.end(), {"--values", impl_->values, "--steps", std::to_string(steps), "--seed",
                           std::to_string(seed)});
  if (request.ranks > 1) args.insert(args.end(), {"--ranks", std::to_string(request.ranks)});
  if (request.device != "cpu") args.insert(args.end(), {"--device", request.device});
  run_tracer_in(dir, args, /*capture_out=*/false, request.timeout_s, request.python,
                request.script);
  require_output(impl_->values + "/graph.json", request);
  impl_->graph = read_traced_graph(impl_->values + "/graph.json");
}

RunTrace::~RunTrace() = default;
const Graph& RunTrace::graph() const { return impl_->graph; }
const std::string& RunTrace::values_dir() const { return impl_->values; }

TorchTraceRequest request_for(const Graph& graph) {
  const auto it = graph.meta.find("origin");
  if (it == graph.meta.end() || !it->is_object()) {
    fail(
        "graph \"{}\" does not say which model it was traced from (meta.origin): trace it "
        "again with this memwall",
        graph.name);
  }
  const nlohmann::json& origin = *it;
  TorchTraceRequest request;
  try {
    if (origin.contains("torchvision")) {
      request.torchvision = origin.at("torchvision").get<std::string>();
      request.batch = origin.at("batch").get<int64_t>();
      request.image = origin.at("image").get<int64_t>();
      request.optimizer = origin.at("optimizer").get<std::string>();
    } else if (origin.contains("builtin")) {
      request.builtin = origin.at("builtin").get<std::string>();
    } else if (origin.contains("hf") || origin.contains("hf_config")) {
      if (origin.contains("hf")) {
        request.hf = origin.at("hf").get<std::string>();
      } else {
        request.hf_config = origin.at("hf_config").get<std::string>();
      }
      request.batch = origin.at("batch").get<int64_t>();
      request.seq = origin.at("seq").get<int64_t>();
      request.dtype = origin.at("dtype").get<std::string>();
      request.optimizer = origin.at("optimizer").get<std::string>();
      if (origin.contains("lora")) {
        request.lora_rank = origin.at("lora").get<int64_t>();
        request.lora_alpha = origin.at("lora_alpha").get<double>();
        request.lora_targets = origin.at("lora_targets").get<std::string>();
      }
    } else {
      request.script = origin.at("script").get<std::string>();
    }
  } catch (const std::exception& e) {
    fail("graph \"{}\": malformed meta.origin: {}", graph.name, e.what());
  }
  if (graph.meta.contains("threads") && graph.meta["threads"].is_number_integer()) {
    request.threads = graph.meta["threads"].get<int>();
  }
  return request;
}

}  // namespace memwall::importers
