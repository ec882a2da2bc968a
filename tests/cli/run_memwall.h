// Runs the built `memwall` binary and captures its exit code and output.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace memwall::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Note [Tests on a GPU]
// ~~~~~~~~~~~~~~~~~~~~~
// scripts/gpu-check.sh runs the executor's matrix (tests/exec) on a GPU
// with MEMWALL_TEST_RUN_DEVICE=cuda: every `memwall run` gets --device
// cuda, and every `memwall plan` --no-layout, as a CUDA run places no
// layout's offsets yet (Note [The CUDA run] in src/exec/cuda_run.cc).
// Unset (every run here), the commands are as written.
inline std::string test_run_device() {
  const char* device = std::getenv("MEMWALL_TEST_RUN_DEVICE");
  return device != nullptr ? device : "";
}
inline std::string on_test_device(const std::string& args) {
  const std::string device = test_run_device();
  if (device.empty()) return args;
  if (args.starts_with("run ") && args.find("--device") == std::string::npos) {
    return args + " --device " + device;
  }
  if (args.starts_with("plan ") && args.find("--no-layout") == std::string::npos) {
    return args + " --no-layout";
  }
  return args;
}

// `args` is appended to the binary's path as shell words.
inline RunResult run_memwall(const std::string& args) {
  static int counter = 0;
  std::string base = ::testing::TempDir() + "memwall_cli_" + std::to_string(getpid()) + "_" +
                     std::to_string(counter++);
  std::string cmd = std::string(MEMWALL_BINARY) + " " + on_test_device(args) + " >" + base +
                    ".out 2>" + base + ".err </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

struct Spawned {
  pid_t pid = -1;
};

// Starts memwall with `args` and extra environment, output to `log`, and
// returns at once (a test that signals it, Note [Interrupt cleanup]).
inline Spawned spawn_memwall(const std::vector<std::string>& args,
                             const std::vector<std::string>& env, const std::string& log) {
  std::vector<std::string> argv_text = {MEMWALL_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text(env);
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  Spawned s;
  EXPECT_EQ(posix_spawn(&s.pid, argv[0], &actions, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  return s;
}

// Waits up to `seconds` for `ready`; false if it never held.
template <typename F>
bool wait_for(F&& ready, int seconds = 60) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace memwall::testing
