// Runs the embedded PyTorch tracer in a child process and reads its graph.
//
// Note [Tracer process]
// The tracer's source is written to a fresh private directory (mkdtemp) and
// run as `python3 <dir>/memwall_trace.py ARGS`, with its standard output and
// error sent to files in the same directory and standard input from
// /dev/null. The tracer reports bad input as one line starting with
// "memwall-trace: error: " and exit code 2; that line becomes the Error's
// message. Anything else a failing child prints (a crash, a signal) is
// reduced to its last line. The directory is removed whatever happens.
#include "memwall/importers/torch_trace.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "memwall/graph/error.h"
#include "memwall/graph/file_text.h"
#include "memwall/graph/graph.h"

extern char** environ;

namespace memwall::importers {
namespace {

constexpr std::string_view kErrorPrefix = "memwall-trace: error: ";

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/memwall-trace-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      fail("trace: cannot create a temporary directory: {}", std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The tracer's one-line message, else the last non-empty line of stderr.
std::string failure_line(const std::string& err) {
  std::string last;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(kErrorPrefix, 0) == 0) return line.substr(kErrorPrefix.size());
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

}  // namespace

std::string tracer_python() {
  const char* env = std::getenv("MEMWALL_PYTHON");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("/usr/bin/python3");
}

namespace {

// Note [Tracer process].
std::string run_tracer_in(const TempDir& dir, const std::vector<std::string>& args) {
  const std::string python = tracer_python();
  if (access(python.c_str(), X_OK) != 0) {
    fail(
        "trace: no Python interpreter at {} (install python3, python3-torch and "
        "python3-torchvision: scripts/install-deps.sh --torch; or set MEMWALL_PYTHON)",
        python);
  }
  const std::string script = dir.path() + "/memwall_trace.py";
  const std::string out_path = dir.path() + "/stdout";
  const std::string err_path = dir.path() + "/stderr";
  write_file_atomically(script, torch_tracer_source());

  std::vector<std::string> argv_text = {python, script};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) fail("trace: cannot run {}: {}", python, std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("trace: waiting for {}: {}", python, std::strerror(errno));
  }
  const std::string err(FileText(err_path).text());
  if (WIFSIGNALED(status)) {
    fail("trace: the PyTorch tracer was killed by signal {}{}", WTERMSIG(status),
         WTERMSIG(status) == SIGKILL ? " (out of memory?)" : "");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string line = failure_line(err);
    if (line.empty())
      fail("trace: the PyTorch tracer failed with exit code {}", WEXITSTATUS(status));
    fail("trace: {}", line);
  }
  return std::string(FileText(out_path).text());
}

}  // namespace

std::string run_torch_tracer(const std::vector<std::string>& args) {
  TempDir dir;
  return run_tracer_in(dir, args);
}

Graph trace_torch(const TorchTraceRequest& request) {
  if (request.torchvision.empty() == request.script.empty()) {
    fail("trace: give exactly one of --torchvision NAME and --script FILE.py:FUNCTION");
  }
  std::vector<std::string> args;
  if (!request.torchvision.empty()) {
    args = {"--torchvision", request.torchvision, "--batch", std::to_string(request.batch),
            "--optimizer",   request.optimizer};
    if (request.image > 0) {
      args.push_back("--image");
      args.push_back(std::to_string(request.image));
    }
  } else {
    args = {"--script", request.script};
  }
  if (request.measure) args.push_back("--measure");
  TempDir dir;
  args.push_back("--out");
  args.push_back(dir.path() + "/graph.json");
  run_tracer_in(dir, args);
  try {
    return read_graph_file(dir.path() + "/graph.json");
  } catch (const Error& e) {
    fail("trace: the tracer's graph is invalid (a tracer bug): {}", e.what());
  }
}

}  // namespace memwall::importers
