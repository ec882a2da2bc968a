// Allocation traces (alloc_trace.h) and `memwall alloc-replay` /
// `memwall bench alloc` end to end.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/planner/alloc_trace.h"
#include "memwall/planner/plan_layout.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall {
namespace {

using testing::count_lines;
using testing::run_memwall;

// A device no replay here fills. Not larger: expandable segments reserve
// address ranges of the device's size.
constexpr uint64_t kHuge = uint64_t{64} << 30;

// The most bytes requested at once in a replay of the default schedule is
// the default schedule's peak, exactly: the trace has every buffer and every
// op's workspace, and frees come before allocations at equal times.
TEST(AllocTrace, DefaultScheduleReplaysToTheGraphsPeak) {
  for (const char* model : {"gpt2-small", "resnet50", "mobilenetv2"}) {
    const Graph graph = build_model(model, {});
    const AllocTrace trace = graph_alloc_trace(graph);
    const uint64_t peak = memory_profile(graph).peak_bytes;
    EXPECT_EQ(peak_live_bytes(trace), peak) << model;
    for (const char* policy : {"caching", "expandable", "stitching"}) {
      const PolicyReplay r = replay_policy(trace, policy, kHuge);
      ASSERT_TRUE(r.result.fits) << model << " " << policy;
      EXPECT_EQ(r.result.stats.peak_requested_bytes, peak) << model << " " << policy;
      EXPECT_GE(r.result.stats.peak_reserved_bytes, peak) << model << " " << policy;
    }
  }
}

TEST(AllocTrace, EventsFreeBeforeTheyAllocateAtTheSameTime) {
  const LayoutCsv csv = layout_from_csv("id,lower,upper,size\n7,0,2,100\n8,2,3,50\n9,1,3,10\n");
  const AllocTrace trace = csv_alloc_trace(csv, "tiny");
  const std::vector<alloc::ReplayEvent> events = replay_events(trace);
  using K = alloc::ReplayEvent::Kind;
  // Allocations are numbered in input order: 7 -> 0, 8 -> 1, 9 -> 2.
  const std::vector<std::pair<K, uint64_t>> expected = {{K::alloc, 0}, {K::alloc, 2}, {K::free, 0},
                                                        {K::alloc, 1}, {K::free, 1},  {K::free, 2}};
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].kind, expected[i].first) << i;
    EXPECT_EQ(events[i].id, expected[i].second) << i;
  }
  EXPECT_EQ(events[1].bytes, 10u);
  EXPECT_EQ(peak_live_bytes(trace), 110u);
}

// A CSV's own offsets are the plan policy's layout, which then reserves
// exactly the arena (rounded to a chunk).
TEST(AllocTrace, PlanPolicyUsesTheCsvsOffsets) {
  const LayoutCsv csv =
      layout_from_csv("id,lower,upper,size,offset\n1,0,2,4096,0\n2,1,3,4096,4096\n3,3,5,8192,0\n");
  AllocTrace trace = csv_alloc_trace(csv, "offsets");
  ASSERT_TRUE(trace.layout.has_value());
  EXPECT_EQ(trace.layout->arena, 8192u);
  const PolicyReplay r = replay_policy(trace, "plan", kHuge, {}, 4096);
  ASSERT_TRUE(r.result.fits);
  EXPECT_EQ(r.result.stats.peak_reserved_bytes, 8192u);
}

// A plan's stays: every swap-in or recompute is an allocation of its own,
// and the plan policy keeps one address per buffer, from memwall's layout.
TEST(AllocTrace, RematPlanReplaysThroughEveryPolicy) {
  const Graph graph = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const Hardware hw = find_gpu("a100-80g");
  const SimResult keep_all =
      simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw, {.record_curves = false});
  const uint64_t budget = device_peak(keep_all) * 95 / 100;
  const RematResult remat = plan_memwall(graph, hw, budget, {});
  const SimResult sim =
      simulate(graph, remat.plan, hw, {.record_curves = false, .record_residency = true});
  ASSERT_TRUE(sim.valid);
  AllocTrace trace = plan_alloc_trace(graph, remat.plan, sim);
  EXPECT_GT(trace.allocations.size(), trace.layout_problem.buffers.size());  // recomputes
  // Residencies leave workspace out: at most the simulator's peak.
  EXPECT_LE(peak_live_bytes(trace), device_peak(sim));
  add_layout(trace, 1.0);
  for (const std::string_view policy : alloc::policy_names()) {
    const PolicyReplay r = replay_policy(trace, policy, kHuge);
    EXPECT_TRUE(r.result.fits) << policy;
    EXPECT_EQ(r.result.stats.peak_requested_bytes, peak_live_bytes(trace)) << policy;
  }
}

TEST(CliAllocReplay, ReportsEveryPolicyAsJson) {
  const auto r = run_memwall("alloc-replay --model resnet50 --batch 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const uint64_t peak = memory_profile(build_model("resnet50", {.batch = 8})).peak_bytes;
  EXPECT_EQ(j["peak_live"].get<uint64_t>(), peak);
  ASSERT_EQ(j["policies"].size(), 4u);
  for (const auto& p : j["policies"]) {
    EXPECT_TRUE(p["fits"].get<bool>()) << p["policy"];
    EXPECT_EQ(p["peak_requested"].get<uint64_t>(), peak) << p["policy"];
    EXPECT_GE(p["peak_reserved"].get<uint64_t>(), p["peak_requested"].get<uint64_t>());
  }
  EXPECT_EQ(j["policies"][3]["policy"], "plan");
}

TEST(CliAllocReplay, ACapacityBelowThePeakDoesNotFit) {
  const auto r = run_memwall(
      "alloc-replay --model resnet50 --batch 8 --policy caching "
      "--capacity 256MiB");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("no: out of memory at event"), std::string::npos) << r.out;
}

// A model larger than the GPU: every policy runs out of memory and reports
// what it would need (the stitching policy's re-run without a limit used to
// stop the verb with "sim: address space exhausted", Note [Growable range
// size]).
TEST(CliAllocReplay, AModelThatDoesNotFitIsOutOfMemoryUnderEveryPolicy) {
  const auto text = run_memwall("alloc-replay --model llama2-7b");
  EXPECT_EQ(text.exit_code, 1) << text.err;
  EXPECT_TRUE(text.err.empty()) << text.err;
  size_t rows = 0;
  for (size_t at = text.out.find("no: out of memory at event"); at != std::string::npos;
       at = text.out.find("no: out of memory at event", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 4u) << text.out;
  const auto r = run_memwall("alloc-replay --model llama2-7b --json");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const uint64_t live = j["peak_live"].get<uint64_t>();
  const uint64_t capacity = j["capacity"].get<uint64_t>();
  EXPECT_GT(live, capacity);
  ASSERT_EQ(j["policies"].size(), 4u);
  for (const auto& p : j["policies"]) {
    EXPECT_FALSE(p["fits"].get<bool>()) << p["policy"];
    EXPECT_TRUE(p.contains("failed_event")) << p["policy"];
    EXPECT_LE(p["peak_reserved"].get<uint64_t>(), capacity) << p["policy"];
    EXPECT_GE(p["peak_reserved_unlimited"].get<uint64_t>(), live) << p["policy"];
  }
}

TEST(CliAllocReplay, ReplaysAPlanFile) {
  const std::string plan =
      ::testing::TempDir() + "memwall_alloc_plan_" + std::to_string(::getpid()) + ".json";
  ASSERT_EQ(run_memwall("plan --model gpt2-small --batch 2 --seq 256 --budget 95%peak "
                        "--strategy remat --out " +
                        plan)
                .exit_code,
            0);
  const auto r = run_memwall("alloc-replay --model gpt2-small --batch 2 --seq 256 --plan " + plan +
                             " --policy stitching --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["input"], plan);
  std::remove(plan.c_str());
}

TEST(CliAllocReplay, BadInputGetsOneLineAndExitCode2) {
  const std::string csv = write_temp("bad.csv", "id,lower,upper,size\n1,5,2,10\n");
  for (const std::string& args : std::vector<std::string>{
           "alloc-replay --model gpt2-small --policy fastest",
           "alloc-replay --model gpt2-small --granularity 3000", "alloc-replay --model nope",
           "alloc-replay --model gpt2-small --capacity 0", "alloc-replay --csv " + csv,
           "alloc-replay --csv " + csv + " --plan p.json",
           "alloc-replay --model gpt2-small --layout-time -1", "alloc-replay --csv /no/such.csv"}) {
    const auto r = run_memwall(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  std::remove(csv.c_str());
}

constexpr uint64_t kPiB = uint64_t{1} << 50;

// A buffer larger than the whole device fits under no policy: said at once,
// in one line naming it, its size and the capacity, with alloc-replay's exit
// code for a trace that does not fit.
TEST(CliAllocReplay, ABufferLargerThanTheDeviceFitsNoPolicy) {
  const std::string pib = write_temp(
      "pib.csv", "id,lower,upper,size\n0,0,2,1048576\n7,1,3," + std::to_string(kPiB) + "\n");
  const std::string e62 =
      write_temp("e62.csv", "id,lower,upper,size\n3,0,2," + std::to_string(kMaxBytes) + "\n");
  const std::string both =
      write_temp("both.csv", "id,lower,upper,size\n1,0,2," + std::to_string(kMaxBytes) +
                                 "\n2,1,3," + std::to_string(kMaxBytes) + "\n");
  const std::pair<std::string, std::string> cases[] = {
      {"--csv " + pib,
       pib + ": buffer 7 of 1,125,899,906,842,624 B (1.00 PiB) is larger than the device's "
             "capacity of 85,899,345,920 B (80.00 GiB)"},
      {"--csv " + e62 + " --json",
       e62 + ": buffer 3 of 4,611,686,018,427,387,904 B (4.00 EiB) is larger than the device's "
             "capacity of 85,899,345,920 B (80.00 GiB)"},
      {"--csv " + pib + " --capacity 1000000000000001 --granularity 4096",
       pib + ": buffer 7 of 1,125,899,906,842,624 B (1.00 PiB) is larger than the device's "
             "capacity of 1,000,000,000,000,000 B (909.49 TiB) (in whole 4.00 KiB chunks)"},
      {"--csv " + both + " --capacity 4611686018427387904",
       both + ": more than 2^62 bytes are live at once, more than the device's "
              "4,611,686,018,427,387,904 B (4.00 EiB)"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_memwall("alloc-replay " + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err, "memwall: does not fit under any policy: " + expected + "\n") << args;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  for (const std::string& path : {pib, e62, both}) std::remove(path.c_str());
}

// Buffers of 1 PiB and 2^62 bytes replay on devices that hold them, every
// policy, without the cost growing with the bytes (the simulated device and
// the allocators keep runs of chunks, Note [Chunk runs]; the run takes a
// few milliseconds rather than running out of memory).
TEST(CliAllocReplay, PebibyteAndTwoToThe62ByteBuffersReplay) {
  const std::string pib = write_temp(
      "pib.csv", "id,lower,upper,size\n0,0,2,1048576\n7,1,3," + std::to_string(kPiB) + "\n");
  const std::string e62 =
      write_temp("e62.csv", "id,lower,upper,size\n3,0,2," + std::to_string(kMaxBytes) + "\n");
  // The 1 MiB buffer takes a 2 MiB chunk of its own under every policy
  // (its own segment or range; the plan's arena of 1 PiB + 1 MiB rounds up).
  const std::pair<std::string, uint64_t> cases[] = {
      {"--csv " + pib + " --capacity 4PiB", kPiB + (uint64_t{2} << 20)},
      {"--csv " + e62 + " --capacity 4611686018427387904", kMaxBytes}};
  for (const auto& [args, reserved] : cases) {
    const auto r = run_memwall("alloc-replay " + args + " --json");
    ASSERT_EQ(r.exit_code, 0) << args << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["policies"].size(), 4u);
    for (const auto& p : j["policies"]) {
      EXPECT_TRUE(p["fits"].get<bool>()) << args << " " << p["policy"];
      EXPECT_EQ(p["peak_reserved"].get<uint64_t>(), reserved) << args << " " << p["policy"];
      EXPECT_EQ(p["chunks"].get<uint64_t>(), reserved / (uint64_t{2} << 20))
          << args << " " << p["policy"];
    }
  }
  for (const std::string& path : {pib, e62}) std::remove(path.c_str());
}

// Lifetimes CSVs with nothing to replay: one line naming the file, exit code 2.
TEST(CliAllocReplay, EmptyCsvsGetOneLineNamingTheFile) {
  const std::pair<const char*, const char*> cases[] = {
      {"id,lower,upper,size\n", "no buffers (a header and no rows): nothing to replay"},
      {"", "csv: empty file (no header \"id,lower,upper,size\")"},
      {"\n\n\n", "csv: line 1: empty line where the header \"id,lower,upper,size\" belongs"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string csv = write_temp("empty.csv", text);
    const auto r = run_memwall("alloc-replay --csv " + csv);
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(r.err, "memwall: error: " + csv + ": " + expected + "\n") << text;
    EXPECT_TRUE(r.out.empty()) << r.out;
    const std::string dir =
        ::testing::TempDir() + "memwall_bench_alloc_empty_" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/toy.csv") << "id,lower,upper,size\n1,0,2,3000000\n";
    std::ofstream(dir + "/void.csv") << text;
    const auto bench = run_memwall("bench alloc --no-models --data " + dir);
    EXPECT_EQ(bench.exit_code, 2) << text;
    EXPECT_EQ(bench.err, "memwall: error: " + dir + "/void.csv: " + expected + "\n") << text;
    EXPECT_TRUE(bench.out.empty()) << bench.out;
    std::filesystem::remove_all(dir);
    std::remove(csv.c_str());
  }
}

TEST(CliBenchAlloc, ComparesPoliciesOnModelsAndCsvs) {
  const std::string dir = ::testing::TempDir() + "memwall_bench_alloc_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/toy.csv") << "id,lower,upper,size\n1,0,2,3000000\n2,1,3,5000000\n";
  // The device is twice the live peak, at most 2^62 bytes.
  std::ofstream(dir + "/whole.csv") << "id,lower,upper,size\n1,0,2," << kMaxBytes << "\n";
  const auto r = run_memwall("bench alloc --models vgg16 --data " + dir + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["inputs"].size(), 3u);
  EXPECT_EQ(j["inputs"][0]["name"], "vgg16");
  EXPECT_EQ(j["inputs"][1]["name"], "toy");
  EXPECT_EQ(j["inputs"][1]["peak_live"].get<uint64_t>(), 8000000u);
  EXPECT_EQ(j["inputs"][2]["name"], "whole");
  EXPECT_EQ(j["inputs"][2]["peak_live"].get<uint64_t>(), kMaxBytes);
  for (const auto& in : j["inputs"]) {
    ASSERT_EQ(in["policies"].size(), 4u);
    for (const auto& p : in["policies"]) EXPECT_GE(p["reserved_over_live"].get<double>(), 1.0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memwall
