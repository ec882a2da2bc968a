// `memwall layout` and `memwall bench layout` end to end. The property that
// ties src/layout to the simulator (a layout of a plan's residencies,
// pinned as the plan's offsets, passes the simulator's overlap check) is
// tests/planner/plan_layout_property_test.cc.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "memwall/base/output_files.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/problem.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "run_memwall.h"
#include "test_util.h"

namespace memwall {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::run_memwall;

// Three buffers whose live peak is 48 bytes at t=1..2 (a and b) and t=3 (c
// alone is 32): a at 0, b above it, c at 0 after a ends; arena 48, optimal.
const char* kSmallCsv = "id,lower,upper,size\n0,0,3,16\n1,1,4,32\n2,3,5,16\n";

TEST(CliLayout, CsvLaysOutAtTheLowerBoundAndWritesOffsets) {
  const std::string in = write_temp("small.csv", kSmallCsv);
  const std::string out = temp_path("small_out.csv");
  const auto r = run_memwall("layout --csv " + in + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["arena"], 48);
  EXPECT_EQ(j["lower_bound"], 48);
  EXPECT_EQ(j["ratio"], 1.0);
  EXPECT_TRUE(j["optimal"].get<bool>());
  EXPECT_TRUE(j["capacity"].is_null());
  const LayoutCsv written = read_layout_csv(out);
  ASSERT_TRUE(written.layout.has_value());
  EXPECT_EQ(written.layout->arena, 48u);
  EXPECT_EQ(check_layout(written.problem, *written.layout), std::nullopt);
  fs::remove(in);
  fs::remove(out);
}

TEST(CliLayout, EveryAlgorithmByName) {
  const std::string in = write_temp("algos.csv", kSmallCsv);
  for (const char* algo : {"default", "greedy-by-size", "greedy-by-breadth", "greedy-by-conflicts",
                           "best-fit-by-size", "best-fit-by-duration", "best-fit", "exact"}) {
    const auto r = run_memwall("layout --csv " + in + " --algo " + algo + " --json");
    ASSERT_EQ(r.exit_code, 0) << algo << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["algorithm"], algo);
    EXPECT_GE(j["arena"].get<uint64_t>(), 48u) << algo;
  }
  const auto unknown = run_memwall("layout --csv " + in + " --algo first-fit");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown layout algorithm 'first-fit'"), std::string::npos);
  fs::remove(in);
}

TEST(CliLayout, ACapacityBelowTheLowerBoundDoesNotFit) {
  const std::string in = write_temp("tight.csv", kSmallCsv);
  const std::string out = temp_path("tight_out.csv");
  const auto r = run_memwall("layout --csv " + in + " --capacity 47 --algo exact --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("proven not to fit"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));  // nothing written for a layout that does not fit
  const auto fits = run_memwall("layout --csv " + in + " --capacity 48 --algo exact");
  EXPECT_EQ(fits.exit_code, 0) << fits.out;
  fs::remove(in);
}

TEST(CliLayout, BadCsvsGetOneLineAndExitCode2) {
  const std::pair<const char*, const char*> cases[] = {
      {"id,lower,upper\n0,0,1\n", "header"},
      {"id,lower,upper,size\n0,0,1,abc\n", "line 2"},
      {"id,lower,upper,size\n0,0,1,-5\n", "line 2"},
      {"id,lower,upper,size\n0,4,4,8\n", "line 2"},
      {"id,lower,upper,size\n0,0,2,8\n0,1,3,8\n", "line 3"},
      {"id,lower,upper,size\n0,0,1,99999999999999999999\n", "line 2"},
      // Each size is allowed (2^62), their sum live at t=0 is not.
      {"id,lower,upper,size\n0,0,2,4611686018427387904\n1,0,2,4611686018427387904\n", "2^62"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string in = write_temp("bad.csv", text);
    const auto r = run_memwall("layout --csv " + in);
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << text << " -> " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    fs::remove(in);
  }
  const auto missing = run_memwall("layout --csv /nonexistent/x.csv");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(count_lines(missing.err), 1);
}

// A lifetimes CSV with nothing to lay out: its header only, no text at all,
// or blank lines. One line naming the file, exit code 2, from `layout` and
// from `bench layout` over a directory holding it (no 0/0 ratio, no
// "optimal" for an empty problem).
const std::pair<const char*, const char*> kEmptyCsvs[] = {
    {"id,lower,upper,size\n", "no buffers (a header and no rows): nothing to "},
    {"", "csv: empty file (no header \"id,lower,upper,size\")"},
    {"\n\n\n", "csv: line 1: empty line where the header \"id,lower,upper,size\" belongs"},
};

TEST(CliLayout, EmptyCsvsGetOneLineNamingTheFile) {
  for (const auto& [text, expected] : kEmptyCsvs) {
    const std::string in = write_temp("empty.csv", text);
    const auto r = run_memwall("layout --csv " + in);
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(in + ": " + expected), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    fs::remove(in);
  }
}

TEST(CliBenchLayout, EmptyCsvsGetOneLineNamingTheFile) {
  for (const auto& [text, expected] : kEmptyCsvs) {
    const fs::path dir = temp_path("bench_empty");
    fs::create_directories(dir);
    std::ofstream(dir / "good.csv") << kSmallCsv;
    std::ofstream(dir / "void.csv") << text;
    const auto r = run_memwall("bench layout --no-models --data " + dir.string());
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find((dir / "void.csv").string() + ": " + expected), std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    fs::remove_all(dir);
  }
}

TEST(CliLayout, BadFlagsGetOneLineAndExitCode2) {
  const std::string in = write_temp("flags.csv", kSmallCsv);
  for (const std::string flags :
       {" --alignment 3", " --capacity -1", " --time-limit 0", " --out x.json",
        " --model gpt2-small", " --alignment 99999999999999999999"}) {
    const auto r = run_memwall("layout --csv " + in + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
    EXPECT_EQ(count_lines(r.err), 1) << flags << ": " << r.err;
  }
  fs::remove(in);
}

TEST(CliLayout, ModelLayoutWritesADefaultPlanTheSimulatorAccepts) {
  const std::string out = temp_path("model_plan.json");
  const std::string model = "--model gpt2-small --batch 1 --seq 128";
  const auto r = run_memwall("layout " + model + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const Plan plan = read_plan_file(out);
  EXPECT_FALSE(plan.offsets.empty());
  const auto sim = run_memwall("simulate " + model + " --plan " + out + " --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.out << sim.err;
  // The zoo graph's layout is at its live bound (the op workspace is not
  // part of the arena).
  EXPECT_EQ(j["arena"], j["lower_bound"]);
  fs::remove(out);
}

TEST(CliLayout, PlanWithSwapsAndRecomputesIsLaidOut) {
  const Graph graph = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware& hw = find_gpu("a100-80g");
  const BufferUses uses(graph);
  std::vector<Eviction> evictions;
  for (const Buffer& b : graph.buffers) {
    if (b.kind != BufferKind::kActivation) continue;
    if (auto gap = largest_gap(uses, b.id, 8)) {
      const OpId producer = uses.producer(b.id);
      const bool recompute =
          evictions.size() % 2 == 0 && producer != kNoOp && graph.ops[producer].updates.empty();
      gap->how = recompute ? Eviction::How::kRecompute : Eviction::How::kSwap;
      evictions.push_back(*gap);
    }
  }
  ASSERT_GT(evictions.size(), 10u);
  const std::string in = temp_path("evicting_plan.json");
  write_file_atomically(in, plan_to_json_text(plan_with_evictions(graph, evictions, hw.name,
                                                                  hw.device_memory_bytes)));
  const std::string out = temp_path("evicting_plan_pinned.json");
  const std::string model = "--model gpt2-small --batch 1 --seq 128";
  const auto r = run_memwall("layout " + model + " --plan " + in + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sim = run_memwall("simulate " + model + " --plan " + out);
  EXPECT_EQ(sim.exit_code, 0) << sim.out << sim.err;
  // --capacity does not apply to plans: their arena is the budget.
  const auto capacity = run_memwall("layout " + model + " --plan " + in + " --capacity 1GiB");
  EXPECT_EQ(capacity.exit_code, 2);
  fs::remove(in);
  fs::remove(out);
}

TEST(CliBenchLayout, EveryAlgorithmOnEveryInput) {
  const fs::path dir = temp_path("bench_data");
  fs::create_directories(dir);
  std::ofstream(dir / "small.48.csv") << kSmallCsv;
  std::ofstream(dir / "other.csv") << "id,lower,upper,size\n0,0,2,8\n1,1,3,8\n2,2,4,8\n";
  const auto r = run_memwall("bench layout --data " + dir.string() +
                             " --models vgg16 --time-limit 0.5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["inputs"].size(), 3u);
  EXPECT_EQ(j["inputs"][0]["name"], "other");
  EXPECT_TRUE(j["inputs"][0]["capacity"].is_null());
  EXPECT_EQ(j["inputs"][1]["name"], "small.48");
  EXPECT_EQ(j["inputs"][1]["capacity"], 48);  // MiniMalloc's NAME.CAPACITY.csv
  EXPECT_EQ(j["inputs"][2]["name"], "vgg16");
  for (const auto& input : j["inputs"]) {
    ASSERT_EQ(input["results"].size(), 8u);
    uint64_t best_greedy = UINT64_MAX, default_arena = 0;
    for (const auto& result : input["results"]) {
      const std::string algo = result["algorithm"];
      if (result["arena"].is_null()) continue;
      const auto arena = result["arena"].get<uint64_t>();
      EXPECT_GE(arena, input["live_lower_bound"].get<uint64_t>()) << algo;
      if (algo == "default") default_arena = arena;
      if (algo != "default" && algo != "exact") best_greedy = std::min(best_greedy, arena);
    }
    EXPECT_LE(default_arena, best_greedy) << input["name"];
  }
  const auto text = run_memwall("bench layout --data " + dir.string() + " --no-models");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("greedy-by-conflicts"), std::string::npos);
  EXPECT_NE(text.out.find("small.48"), std::string::npos);
  fs::remove_all(dir);
  const auto missing = run_memwall("bench layout --data /nonexistent/dir");
  EXPECT_EQ(missing.exit_code, 2);
}

}  // namespace
}  // namespace memwall
