// Helpers of every test executable (tests/CMakeLists.txt puts tests/ on
// their include path): sizes, and the running test's files and directories,
// whose names carry the process id (ctest runs tests in parallel, each in
// its own process).
#pragma once

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace memwall {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// True under AddressSanitizer or ThreadSanitizer (GCC's and clang's spellings).
#if defined(__has_feature)
#define MEMWALL_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define MEMWALL_TEST_HAS_FEATURE(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || MEMWALL_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif
#if defined(__SANITIZE_THREAD__) || MEMWALL_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif

// Note [Search time in tests]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Planners' searches stop at a wall-time limit (Note [Time limits are wall
// time]) and find less in less time. A test that asserts what a search
// finds, not when it returns, gives it search_seconds(s): s in the Release
// build, kSanitizerSlowdown times s under a sanitizer, which runs the
// planners 3-5x slower. Measured on a loaded 2-vCPU host: Llama-2-7B's auto
// plan (AutoPlanner.Llama7bFullFineTuningPlansOnA24GbGpu) finished its
// search in 3.3 s in Release and was cut off at its 10 s default under
// ASan+UBSan, with a worse plan. Searches that finish early return early,
// so the longer limit costs only the tests that need it.
inline constexpr double kSanitizerSlowdown = kAsan || kTsan ? 5 : 1;
inline double search_seconds(double seconds) { return seconds * kSanitizerSlowdown; }

// Note [Zoo sweeps under sanitizers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The property sweeps over the model zoo (every planner's plan valid and
// within budget, memwall never worse, the bound below every plan) run on
// every model in the Release build. Under a sanitizer, which runs the
// planners 3-5x slower and is there to catch memory errors and undefined
// behaviour rather than to check the properties again, they run on one
// model per architecture builder of src/models (GPT-2, Llama, Mixtral,
// BERT, ResNet, VGG, MobileNetV2, U-Net): every builder's graphs through
// the same planner code, 8 of the zoo's 18 models. The four sweeps took
// 500 of the ASan+UBSan run's 1,475 test-seconds on the development machine.
// The layouts of the zoo's graphs (Property.ZooModels in tests/layout) are
// checked on the same 8 (19 s of one core under ASan + UBSan, 1.6 s in
// Release, 2026-12-06).
inline bool in_sanitizer_sweep(const std::string& model) {
  if (!kAsan && !kTsan) return true;
  for (const char* m : {"gpt2-small", "llama2-7b", "mixtral-8x7b", "bert-base", "resnet50", "vgg16",
                        "mobilenetv2", "unet"}) {
    if (model == m) return true;
  }
  return false;
}

// Note [Tracer tests under sanitizers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Tests that trace a model with torch spend their time in Python (importing
// torch, running the step), which no sanitizer instruments; memwall's part
// is reading, validating and planning the graph the tracer writes, the same
// code for every model. Under a sanitizer, the tests whose assertions are
// about what the tracer writes (its kernel, lifetime and FLOP rules, other
// models' configurations, error messages Python words) skip: the Release
// build runs every one of them. At least one test of each path through
// memwall's side still runs under the sanitizers: a script (TinyCnn.*,
// CrossValidation.Gpt2Small), torchvision (CrossValidation.ResNet50, the
// sweep's subset), Hugging Face (HfTrace.Gpt2AgreesWithTheZoo, LoRA), the
// measured step (Fidelity.PredictedPeakIsWithinTargetOfTheMeasuredStep,
// Fidelity.CpuKernelScratchAndSpansOfAUNet), the tracer's errors
// (Trace.BadInputIsOneLine, TraceCli.AScriptThatExitsIsBlamed) and planning
// traced graphs (PlanTracedCli.*, ChenOnLstm.*). Together the skipped tests
// took 121 of the ASan + UBSan run's 1,253 test-seconds (2026-12-06,
// docs/development.md). The executor's tests (tests/exec) run a subset
// under ASan + UBSan: Note [The executor under sanitizers] in
// tests/exec/run_checks.h.
#define MEMWALL_SKIP_UNDER_SANITIZERS()                                           \
  do {                                                                            \
    if (::memwall::kAsan || ::memwall::kTsan) {                                   \
      GTEST_SKIP() << "runs in the Release build only (Note [Tracer tests under " \
                      "sanitizers] in tests/test_util.h)";                        \
    }                                                                             \
  } while (false)

// CPU seconds of the calling thread: what the layout solvers' limits count
// (Note [CPU-time budgets]), and unlike wall time not stretched by load.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// <gtest's TempDir>memwall_<pid>_<name>.
inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "memwall_" + std::to_string(::getpid()) + "_" + name;
}

// `text` written to temp_path(name); returns the path.
inline std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// An empty directory of the running test's own:
// <system temp>/memwall_<pid>_<suite>.<test>, '/' of parameterized names as '_'.
inline std::filesystem::path fresh_dir() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(test->test_suite_name()) + "." + test->name();
  for (char& c : name)
    if (c == '/') c = '_';
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("memwall_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace memwall
