#include "memwall/importers/cpu_adam_contenders.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/private_dir.h"
#include "memwall/importers/torch_trace.h"

namespace memwall::importers {

CpuAdamContenders::CpuAdamContenders(const std::string& python, unsigned threads) {
  about_ = {{"error", "cannot start " + python}};
  // The script is python/memwall/cpu_adam_contenders.py, started through the
  // package's entry as the tracer is (Note [Tracer process]).
  std::string entry;
  try {
    dir_ = std::make_unique<PrivateDir>("memwall-cpu-adam");
    entry = write_python_package(*dir_);
  } catch (const std::exception& e) {
    about_ = {{"error", std::string("cannot write the contenders' script: ") + e.what()}};
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
    execle(python.c_str(), python.c_str(), entry.c_str(), "cpu-adam-contenders",
           thread_text.c_str(), static_cast<char*>(nullptr), envp.data());
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

nlohmann::json CpuAdamContenders::ask(int64_t n, int repeats, bool bf16_copy) {
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

std::string CpuAdamContenders::deepspeed() const {
  return about_.contains("error") ? about_["error"].get<std::string>()
                                  : about_.value("deepspeed", "?");
}

CpuAdamTimes CpuAdamContenders::time_step(int64_t n, int repeats, bool bf16_copy) {
  return decode_cpu_adam_times(ask(n, repeats, bf16_copy), deepspeed());
}

CpuAdamTimes decode_cpu_adam_times(const nlohmann::json& answer, const std::string& deepspeed) {
  CpuAdamTimes times;
  const std::string all_why = answer.value("error", "");
  const std::pair<const char*, const char*> names[] = {
      {"foreach", "torch_foreach"}, {"fused", "torch_fused"}, {"deepspeed_cpu_adam", "deepspeed"}};
  for (const auto& [key, contender] : names) {
    const std::string error_key = std::string(key) + "_error";
    if (answer.contains(key) && answer[key].is_number()) {
      times.seconds[contender] = answer[key].get<double>();
    } else if (!all_why.empty()) {
      times.why[contender] = all_why;
    } else if (answer.contains(error_key)) {
      times.why[contender] = "failed: " + answer[error_key].get<std::string>();
    } else {
      times.why[contender] = deepspeed;  // the only contender that can be absent
    }
  }
  return times;
}

}  // namespace memwall::importers
