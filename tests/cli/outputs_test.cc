// The verbs' outputs end to end: checked before the work, all or none, the
// user's links, FIFOs and own standard output respected, and nothing left
// behind by an interrupted command (issues 17 and 45; Note [Output files],
// Note [Interrupt cleanup]). Nodes are made in private directories only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "memwall/graph/graph.h"
#include "run_memwall.h"
#include "test_util.h"

extern char** environ;

namespace memwall::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_script(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  fs::permissions(path, fs::perms::owner_all);
}

TEST(Outputs, AnUnwritableLaterOutputStopsTheCommandBeforeTheWork) {
  // `--svg /proc/x.svg` used to fail after the plan had been written.
  const fs::path dir = fresh_dir();
  const std::string plan = (dir / "plan.json").string();
  RunResult r = run_memwall("plan --model gpt2-small --out " + plan + " --svg /proc/x.svg");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: cannot write /proc/x.svg: No such file or directory\n");
  EXPECT_TRUE(r.out.empty());
  EXPECT_TRUE(names_in(dir).empty());
}

TEST(Outputs, EveryOutputOfAPlanIsWrittenAndNothingElse) {
  const fs::path dir = fresh_dir();
  RunResult r = run_memwall("plan --model gpt2-small --batch 2 --budget 4GiB --out " +
                            (dir / "p.json").string() + " --trace " + (dir / "t.json").string() +
                            " --svg " + (dir / "m.svg").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"m.svg", "p.json", "t.json"}));
}

TEST(Outputs, ExportThroughALinkKeepsTheLink) {
  const fs::path dir = fresh_dir();
  fs::create_symlink("graph.json", dir / "link.json");
  RunResult r = run_memwall("inspect --model gpt2-small --export " + (dir / "link.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(read_graph_file((dir / "graph.json").string()).name, "gpt2-small b8 s1024 bf16");
}

TEST(Outputs, ExportToTheProcesssOwnStdoutFollowsWhatItPrinted) {
  // A private link to /proc/self/fd/1 stands for /dev/stdout. run_memwall
  // sends stdout to a regular file, which a rename would have replaced.
  const fs::path dir = fresh_dir();
  fs::create_symlink("/proc/self/fd/1", dir / "stdout");
  RunResult r = run_memwall("inspect --model gpt2-small --batch 1 --seq 64 --json --export " +
                            (dir / "stdout").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The graph, then the verb's own JSON: two documents on one stream.
  const size_t second = r.out.find("\n{\n  \"");
  ASSERT_NE(second, std::string::npos) << r.out.substr(0, 200);
  const Graph g = graph_from_json_text(std::string_view(r.out).substr(0, second + 1));
  EXPECT_EQ(g.name, "gpt2-small b1 s64 bf16");
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(second + 1)).at("graph"), g.name);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"stdout"});
}

TEST(Outputs, FifoReaderGetsTheGraph) {
  const fs::path dir = fresh_dir();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo.string()); });
  RunResult r = run_memwall("inspect --model gpt2-small --export " + fifo.string());
  reader.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(graph_from_json_text(got).name, "gpt2-small b8 s1024 bf16");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(Outputs, DirectoryGetsOneLine) {
  const fs::path dir = fresh_dir();
  RunResult r = run_memwall("inspect --export " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: cannot write " + dir.string() + ": it is a directory\n");
}

// Sends `signal_number` to memwall, which dies of it, and its child (whose
// pid is in `child_pid`) with it.
void interrupt(const Spawned& s, int signal_number, const fs::path& child_pid) {
  const pid_t child = std::stoi(slurp(child_pid.string()));
  ASSERT_EQ(::kill(s.pid, signal_number), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(s.pid, &status, 0), s.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number) << status;
  EXPECT_EQ(::kill(child, 0), -1) << "the tracer's child outlived memwall";
}

// `memwall trace` with a stand-in interpreter that records its pid and
// sleeps: while it sleeps, memwall holds the --out temporary and its
// private directory, and is interrupted.
void interrupted_trace_leaves_nothing(int signal_number) {
  const fs::path dir = fresh_dir();
  fs::create_directories(dir / "out");
  fs::create_directories(dir / "tmp");
  write_script(dir / "python",
               "#!/bin/sh\necho $$ > " + (dir / "child.pid").string() + "\nexec sleep 60\n");
  const Spawned s = spawn_memwall(
      {"trace", "--torchvision", "resnet18", "--out", (dir / "out" / "g.json").string()},
      {"MEMWALL_PYTHON=" + (dir / "python").string(), "TMPDIR=" + (dir / "tmp").string()},
      dir / "log");
  ASSERT_TRUE(wait_for([&] {
    return fs::exists(dir / "child.pid") && fs::file_size(dir / "child.pid") > 0 &&
           names_in(dir / "out").size() == 1 && names_in(dir / "tmp").size() == 1;
  })) << "memwall trace never started its child";
  ASSERT_NO_FATAL_FAILURE(interrupt(s, signal_number, dir / "child.pid"));
  EXPECT_TRUE(names_in(dir / "out").empty());  // the temporary of g.json
  EXPECT_TRUE(names_in(dir / "tmp").empty());  // the tracer's private directory
}

TEST(Outputs, SigintRemovesTemporariesAndTheChild) { interrupted_trace_leaves_nothing(SIGINT); }
TEST(Outputs, SigtermRemovesTemporariesAndTheChild) { interrupted_trace_leaves_nothing(SIGTERM); }

// `memwall run` in one go (trace, plan, run) with a stand-in interpreter
// that starts on the values, records its pid and sleeps: interrupted while
// it traces, the run leaves no memwall-trace-* in $TMPDIR, its values/
// included (issue 45).
void interrupted_run_trace_leaves_nothing(int signal_number) {
  const fs::path dir = fresh_dir();
  fs::create_directories(dir / "tmp");
  write_script(dir / "python",
               "#!/bin/sh\n"
               "while [ $# -gt 0 ]; do [ \"$1\" = --values ] && values=$2; shift; done\n"
               "mkdir -p \"$values\" && echo 0 > \"$values/state.bin.tmp\" && "
               "echo 0 > \"$values/state.json\" || exit 1\n"
               "echo $$ > " +
                   (dir / "child.pid").string() + "\nexec sleep 60\n");
  const Spawned s = spawn_memwall(
      {"run", "--builtin", "gpt-mini", "--gpu", "l4"},
      {"MEMWALL_PYTHON=" + (dir / "python").string(), "TMPDIR=" + (dir / "tmp").string()},
      dir / "log");
  ASSERT_TRUE(wait_for([&] {
    return fs::exists(dir / "child.pid") && fs::file_size(dir / "child.pid") > 0;
  })) << "memwall run never started its tracer: "
      << slurp((dir / "log").string());
  ASSERT_NO_FATAL_FAILURE(interrupt(s, signal_number, dir / "child.pid"));
  EXPECT_TRUE(names_in(dir / "tmp").empty()) << "left in $TMPDIR: " << names_in(dir / "tmp")[0];
}

TEST(Outputs, SigintWhileARunTracesLeavesNoValues) { interrupted_run_trace_leaves_nothing(SIGINT); }
TEST(Outputs, SigtermWhileARunTracesLeavesNoValues) {
  interrupted_run_trace_leaves_nothing(SIGTERM);
}

}  // namespace
}  // namespace memwall::testing
