// What the NVMe engine leaves in its directories: nothing, however its
// process ends (Note [Swap files without names]), and what it finds there
// from a process that is gone, it removes and says so (Note [Stale swap
// files]). Issue 45.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "memwall/runtime/nvme_engine.h"
#include "memwall/runtime/swap_dir.h"
#include "runtime/nvme_test_util.h"

namespace memwall::runtime {
namespace {

using testing_nvme::TempDir;

NvmeOptions options_in(const std::string& dir) {
  NvmeOptions o;
  o.dirs = {dir};
  o.capacity = 4 << 20;
  o.faults = "";
  return o;
}

// A pid no process has now: a child's that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  EXPECT_GT(pid, 0);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(kill(pid, 0), -1);
  return pid;
}

void write_bytes(const std::string& path, size_t n) {
  std::ofstream(path, std::ios::binary) << std::string(n, 'x');
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(SwapFiles, SigkillLeavesNothingInTheDirectory) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    NvmeEngine engine(options_in(dir.path()));
    const std::vector<uint8_t> data(1 << 20, 7);
    (void)engine.write(data.data(), data.size());
    if (write(ready[1], "1", 1) != 1) _exit(1);
    pause();  // until killed
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the child's engine did not start";
  close(ready[0]);
  EXPECT_TRUE(dir.entries().empty()) << "a swap file has a name while its engine runs";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SwapFiles, StaleFilesOfDeadProcessesAreRemovedAtStart) {
  TempDir dir;
  const pid_t dead = dead_pid();
  const std::string stale = "memwall-swap-" + std::to_string(dead) + "-0123456789abcdef.bin";
  const std::string locked = "memwall-swap-" + std::to_string(dead) + "-fedcba9876543210.bin";
  const std::string live = "memwall-swap-" + std::to_string(getppid()) + "-0123456789abcdef.bin";
  const std::string odd = "memwall-swap-" + std::to_string(dead) + "-0123456789abcdeg.bin";
  const std::string link = "memwall-swap-" + std::to_string(dead) + "-aaaaaaaaaaaaaaaa.bin";
  for (const std::string& name : {stale, locked, live, odd, std::string("notes.txt")}) {
    write_bytes(dir.path() + "/" + name, 5000);
  }
  ASSERT_EQ(symlink("notes.txt", (dir.path() + "/" + link).c_str()), 0);
  // A file locked by a live process (here, this one through another
  // open file) is in use, whatever pid its name says.
  const int held = open((dir.path() + "/" + locked).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  {
    NvmeEngine engine(options_in(dir.path()));
    EXPECT_EQ(engine.stats().note,
              "removed 1 stale swap file (5000 B) of a process that is gone: " + dir.path() + "/" +
                  stale);
  }
  EXPECT_EQ(sorted(dir.entries()), sorted({locked, live, odd, link, "notes.txt"}));
  close(held);
  {
    NvmeEngine engine(options_in(dir.path()));
    EXPECT_EQ(engine.stats().note,
              "removed 1 stale swap file (5000 B) of a process that is gone: " + dir.path() + "/" +
                  locked);
  }
  NvmeEngine again(options_in(dir.path()));
  EXPECT_EQ(again.stats().note, "");
  EXPECT_EQ(sorted(dir.entries()), sorted({live, odd, link, "notes.txt"}));
}

TEST(SwapFiles, TheNoteCountsAndNamesAFew) {
  StaleSwapFiles none;
  EXPECT_EQ(stale_swap_note(none), "");
  StaleSwapFiles many{{"/d/a", "/d/b", "/d/c", "/d/e", "/d/f"}, uint64_t{5} << 30};
  EXPECT_EQ(stale_swap_note(many),
            "removed 5 stale swap files (5.00 GiB) of processes that are gone: /d/a, /d/b, /d/c "
            "and 2 more");
}

}  // namespace
}  // namespace memwall::runtime
