// Shared checks of the executor's tests (tests/exec): whether the executor
// can run here, where a test keeps its files, and what every run must show.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_memwall.h"
#include "importers/torch_env.h"
#include "memwall/graph/graph.h"
#include "memwall/importers/torch_trace.h"
#include "shared_traces.h"
#include "test_util.h"

namespace memwall::testing {

// Note [The executor under sanitizers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libmemwall_exec.so is built in the ASan + UBSan build too (memwall's
// executor, arena, device memory, copies and ranks instrumented; libtorch,
// which it calls, is not), and a representative subset of the executor's
// tests runs there, as Note [Zoo sweeps under sanitizers] runs the
// planners' sweeps on a subset: every planner's plan of one CNN run three
// steps (remat, swap, offload, ZeRO-Infinity's NVMe), bf16 ZeRO-Offload of
// a Hugging Face model (the CPU optimizer step), two data-parallel ranks
// (gloo, child processes), the NVMe engine's reservation, and values from
// memory through the library API. The Release build runs every test.
//
// Under ASan the executor is loaded without RTLD_DEEPBIND, which the
// sanitizer runtime refuses (src/exec/api/library.cc), so libtorch's BLAS
// calls bind to the reference BLAS that CBC brings into the memwall
// process (Note [Executor symbols]), and the weights after an update
// differ from eager PyTorch's in their last bits. There check_run asks for
// the run to finish with eager's losses to a relative 1e-5 instead of the
// same bits; the Release build asks for the bits.
inline bool in_executor_sanitizer_subset() {
  if (!kAsan) return true;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  const ::testing::TestInfo* test = unit.current_test_info();
  // In a suite's set-up, whether any of its tests is in the subset.
  const std::string name = test != nullptr
                               ? std::string(test->test_suite_name()) + "." + test->name()
                           : unit.current_test_suite() != nullptr
                               ? std::string(unit.current_test_suite()->name()) + "."
                               : std::string("-");
  for (const char* t : {"RunExec.CnnWithBatchNormEveryPlannerIsEagerBitForBit",
                        "RunExec.Bf16ZeroOffloadIsEagerBitForBit",
                        "RunRanks.CnnWithBatchNormIsEagerBitForBit",
                        "RunNvme.TheRunReservesWhatThePlanSays",
                        "RunInMemory.ValuesInMemoryRunAsTheirFilesDo"}) {
    if (name == t || (name.ends_with('.') && std::string_view(t).starts_with(name))) return true;
  }
  return false;
}

// Whether this test can run the executor here: the library is built and,
// under a sanitizer, the test is in the subset above.
inline bool executor_built() {
  return in_executor_sanitizer_subset() &&
         std::filesystem::exists(std::filesystem::path(MEMWALL_BINARY).parent_path() /
                                 "libmemwall_exec.so");
}

// Note [Finding, not importing] (importers/torch_env.h).
inline bool torch_importable() {
  static const bool ok = tracer_has("torch, torchvision, transformers");
  return ok;
}

#define REQUIRE_EXECUTOR()                                                                 \
  do {                                                                                     \
    if (!executor_built()) {                                                               \
      GTEST_SKIP() << (in_executor_sanitizer_subset()                                      \
                           ? "no libmemwall_exec.so beside " + std::string(MEMWALL_BINARY) + \
                                 ": the executor is built only against memwall's Python "  \
                                 "environment with torch (src/exec/CMakeLists.txt)"         \
                           : std::string("runs in the Release build only (Note [The "       \
                                         "executor under sanitizers])"));                  \
    }                                                                                      \
    if (!torch_importable()) {                                                             \
      GTEST_SKIP() << "torch / torchvision / transformers are not importable by "          \
                   << importers::tracer_python();                                          \
    }                                                                                      \
  } while (0)

inline std::string models(const std::string& function) {
  return std::string(MEMWALL_SOURCE_DIR) + "/tests/exec/models.py:" + function;
}

inline std::string dir_for(const std::string& tag) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("memwall_run_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

// Note [Shared test traces]: the CNN with batch norm, traced once for
// every test process, copied to a directory of the suite's own (its tests
// write their files beside it); "" where the executor cannot run.
inline std::string kept_cnn_bn(const std::string& tag) {
  if (!executor_built() || !torch_importable()) return {};
  const std::string shared =
      shared_trace("run-kept-cnn_bn", "run --script " + models("cnn_bn") + " --gpu l4 --steps 1");
  EXPECT_FALSE(shared.empty());
  if (shared.empty()) return {};
  const std::string dir = dir_for(tag);
  EXPECT_TRUE(copy_shared_trace(shared, dir));
  return dir;
}

// ZeRO-Infinity's plan of the kept graph in `dir` (model states on NVMe),
// and the arguments that run it for a step from the kept values.
inline std::string infinity_plan(const std::string& dir) {
  const std::string graph = dir + "/graph.json";
  const uint64_t peak = memory_profile(read_graph_file(graph)).peak_bytes;
  const RunResult r = run_memwall(
      "plan --graph " + graph + " --gpu l4 --strategy zero-infinity --out " + dir +
      "/inf.json --out-graph " + dir + "/inf_graph.json --budget " + std::to_string(peak));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return "--graph " + dir + "/inf_graph.json --plan " + dir + "/inf.json --keep-values " + dir +
         " --steps 1 --budget " + std::to_string(peak * 2);
}

// One run's JSON; checks what every run must show: eager's bits, the
// budget kept, the device peak the simulator predicted (within 1% for
// plans without swaps: a swap's release time depends on the copy's real
// speed, docs/exec.md). A laid-out plan's device memory is its arena: the
// simulator predicts the arena (an op's outputs and its scratch's span,
// Note [Workspace span]), which the live bytes can stay below (ResNet-18
// b4 at 64x64 on AVX2: live 0.964 of the arena, whose GEMM weight gradients
// free their scratch before making their outputs).
inline nlohmann::json check_run(const RunResult& r, const std::string& what, uint64_t budget = 0) {
  // Note [The executor under sanitizers]: under ASan eager's bits differ
  // (exit 1 with the JSON), its losses do not.
  const bool other_bits = kAsan && r.exit_code == 1 && !r.out.empty();
  if (!other_bits) {
    EXPECT_EQ(r.exit_code, 0) << what << ": " << r.err;
  }
  if (r.exit_code != 0 && !other_bits) return {};
  // torch's profiler (the tracer measures CPU scratch with it) logs its
  // start and stop on fd 2; quiet_native_stderr (python/memwall/errors.py)
  // keeps them from the user's terminal.
  EXPECT_EQ(r.err.find("USDT:"), std::string::npos) << what << ": " << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  if (!kAsan) {
    EXPECT_EQ(j.value("eager_equal", false), true) << what << ": " << j.dump(2);
  }
  if (budget == 0) budget = j.at("budget").get<uint64_t>();
  for (const nlohmann::json& step : j.at("steps")) {
    const bool laid_out = j.at("policy") == "plan offsets";
    const auto measured = laid_out ? step.at("arena_bytes").get<double>()
                                   : step.at("device_peak_bytes").at("measured").get<double>();
    // A laid-out plan's device memory is its arena, which the plan pins
    // (above the live peak where the layout fragments: Note [Plans that
    // run] plans again for less until one fits the budget).
    const auto predicted = laid_out ? j.at("planned_arena_bytes").get<double>()
                                    : step.at("device_peak_bytes").at("predicted").get<double>();
    EXPECT_LE(measured, static_cast<double>(budget)) << what;
    if (step.at("bytes_moved").at("d2h").at("predicted").get<uint64_t>() == 0) {
      EXPECT_NEAR(measured / predicted, 1.0, 0.01) << what << " step " << step.at("step");
    }
    if (kAsan) {
      const double eager = step.at("eager_loss").get<double>();
      EXPECT_NEAR(step.at("loss").get<double>(), eager, 1e-5 * std::abs(eager)) << what;
    } else {
      EXPECT_EQ(step.at("loss"), step.at("eager_loss")) << what;
    }
    // Note [The run's own kernels] (src/sim/run_kernels.cc): timed from the second
    // step, one rank's.
    const bool own = j.at("steps").size() > 1 && j.at("ranks") == 1;
    EXPECT_EQ(step.at("step_time_s").contains("predicted_with_run_kernels"), own) << what;
    if (own) {
      EXPECT_GT(step.at("step_time_s").at("predicted_with_run_kernels").get<double>(), 0) << what;
    }
    for (const char* side : {"measured", "predicted"}) {
      const double overlap = step.at("transfer_overlap").at(side).get<double>();
      EXPECT_TRUE(overlap >= 0 && overlap <= 1) << what << " " << side << " " << overlap;
    }
  }
  return j;
}

// A refusal: exit `code`, one line on standard error that says `says`.
inline void expect_one_line(const RunResult& r, int code, const std::string& says) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace memwall::testing
