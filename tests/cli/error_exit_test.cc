// How an error that ends a verb reaches the user (memwall::cli::error_exit,
// issue 46): one line with the exit code of its kind, 2 for bad input and 1
// for a run that failed. The allocator's and the NVMe engine's own errors
// are provoked here directly: every verb that feeds them the user's input
// converts them into memwall::Error first (alloc-replay, bench offload,
// calibrate), so what reaches the command's last catch is a failed run.
#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"
#include "memwall/base/error.h"
#include "memwall/cli/cli.h"
#include "memwall/runtime/nvme_engine.h"

namespace memwall::cli {
namespace {

template <typename F>
ErrorExit exit_of(F&& f) {
  try {
    f();
  } catch (...) {
    return error_exit(std::current_exception());
  }
  ADD_FAILURE() << "no exception";
  return {};
}

size_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

TEST(ErrorExit, BadInputIsOneLineWithCode2) {
  const ErrorExit e = exit_of([] { fail("unknown model '{}'", "gpt-9"); });
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.text, "memwall: error: unknown model 'gpt-9'\n");
}

TEST(ErrorExit, NotesFollowTheErrorLine) {
  const ErrorExit e = exit_of([] { throw Error("no plan fits", {"batch 2 needs 3 GB"}); });
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.text, "memwall: error: no plan fits\nmemwall: note: batch 2 needs 3 GB\n");
}

TEST(ErrorExit, RunningOutOfMemoryIsBadInput) {
  const ErrorExit e = exit_of([] { throw std::bad_alloc(); });
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.text, "memwall: error: out of memory (input too large)\n");
}

TEST(ErrorExit, TheAllocatorsErrorIsAFailedRunNotAnInternalError) {
  // A real one: the allocator asked for a policy it does not have.
  const ErrorExit e = exit_of([] {
    auto device = alloc::make_sim_device(uint64_t{1} << 30);
    (void)alloc::make_allocator("no-such-policy", *device, {});
  });
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(lines(e.text), 1u) << e.text;
  EXPECT_EQ(e.text.rfind("memwall: error: unknown allocator policy \"no-such-policy\"", 0), 0u)
      << e.text;
  EXPECT_EQ(e.text.find("internal error"), std::string::npos) << e.text;
}

TEST(ErrorExit, TheNvmeEnginesErrorIsAFailedRunNotAnInternalError) {
  // A real one: an engine with nowhere to put its swap files.
  const ErrorExit e = exit_of([] { runtime::NvmeEngine engine(runtime::NvmeOptions{}); });
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.text, "memwall: error: nvme: no swap directory given (NvmeOptions::dirs)\n");
}

TEST(ErrorExit, AnythingElseIsAnInternalErrorWithCode1) {
  const ErrorExit e = exit_of([] { throw std::logic_error("index out of range"); });
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.text, "memwall: error: internal error: index out of range\n");
  const ErrorExit unknown = exit_of([] { throw 7; });
  EXPECT_EQ(unknown.code, 1);
  EXPECT_EQ(unknown.text, "memwall: error: internal error: an exception of unknown type\n");
}

TEST(ErrorExit, AMessageWithLineBreaksStaysOneLine) {
  const ErrorExit e = exit_of([] { throw alloc::Error("host-vmm: mmap failed\nsecond line\n"); });
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.text, "memwall: error: host-vmm: mmap failed; second line\n");
  const ErrorExit noted = exit_of([] { throw Error("a\r\nb", {"c\nd"}); });
  EXPECT_EQ(noted.text, "memwall: error: a; b\nmemwall: note: c; d\n");
}

}  // namespace
}  // namespace memwall::cli
