// Data-parallel runs (memwall/exec/ranks.h): the child ranks and what
// `memwall run-rank` runs.
#include "memwall/exec/ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/base/interrupt_cleanup.h"
#include "memwall/base/output_files.h"
#include "memwall/exec/library.h"
#include "memwall/graph/graph.h"

namespace memwall::exec {

int ranks_of(const Graph& graph) {
  const auto it = graph.meta.find("zero");
  if (it == graph.meta.end() || !it->is_object()) return 1;
  return it->value("ranks", 1);
}

void check_run_ranks(int ranks) {
  if (ranks > kMaxRunRanks) {
    fail("run: {} ranks would be {} processes on this machine; memwall run starts at most {}",
         ranks, ranks, kMaxRunRanks);
  }
}

namespace {

void write_file(const std::string& path, const std::string& text) {
  OutputFiles out;
  out.declare(path);
  out.set(path, text);
  out.commit();
}

}  // namespace

RankProcesses::RankProcesses(const Graph& graph, const Plan& plan, const std::string& values,
                             const RunOptions& options) {
  const int ranks = ranks_of(graph);
  check_run_ranks(ranks);
  // Note [Interrupt cleanup]: every file the ranks make here is named, so
  // that an interrupt leaves no directory behind.
  dir_.emplace(fmt::format("memwall_ranks_{}", getpid()));
  const std::string dir = dir_->path();
  store_ = dir_->file("store");
  write_file(dir_->file("graph.json"), graph_to_json_text(graph));
  write_file(dir_->file("plan.json"), plan_to_json_text(plan));
  for (int r = 1; r < ranks; ++r) {
    dir_->file(fmt::format("rank{}.json", r));
    dir_->file(fmt::format("rank{}.log", r));
  }
  const std::string exe = memwall_executable();
  for (int r = 1; r < ranks; ++r) {
    std::vector<std::string> args = {"memwall",  "run-rank",
                                     "--graph",  dir + "/graph.json",
                                     "--plan",   dir + "/plan.json",
                                     "--values", values,
                                     "--rank",   std::to_string(r),
                                     "--store",  store_,
                                     "--steps",  std::to_string(options.steps),
                                     "--policy", options.policy,
                                     "--result", fmt::format("{}/rank{}.json", dir, r)};
    if (options.check_eager) args.emplace_back("--check-eager");
    for (const std::string& d : options.nvme_dirs) args.insert(args.end(), {"--nvme-dir", d});
    if (!options.nvme_faults.empty())
      args.insert(args.end(), {"--nvme-faults", options.nvme_faults});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The child's own words go to its log; its outcome to its result file.
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    const std::string log = fmt::format("{}/rank{}.log", dir, r);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    SpawnedChild child = spawn_killed_on_interrupt(exe, &files, argv.data());
    posix_spawn_file_actions_destroy(&files);
    if (child.error != 0) {
      stop();
      fail("run: cannot start rank {}: {}", r, std::strerror(child.error));
    }
    children_.push_back(child.pid);
    kill_on_interrupt_.push_back(std::move(child.kill));
  }
  watcher_ = std::thread([this] { watch(); });
}

RankProcesses::~RankProcesses() {
  stop();
  (void)wait();
}

void RankProcesses::stop() {
  const std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  for (const pid_t pid : children_) {
    if (pid > 0) ::kill(pid, SIGTERM);
  }
}

RankOutcome RankProcesses::outcome_of(int rank, int wait_status) const {
  RankOutcome o;
  o.rank = rank;
  std::ifstream in(fmt::format("{}/rank{}.json", dir_->path(), rank));
  nlohmann::json j;
  try {
    if (in) j = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    j = nullptr;
  }
  if (j.is_object()) {
    o.said = true;
    o.status = static_cast<Status>(j.value("status", 1));
    o.error = j.value("error", std::string());
    if (j.contains("eager_equal")) o.eager_equal = j["eager_equal"].get<bool>();
    o.eager_difference = j.value("eager_difference", std::string());
    o.notes = j.value("notes", std::vector<std::string>());
  } else {
    o.status = Status::kRunFailed;
    o.stopped = stopping_ && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGTERM;
    o.error = WIFSIGNALED(wait_status)
                  ? fmt::format("died of signal {}", WTERMSIG(wait_status))
                  : fmt::format("exited with {} and said nothing (its log: {}/rank{}.log)",
                                WEXITSTATUS(wait_status), dir_->path(), rank);
  }
  return o;
}

// Note [Dead ranks]
// ~~~~~~~~~~~~~~~~~
// A rank that dies during a collective closes its sockets, and gloo fails
// the others' collectives at once ("Connection closed by peer"), so rank 0
// returns with an error of its own. A rank that fails before it joins
// (bad input, a failed start) would leave rank 0 waiting in the rendezvous
// for the process group's whole timeout. The watcher reaps the children as
// they end; when one has failed and rank 0 has not returned 10 s later, it
// says which rank failed and why, stops the others and ends the process
// (exit 2 for the rank's bad input, else 1).
void RankProcesses::watch() {
  using namespace std::chrono_literals;
  std::optional<std::chrono::steady_clock::time_point> failed_at;
  while (!rank0_done_.load()) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < children_.size(); ++i) {
        int status = 0;
        if (children_[i] <= 0 || ::waitpid(children_[i], &status, WNOHANG) != children_[i]) {
          continue;
        }
        children_[i] = 0;
        kill_on_interrupt_[i].reset();
        ended_.push_back(outcome_of(static_cast<int>(i) + 1, status));
        if (ended_.back().status != Status::kOk && !failed_at) {
          failed_at = std::chrono::steady_clock::now();
        }
      }
    }
    if (failed_at && std::chrono::steady_clock::now() - *failed_at > 10s) {
      const auto bad = std::find_if(ended_.begin(), ended_.end(),
                                    [](const RankOutcome& o) { return o.status != Status::kOk; });
      std::cerr << fmt::format("memwall: error: run failed: rank {}: {}\n", bad->rank, bad->error);
      stop();
      std::error_code ignored;
      std::filesystem::remove_all(dir_->path(), ignored);
      exit_after_cleanup(bad->status == Status::kBadInput ? 2 : 1);
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::vector<RankOutcome> RankProcesses::wait() {
  rank0_done_.store(true);
  if (watcher_.joinable()) watcher_.join();
  std::vector<RankOutcome> out = std::move(ended_);
  ended_.clear();
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i] <= 0) continue;
    int status = 0;
    while (::waitpid(children_[i], &status, 0) < 0 && errno == EINTR) {
    }
    children_[i] = 0;
    kill_on_interrupt_[i].reset();
    out.push_back(outcome_of(static_cast<int>(i) + 1, status));
  }
  std::sort(out.begin(), out.end(),
            [](const RankOutcome& a, const RankOutcome& b) { return a.rank < b.rank; });
  return out;
}

void merge_ranks(const std::vector<RankOutcome>& outcomes, Status& status, std::string& error,
                 RunResult& result) {
  for (const RankOutcome& o : outcomes) {
    for (const std::string& note : o.notes)
      result.notes.push_back(fmt::format("rank {}: {}", o.rank, note));
  }
  for (const bool own : {true, false}) {
    for (const RankOutcome& o : outcomes) {
      if (o.status == Status::kOk || o.said != own || o.stopped) continue;
      status = o.status;
      error = fmt::format("rank {}: {}", o.rank, o.error);
      return;
    }
  }
  for (const RankOutcome& o : outcomes) {
    if (o.eager_equal && result.eager_equal && *result.eager_equal && !*o.eager_equal) {
      result.eager_equal = false;
      result.eager_difference = fmt::format("rank {}: {}", o.rank, o.eager_difference);
    }
  }
}

Status run_plan_ranks(const Graph& graph, const Plan& plan, const std::string& values,
                      RunOptions options, RunResult& result, std::string& error) {
  const RunFunction run = load_executor();
  // A ZeRO rank graph: this process is rank 0 (docs/exec.md, "Ranks").
  std::unique_ptr<RankProcesses> others;
  options.ranks = ranks_of(graph);
  if (options.ranks > 1) {
    others = std::make_unique<RankProcesses>(graph, plan, values, options);
    options.store = others->store();
  }
  Status status = run(graph, plan, values, options, result, error);
  if (others) {
    if (status != Status::kOk) others->stop();
    merge_ranks(others->wait(), status, error, result);
  }
  return status;
}

int run_child_rank(const ChildRank& child) {
  const Graph graph = read_graph_file(child.graph);
  const Plan plan = read_plan_file(child.plan);
  RunOptions options;
  options.steps = child.steps;
  options.check_eager = child.check_eager;
  options.policy = child.policy;
  options.nvme_dirs = child.nvme_dirs;
  options.nvme_faults = child.nvme_faults;
  options.rank = child.rank;
  options.ranks = ranks_of(graph);
  options.store = child.store;
  RunResult result;
  std::string error;
  Status status = Status::kRunFailed;
  try {
    status = run_plan(graph, plan, child.values, options, result, error);
  } catch (const Error& e) {
    status = Status::kBadInput;
    error = e.what();
  }
  nlohmann::json out = {
      {"status", static_cast<int>(status)}, {"error", error}, {"notes", result.notes}};
  if (result.eager_equal) {
    out["eager_equal"] = *result.eager_equal;
    out["eager_difference"] = result.eager_difference;
  }
  write_file(child.result, out.dump());
  return static_cast<int>(status);
}

}  // namespace memwall::exec
