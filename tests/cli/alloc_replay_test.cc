// `memwall alloc-replay` / `memwall bench alloc` end to end. The
// allocation traces they replay (alloc_trace.h) are tested in
// tests/planner/alloc_trace_test.cc.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall {
namespace {

using testing::count_lines;
using testing::run_memwall;

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
