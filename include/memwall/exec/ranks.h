// Data-parallel runs (docs/exec.md, "Ranks"): a run of a ZeRO rank graph
// runs rank 0 in the calling process and ranks 1..N-1 as child processes of
// the hidden `memwall run-rank` (run_child_rank), which meet through a c10d
// FileStore.
//
//   exec::Status s = exec::run_plan_ranks(graph, plan, values_dir, options, result, error);
#pragma once
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "memwall/base/interrupt_cleanup.h"
#include "memwall/base/private_dir.h"
#include "memwall/exec/executor.h"
#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall::exec {

// The data-parallel ranks a graph is one of (meta.zero.ranks; 1 if none).
int ranks_of(const Graph& graph);

// Each rank is a process with its own libtorch and device on this machine:
// `memwall run` starts at most this many (plans may have any number).
inline constexpr int kMaxRunRanks = 64;
// Throws Error (exit 2) for more ranks than that.
void check_run_ranks(int ranks);

// What a child rank reported.
struct RankOutcome {
  int rank = 0;
  Status status = Status::kRunFailed;
  std::string error;
  std::optional<bool> eager_equal;
  std::string eager_difference;
  std::vector<std::string> notes;  // RunResult::notes
  bool said = false;               // wrote its outcome (not killed or crashed)
  bool stopped = false;            // ended by stop(), after rank 0 failed
};

class RankProcesses {
 public:
  // Writes the graph and plan to a private directory and starts ranks
  // 1..ranks_of(graph)-1 with `options` (rank and store their own), each
  // reading its values from the directory `values`: `memwall run-rank` of
  // the running executable (memwall_executable). Throws Error when a file
  // cannot be written or a process cannot start.
  RankProcesses(const Graph& graph, const Plan& plan, const std::string& values,
                const RunOptions& options);
  ~RankProcesses();  // stops ranks still running, removes the directory
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  const std::string& store() const { return store_; }
  // Rank 0 failed: the others would wait in their collectives until the
  // timeout; stop them now.
  void stop();
  // Rank 0 has returned: waits for every child and returns what each said
  // (a child that died without a word: kRunFailed and its exit status).
  std::vector<RankOutcome> wait();

 private:
  void watch();
  RankOutcome outcome_of(int rank, int wait_status) const;
  std::optional<PrivateDir> dir_;
  std::string store_;
  std::vector<pid_t> children_;
  std::vector<std::unique_ptr<KillOnInterrupt>> kill_on_interrupt_;  // per child, until reaped
  // Note [Dead ranks]: the watcher reaps children as they end.
  std::mutex mutex_;
  std::vector<RankOutcome> ended_;
  std::atomic<bool> rank0_done_{false};
  bool stopping_ = false;  // stop() was called (under mutex_)
  std::thread watcher_;
};

// Folds the children's outcomes into rank 0's `status`, `error` and
// result (their notes after rank 0's): a child's failure explains the run's (rank 0's "Connection
// closed by peer" follows from it), its own error line first; a child that stop() ended does not.
void merge_ranks(const std::vector<RankOutcome>& outcomes, Status& status, std::string& error,
                 RunResult& result);

// Runs `plan` from the values in the directory `values` (the children
// read them there): as its only rank, or for a ZeRO rank graph as rank 0
// in this process with ranks 1..N-1 as RankProcesses, their outcomes
// folded into rank 0's (merge_ranks). options.ranks and options.store are
// set here. Throws Error when the executor cannot be loaded or a rank
// cannot start.
Status run_plan_ranks(const Graph& graph, const Plan& plan, const std::string& values,
                      RunOptions options, RunResult& result, std::string& error);

// A child rank (`memwall run-rank`): what RankProcesses gives it.
struct ChildRank {
  std::string graph, plan, values, store;
  std::string result;  // where its outcome goes, as JSON
  std::string policy = "stitching", nvme_faults;
  std::vector<std::string> nvme_dirs;
  int rank = 1, steps = 3;
  bool check_eager = false;
};
// Runs the child's rank and writes its outcome; returns the status as the
// exit code.
int run_child_rank(const ChildRank& child);

}  // namespace memwall::exec
