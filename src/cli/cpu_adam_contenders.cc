#include "cpu_adam_contenders.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace memwall::cli {
namespace {

// One request a line ("N REPEATS none|bf16"), one JSON answer a line. The
// first line out says what the interpreter has.
constexpr const char* kContendersScript = R"PY(
import contextlib, io, json, sys, time
threads = int(sys.argv[1])
def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
try:
    import torch
except ImportError:
    say({"error": "torch is not importable"}); sys.exit(0)
torch.set_num_threads(threads)
about = {"torch": torch.__version__}
DeepSpeedCPUAdam = None
try:
    with contextlib.redirect_stdout(io.StringIO()):  # its accelerator notice
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    about["deepspeed"] = "deepspeed " + deepspeed.__version__
except Exception:
    about["deepspeed"] = ("not installed (scripts/install-deps.sh --deepspeed installs it into "
                          "memwall's environment)")
say(about)

def best_of(opt, p, half, repeats):
    def step():
        opt.step()
        if half is not None:  # the second pass ZeRO-Offload makes for the device's copy
            half.copy_(p.detach())
    step()  # warm-up: states allocated, pages touched
    best = 1e30
    for _ in range(repeats):
        t0 = time.perf_counter(); step(); best = min(best, time.perf_counter() - t0)
    return best

def first_line(e):
    return str(e).splitlines()[0] if str(e) else type(e).__name__

for line in sys.stdin:
    n, repeats, copy = line.split()
    n, repeats = int(n), int(repeats)
    out = {}
    makers = [("foreach", lambda p: torch.optim.AdamW([p], lr=1e-3, foreach=True)),
              ("fused", lambda p: torch.optim.AdamW([p], lr=1e-3, fused=True))]
    if DeepSpeedCPUAdam is not None:
        # AdamW mode (decoupled weight decay, as torch's AdamW); its C++ op
        # compiles on first use.
        makers.append(("deepspeed_cpu_adam", lambda p: DeepSpeedCPUAdam(
            [p], lr=1e-3, weight_decay=1e-2, adamw_mode=True)))
    for name, make in makers:
        p = torch.nn.Parameter(torch.full((n,), 0.5))
        p.grad = torch.full((n,), 0.01)
        half = torch.empty(n, dtype=torch.bfloat16) if copy == "bf16" else None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                out[name] = best_of(make(p), p, half, repeats)
        except Exception as e:
            out[name + "_error"] = first_line(e)
        del p, half
    say(out)
)PY";

}  // namespace

CpuAdamContenders::CpuAdamContenders(const std::string& python, unsigned threads) {
  about_ = {{"error", "cannot start " + python}};
  char path[] = "/tmp/memwall-cpu-adam-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    about_ = {{"error", "cannot create a temporary file for the contenders' script"}};
    return;
  }
  script_ = path;
  const std::string text = kContendersScript;
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written) {
    about_ = {{"error", "cannot write the contenders' script"}};
    return;
  }
  int down[2], up[2];  // to the child's stdin, from its stdout
  if (pipe2(down, O_CLOEXEC) != 0) return;
  if (pipe2(up, O_CLOEXEC) != 0) {
    close(down[0]);
    close(down[1]);
    return;
  }
  const std::string thread_text = std::to_string(threads);
  // The child's environment, made before fork (a forked child of a threaded
  // process may call only async-signal-safe functions, so no setenv there).
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("OMP_NUM_THREADS=")) continue;
    env_text.emplace_back(*e);
  }
  env_text.push_back("OMP_NUM_THREADS=" + thread_text);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    // The child: only async-signal-safe calls until exec.
    dup2(down[0], STDIN_FILENO);
    dup2(up[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    execle(python.c_str(), python.c_str(), path, thread_text.c_str(), static_cast<char*>(nullptr),
           envp.data());
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  if (pid_ < 0) {
    close(down[1]);
    close(up[0]);
    return;
  }
  // A child that dies must not kill us with SIGPIPE; writes then fail.
  signal(SIGPIPE, SIG_IGN);
  to_ = fdopen(down[1], "w");
  from_ = fdopen(up[0], "r");
  about_ = read_answer();
  if (about_.contains("error") && about_["error"] == "no answer") {
    about_ = {{"error", "the contenders' script failed under " + python}};
  }
}

CpuAdamContenders::~CpuAdamContenders() {
  if (to_ != nullptr) fclose(to_);  // EOF: the script's loop ends
  if (from_ != nullptr) fclose(from_);
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (!script_.empty()) unlink(script_.c_str());
}

nlohmann::json CpuAdamContenders::read_answer() {
  if (from_ == nullptr) return {{"error", "no answer"}};
  std::string line;
  int c;
  while ((c = fgetc(from_)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
  nlohmann::json answer = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (line.empty() || answer.is_discarded() || !answer.is_object()) {
    return {{"error", "no answer"}};
  }
  return answer;
}

nlohmann::json CpuAdamContenders::time_step(int64_t n, int repeats, bool bf16_copy) {
  if (about_.contains("error")) return {{"error", about_["error"]}};
  if (to_ == nullptr ||
      fprintf(to_, "%lld %d %s\n", static_cast<long long>(n), repeats,
              bf16_copy ? "bf16" : "none") < 0 ||
      fflush(to_) != 0) {
    return {{"error", "the contenders' script stopped"}};
  }
  nlohmann::json answer = read_answer();
  if (answer.contains("error") && answer["error"] == "no answer") {
    return {{"error", fmt::format("the contenders' script stopped at {} parameters (out of "
                                  "memory?)",
                                  n)}};
  }
  return answer;
}

}  // namespace memwall::cli
