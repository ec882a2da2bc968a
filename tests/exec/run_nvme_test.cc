// `memwall run` of a plan that puts model states on NVMe (issue 45): the
// swap space it reserves is the plan's (Note [NVMe reservation] in
// src/plan/nvme_reservation.cc), and however the run ends, SIGINT, SIGTERM
// or kill -9, it leaves no swap file, and no trace, behind (Note [Swap
// files without names] in src/runtime/swap_dir.cc); the next run removes
// a stale file of a dead process and says so (Note [Stale swap files]).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_memwall.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/plan/plan.h"
#include "memwall/runtime/nvme_engine.h"
#include "run_checks.h"

namespace memwall::testing {
namespace {

namespace fs = std::filesystem;

class RunNvme : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = kept_cnn_bn("nvme");
    if (dir.empty()) return;
    dir_ = new std::string(dir);
    args_ = new std::string(infinity_plan(dir));
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) fs::remove_all(*dir_);
    delete dir_;
    delete args_;
    dir_ = args_ = nullptr;
  }
  // A fresh, empty directory for this test's swap files (or its $TMPDIR).
  static std::string fresh(const std::string& name) {
    const std::string dir = *dir_ + "/" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
  }
  static std::string* dir_;
  static std::string* args_;  // infinity_plan's
};
std::string* RunNvme::dir_ = nullptr;
std::string* RunNvme::args_ = nullptr;

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Whether `pid` holds a swap file of `dir` open: the engine has started.
bool holds_swap_file(pid_t pid, const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path target = fs::read_symlink(it->path(), ec);
    if (!ec && target.string().starts_with(dir + "/memwall-swap-")) return true;
  }
  return false;
}

TEST_F(RunNvme, TheRunReservesWhatThePlanSays) {
  REQUIRE_EXECUTOR();
  const std::string swap = fresh("swap");
  const Graph graph = read_graph_file(*dir_ + "/inf_graph.json");
  const Plan plan = read_plan_file(*dir_ + "/inf.json");
  // The engine's bounds on a block (runtime/nvme_engine.h).
  const NvmeReservation want =
      nvme_reservation(graph, plan, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
  ASSERT_GT(want.buffers, 0u);
  const RunResult r =
      run_memwall("run " + *args_ + " --nvme-dir " + swap + " --check-eager --json");
  const nlohmann::json j = check_run(r, "zero-infinity");
  ASSERT_TRUE(j.contains("nvme")) << r.out;
  EXPECT_EQ(j["nvme"]["held_bytes"], want.reserved_bytes());
  EXPECT_EQ(j["nvme"]["reserved_bytes"], want.reserved_bytes());
  EXPECT_EQ(j["nvme"]["block_bytes"], want.block_bytes);
  EXPECT_EQ(j["nvme"]["buffers"], want.buffers);
  // What the plan says of it: the same, beside its planned peak.
  const RunResult p = run_memwall("simulate --graph " + *dir_ + "/inf_graph.json --plan " + *dir_ +
                                  "/inf.json --gpu l4 --json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json s = nlohmann::json::parse(p.out);
  EXPECT_EQ(s["nvme"]["reserved_bytes"], want.reserved_bytes());
  EXPECT_EQ(s["nvme"]["planned_peak_bytes"], j["nvme"]["planned_peak_bytes"]);
  EXPECT_LE(want.bytes, want.reserved_bytes());
  EXPECT_TRUE(fs::is_empty(swap));
}

// A run of many steps is interrupted once its engine holds a swap file.
// Without --keep-values it traces for its values first, into $TMPDIR.
void interrupted_run_leaves_nothing(const std::string& dir, const std::string& args,
                                    int signal_number, bool trace) {
  const std::string swap = dir + "/swap", tmp = dir + "/tmp";
  for (const std::string& d : {swap, tmp}) {
    fs::remove_all(d);
    fs::create_directories(d);
  }
  // infinity_plan's arguments, with many steps; a trace runs as many eager
  // steps for its reference first, so only 20 then: the engine's swap file
  // is open for their ~4 s (0.2 s a step here), a window the signal must
  // land in even when the machine is loaded (with 3 steps, ~1 s, a loaded
  // CI run once finished before it).
  const std::vector<std::string> given = words(args);
  std::vector<std::string> argv = {"run", "--steps", trace ? "20" : "100000", "--nvme-dir", swap};
  for (size_t i = 0; i + 1 < given.size(); i += 2) {
    if (given[i] == "--steps" || (trace && given[i] == "--keep-values")) continue;
    argv.insert(argv.end(), {given[i], given[i + 1]});
  }
  const Spawned s = spawn_memwall(argv, {"TMPDIR=" + tmp}, dir + "/log");
  if (!wait_for([&] { return holds_swap_file(s.pid, swap); }, 120)) {
    ::kill(s.pid, SIGKILL);
    ::waitpid(s.pid, nullptr, 0);
    FAIL() << "the run never started its NVMe engine: " << slurp(dir + "/log");
  }
  if (trace) {
    EXPECT_FALSE(fs::is_empty(tmp)) << "no trace in $TMPDIR to leave";
  }
  ASSERT_EQ(::kill(s.pid, signal_number), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(s.pid, &status, 0), s.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number)
      << "wait status " << status << ": " << slurp(dir + "/log");
  EXPECT_TRUE(fs::is_empty(swap)) << fs::directory_iterator(swap)->path();
  // Only memwall's own: torch keeps a cache there (torchinductor_USER).
  for (const auto& e : fs::directory_iterator(tmp)) {
    EXPECT_FALSE(e.path().filename().string().starts_with("memwall")) << e.path();
  }
}

TEST_F(RunNvme, SigintLeavesNoSwapFile) {
  REQUIRE_EXECUTOR();
  interrupted_run_leaves_nothing(fresh("sigint"), *args_, SIGINT, /*trace=*/false);
}

TEST_F(RunNvme, SigtermLeavesNoSwapFileNorTrace) {
  REQUIRE_EXECUTOR();
  interrupted_run_leaves_nothing(fresh("sigterm"), *args_, SIGTERM, /*trace=*/true);
}

TEST_F(RunNvme, SigkillLeavesNoSwapFileAndTheNextRunRemovesAStaleOne) {
  REQUIRE_EXECUTOR();
  const std::string dir = fresh("sigkill");
  interrupted_run_leaves_nothing(dir, *args_, SIGKILL, /*trace=*/false);
  // A file a killed run of an older memwall left: its process is gone.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string stale =
      dir + "/swap/memwall-swap-" + std::to_string(dead) + "-00000000deadbeef.bin";
  std::ofstream(stale) << std::string(12345, 'x');
  const RunResult r = run_memwall("run " + *args_ + " --nvme-dir " + dir + "/swap --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "memwall: note: removed 1 stale swap file (12345 B) of a process that is gone: " +
                stale + "\n");
  EXPECT_TRUE(fs::is_empty(dir + "/swap"));
}

}  // namespace
}  // namespace memwall::testing
