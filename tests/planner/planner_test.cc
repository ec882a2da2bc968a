// The automatic planner (src/planner): every plan it returns is accepted by
// the simulator within its budget, it is never slower than any single
// technique on the same work, it respects the lower bound, the issue's
// headline case plans, and impossible requests name what runs out.
#include "memwall/planner/planner.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "test_util.h"

namespace memwall {
namespace {

// The plan re-simulated from scratch within its budget.
void expect_planned_within_budget(const Candidate& c, const Hardware& hw, uint64_t budget) {
  ASSERT_TRUE(c.fits) << c.why;
  EXPECT_EQ(c.plan.budget, budget);
  const SimResult sim = simulate(c.graph, c.plan, hw);
  ASSERT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(sim.peak_bytes[0], budget);
  EXPECT_LE(sim.peak_bytes[1], hw.host_memory_bytes);
  EXPECT_DOUBLE_EQ(sim.iteration_time, c.sim.iteration_time);
}

struct Work {
  const char* model;
  ModelOptions options;
};

// Small shapes (the suite also runs under ASan); budgets from the keep-all
// peak down to where offloading or recomputation must do the work.
TEST(AutoPlanner, NeverSlowerThanAnySingleTechniqueAndAlwaysValid) {
  const Hardware& hw = find_gpu("rtx4090");
  const Work works[] = {
      {"gpt2-small", {.batch = 2, .seq = 256}},
      {"bert-base", {.batch = 4, .seq = 128}},
      {"resnet50", {.batch = 8, .image = 128}},
      {"mobilenetv2", {.batch = 8, .image = 128}},
  };
  for (const Work& w : works) {
    const Graph g = build_model(w.model, w.options);
    const uint64_t peak = memory_profile(g).peak_bytes;
    for (const double fraction : {1.0, 0.6, 0.35}) {
      SCOPED_TRACE(fmt::format("{} at {:.0f}% of its keep-all peak", w.model, 100 * fraction));
      const auto budget = static_cast<uint64_t>(fraction * static_cast<double>(peak));
      PlannerOptions options{.budget = budget, .time_limit = search_seconds(2)};
      AutoPlan a;
      try {
        a = plan_auto(g, hw, options);
      } catch (const Error& e) {
        // Allowed only when no single technique fits either.
        for (const Candidate& c : single_techniques(g, hw, options)) EXPECT_FALSE(c.fits);
        continue;
      }
      expect_planned_within_budget(a.best, hw, budget);
      EXPECT_EQ(a.best.technique, "auto");
      EXPECT_LE(a.bound.seconds, a.best.sim.iteration_time * (1 + 1e-12));
      ASSERT_EQ(a.singles.size(), 7u);
      for (const Candidate& c : a.singles) {
        if (!c.fits) continue;
        expect_planned_within_budget(c, hw, budget);
        EXPECT_LE(a.best.sim.iteration_time, c.sim.iteration_time) << c.technique;
      }
    }
  }
}

// Issue 24: LoRA and QLoRA graphs (frozen base weights without gradients
// or optimizer states, NF4 weights dequantized per matmul) plan as full
// training does, every plan valid in the simulator.
TEST(AutoPlanner, PlansLoraAndQloraAsItPlansFullTraining) {
  const Hardware& hw = find_gpu("t4");
  ModelOptions lora{.batch = 2, .seq = 256, .precision = Precision::kFp16};
  lora.lora.rank = 8;
  ModelOptions qlora = lora;
  qlora.lora.rank = 64;
  qlora.lora.targets = lora_target_names();
  qlora.base_weights = WeightFormat::kNf4;
  int planned = 0;
  for (const auto& [model, options] :
       {std::pair{"gpt2-small", lora}, std::pair{"bert-base", qlora}}) {
    const Graph g = build_model(model, options);
    const uint64_t peak = memory_profile(g).peak_bytes;
    for (const double fraction : {1.0, 0.7, 0.5}) {
      SCOPED_TRACE(fmt::format("{} at {:.0f}% of its keep-all peak", g.name, 100 * fraction));
      const auto budget = static_cast<uint64_t>(fraction * static_cast<double>(peak));
      const PlannerOptions planner{.budget = budget, .time_limit = search_seconds(2)};
      AutoPlan a;
      try {
        a = plan_auto(g, hw, planner);
      } catch (const Error& e) {
        for (const Candidate& c : single_techniques(g, hw, planner)) EXPECT_FALSE(c.fits);
        continue;
      }
      ++planned;
      expect_planned_within_budget(a.best, hw, budget);
      for (const Candidate& c : a.singles) {
        if (!c.fits) continue;
        expect_planned_within_budget(c, hw, budget);
        EXPECT_LE(a.best.sim.iteration_time, c.sim.iteration_time) << c.technique;
      }
    }
  }
  EXPECT_GE(planned, 4);
}

// Note [Time split] on plans that offload: compute plus the waits charged
// to each resource is the iteration time, and offloading shows up where
// its bytes go (ZeRO-Offload's host step and PCIe copies, ZeRO-Infinity's
// NVMe reads and writes, ZeRO-3's collectives).
// PatrickStar's fill (Fang et al. 2022, in memwall's model): the margin
// its checkpointed plan leaves below the budget takes the first chunks in
// step order, the host the rest; a larger budget, a larger device share,
// and every plan within its budget.
TEST(AutoPlanner, PatrickStarFillsTheDeviceThenTheHost) {
  const Graph g = build_model("gpt2-small", {.batch = 2, .seq = 512});
  const Hardware& hw = find_gpu("a100-80g");
  double last = 0;
  for (const uint64_t budget : {2'000'000'000ull, 2'500'000'000ull, 3'000'000'000ull}) {
    SCOPED_TRACE(budget);
    const Candidate c = plan_single_technique(g, hw, {.budget = budget}, "patrickstar");
    ASSERT_TRUE(c.fits) << c.why;
    expect_planned_within_budget(c, hw, budget);
    EXPECT_TRUE(c.states.chunks_in_order);
    EXPECT_GT(c.states.optimizer_device_share, last);
    EXPECT_LT(c.states.optimizer_device_share, 1);
    last = c.states.optimizer_device_share;
  }
}

TEST(AutoPlanner, TheTimeSplitAddsUpOnOffloadingPlans) {
  const Hardware& hw = find_gpu("rtx4090");
  const Graph g = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const auto add_up = [](const SimResult& sim) {
    double total = sim.compute_time;
    for (const double w : sim.waiting) total += w;
    EXPECT_NEAR(total, sim.iteration_time, 1e-9 * sim.iteration_time);
  };
  const auto waited = [](const Candidate& c, Resource r) {
    return c.sim.waiting[static_cast<size_t>(r)];
  };
  int checked = 0;
  for (const int ranks : {1, 4}) {
    const PlannerOptions options{
        .budget = 4'000'000'000, .ranks = ranks, .time_limit = search_seconds(1)};
    for (const Candidate& c : single_techniques(g, hw, options)) {
      if (!c.fits) continue;
      SCOPED_TRACE(fmt::format("{} with {} ranks", c.technique, ranks));
      ++checked;
      add_up(c.sim);
      if (c.technique == "zero-offload") {
        EXPECT_GT(waited(c, Resource::kHostCpu) + waited(c, Resource::kH2D), 0);
      }
      if (c.technique == "zero-infinity") {
        EXPECT_GT(waited(c, Resource::kNvmeRead) + waited(c, Resource::kNvmeWrite), 0);
      }
      if (c.technique == "patrickstar") {
        // The device's margin below 4 GB holds every chunk of gpt2-small:
        // PatrickStar's fill keeps them all there.
        EXPECT_EQ(c.states.optimizer, Tier::kDevice);
        EXPECT_EQ(c.states.params, Tier::kDevice);
      }
      if (c.technique == "paged") {
        // The states cross PCIe after backward, around their steps.
        EXPECT_TRUE(c.states.paged);
        EXPECT_GT(c.sim.bytes_moved[static_cast<size_t>(Resource::kH2D)], 0u);
      }
      if (ranks > 1 && c.states.stage == 3) {
        EXPECT_GT(waited(c, Resource::kComm), 0);
      }
    }
    add_up(plan_auto(g, hw, options).best.sim);
  }
  EXPECT_EQ(checked, 14);  // every single technique fits 4 GB
}

// The headline: Llama-2-7B full fine-tuning with AdamW on a 24 GB
// GPU (16 bytes of model states per parameter, ~108 GB, cannot stay on it).
TEST(AutoPlanner, Llama7bFullFineTuningPlansOnA24GbGpu) {
  const Graph g =
      build_model("llama2-7b", {.batch = 4, .seq = 2048, .optimizer = Optimizer::kAdamW});
  const Hardware& hw = find_gpu("rtx4090");
  const AutoPlan a = plan_auto(g, hw, {.time_limit = search_seconds(10)});
  EXPECT_EQ(a.budget, default_budget(hw));
  expect_planned_within_budget(a.best, hw, a.budget);
  EXPECT_NE(a.best.states.optimizer, Tier::kDevice);
  EXPECT_LE(a.bound.seconds, a.best.sim.iteration_time);
  // Issue 23: with every optimizer state on NVMe this plan took 14.26 s.
  // Its targets: at most half of that, and within 15% of the bound. The
  // states now sit in chunks on the host as far as host memory allows
  // (Note [Chunked optimizer states]) and on the device as far as
  // activations allow (Note [Device chunks]); the bound counts the CPU
  // steps that must follow the forward pass.
  EXPECT_GT(a.best.states.optimizer_host_share, 0.3);
  EXPECT_GT(a.best.states.optimizer_device_share, 0.1);
  EXPECT_LE(a.best.sim.iteration_time, 14.26 / 2);
  EXPECT_LE(a.best.sim.iteration_time, 1.15 * a.bound.seconds);
  EXPECT_GT(a.bound.cpu, a.bound.compute);
  EXPECT_EQ(a.bound.seconds, a.bound.cpu);
}

// Issue 23: no plan, auto's or a single technique's, is faster than the
// lower bound, on every zoo model at half and a quarter of its keep-all
// peak (small shapes; a model no plan fits is skipped).
TEST(AutoPlanner, TheBoundIsBelowEveryPlanOnTheZoo) {
  const Hardware& hw = find_gpu("rtx4090");
  int planned = 0;
  for (const ModelInfo& info : model_zoo()) {
    const std::string& model = info.name;
    if (!in_sanitizer_sweep(model)) continue;  // Note [Zoo sweeps under sanitizers]
    ModelOptions options{.batch = 1};
    (info.default_image > 0 ? options.image : options.seq) = info.default_image > 0 ? 64 : 128;
    const Graph g = build_model(model, options);
    const uint64_t peak = memory_profile(g).peak_bytes;
    for (const double fraction : {0.5, 0.25}) {
      SCOPED_TRACE(fmt::format("{} at {:.0f}% of its keep-all peak", model, 100 * fraction));
      const PlannerOptions po{.budget = static_cast<uint64_t>(fraction * static_cast<double>(peak)),
                              .time_limit = search_seconds(1)};
      AutoPlan a;
      try {
        a = plan_auto(g, hw, po);
      } catch (const Error&) {
        continue;
      }
      ++planned;
      EXPECT_LE(a.bound.seconds, a.best.sim.iteration_time * (1 + 1e-12)) << a.bound.why;
      for (const Candidate& c : a.singles) {
        if (c.fits) {
          EXPECT_LE(a.bound.seconds, c.sim.iteration_time * (1 + 1e-12)) << c.technique;
        }
      }
    }
  }
  // Every case planned on 2026-12-01: 36 in Release, 16 under a sanitizer
  // (Note [Zoo sweeps under sanitizers]); a few may stop fitting as the
  // planners change.
  EXPECT_GE(planned, kAsan || kTsan ? 14 : 30);
}

TEST(AutoPlanner, ShardsWithZeroWhenRanksShareTheWork) {
  const Graph g = build_model("gpt2-medium", {.batch = 1, .seq = 256});
  const Hardware& hw = find_gpu("a100-40g");
  // Model states of GPT-2 medium are ~5.7 GB (16 bytes x 355M): 3 GB needs
  // them sharded or offloaded.
  const uint64_t budget = 3'000'000'000;
  const AutoPlan a =
      plan_auto(g, hw, {.budget = budget, .ranks = 8, .time_limit = search_seconds(2)});
  expect_planned_within_budget(a.best, hw, budget);
  EXPECT_GT(a.best.states.stage, 0);
  EXPECT_GT(a.best.sim.comm_time, 0);
}

// 8 ranks on one node share its host memory (Note [Ranks on a node] in
// hw/ranks.cc). ZeRO-Offload of GPT-2 medium over 8 ranks keeps about
// 1.25e9 host bytes per rank (measured by the simulator): a 4 GiB host fits
// one rank's use but not 8 times it, so with 8 GPUs per node ZeRO-Offload
// fails and the planner finds a configuration whose node-wide use fits.
TEST(AutoPlanner, RanksOfANodeShareItsHostMemory) {
  const Graph g = build_model("gpt2-medium", {.batch = 1, .seq = 256});
  Hardware hw = find_gpu("a100-40g");
  const PlannerOptions options{.budget = 3'000'000'000,
                               .ranks = 8,
                               .host_bytes = uint64_t{4} << 30,
                               .time_limit = search_seconds(2)};
  hw.gpus_per_node = 1;  // one rank per host: the rank's use fits
  const Candidate alone = plan_single_technique(g, hw, options, "zero-offload");
  ASSERT_TRUE(alone.fits) << alone.why;
  const uint64_t rank_host = alone.sim.peak_bytes[static_cast<size_t>(Tier::kHost)];
  EXPECT_LT(rank_host, options.host_bytes);
  EXPECT_GT(8 * rank_host, options.host_bytes);

  hw.gpus_per_node = 8;  // the DGX A100 as it is: 8 ranks on one host
  const Candidate shared = plan_single_technique(g, hw, options, "zero-offload");
  EXPECT_FALSE(shared.fits);
  EXPECT_NE(shared.why.find("host memory exceeds this rank's 1/8 share of the node's, "
                            "536870912 bytes"),
            std::string::npos)
      << shared.why;
  const AutoPlan a = plan_auto(g, hw, options);
  ASSERT_TRUE(a.best.fits) << a.best.why;
  EXPECT_LE(8 * a.best.sim.peak_bytes[static_cast<size_t>(Tier::kHost)], options.host_bytes);
  const SimResult again = simulate(a.best.graph, a.best.plan, a.hardware);
  ASSERT_TRUE(again.valid) << again.reason;
  EXPECT_DOUBLE_EQ(again.iteration_time, a.best.sim.iteration_time);

  // The node's NVMe (--nvme) is shared the same way: ZeRO-Infinity keeps a
  // rank's 1/8 of the parameters (bf16, 2 bytes) and Adam states (fp32
  // master, momentum, variance: 12 bytes) there, and its gradients (bf16, 2
  // bytes) wait there for their CPU steps as DeepSpeed swaps them out
  // (OffloadOptions::gradients_to_nvme): 354,823,168 x 16 / 8 = 709,646,336
  // bytes for GPT-2 medium (parameter count: the zoo's, from Hugging Face's
  // gpt2-medium); 1 GiB holds one rank's, not 8 ranks'.
  PlannerOptions nvme = options;
  nvme.host_bytes = 0;
  nvme.nvme_bytes = uint64_t{1} << 30;
  hw.gpus_per_node = 1;
  const Candidate own = plan_single_technique(g, hw, nvme, "zero-infinity");
  ASSERT_TRUE(own.fits) << own.why;
  EXPECT_EQ(own.sim.peak_bytes[static_cast<size_t>(Tier::kNvme)], 709'646'336u);
  hw.gpus_per_node = 8;
  const Candidate node = plan_single_technique(g, hw, nvme, "zero-infinity");
  EXPECT_FALSE(node.fits);
  EXPECT_EQ(node.why,
            "NVMe use of the node's 8 ranks (8 x 709646336 bytes) exceeds its 1073741824 bytes by "
            "4603428864 bytes");
}

TEST(AutoPlanner, ImpossibleRequestsNameWhatRunsOut) {
  const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware& hw = find_gpu("rtx4090");
  const auto error = [&](const PlannerOptions& o) {
    try {
      plan_auto(g, hw, o);
    } catch (const Error& e) {
      return e;
    }
    return Error("no error");
  };
  // A budget below one op's working set.
  const std::string tiny = error({.budget = 1 << 20, .time_limit = search_seconds(1)}).what();
  EXPECT_EQ(tiny.rfind("no plan fits a device budget of 1048576 bytes on rtx4090; ", 0), 0u)
      << tiny;
  EXPECT_NE(tiny.find("device"), std::string::npos) << tiny;
  // Host memory and NVMe both too small for the optimizer states, and a
  // budget too small to keep them on the device: the device misses by the
  // least (4.6x, its 14 bytes of model states per parameter), the host by
  // hundreds of times (Note [What ran out] in src/planner/no_plan.cc).
  const Error host = error({.budget = 400'000'000,
                            .host_bytes = 1 << 20,
                            .nvme_bytes = 1 << 20,
                            .time_limit = search_seconds(1)});
  EXPECT_NE(std::string(host.what()).find("the closest is replicated states, all on the device"),
            std::string::npos)
      << host.what();
  ASSERT_FALSE(host.notes().empty()) << host.what();
  for (const std::string& note : host.notes()) {
    EXPECT_NE(note.find("host memory exceeds the host's 1048576 bytes"), std::string::npos) << note;
  }
  EXPECT_THROW(plan_auto(g, hw, {.ranks = 0}), Error);
  EXPECT_THROW(plan_auto(g, hw, {.zero_stage = 4}), Error);
  EXPECT_THROW(plan_single_technique(g, hw, {}, "nope"), Error);
}

// Note [Framework reserve]: 1 GiB plus 2% of the memory above 16 GiB.
TEST(AutoPlanner, DefaultBudgetKeepsTheFrameworkReserve) {
  EXPECT_EQ(framework_reserve(find_gpu("rtx4090")), kGiB + 8 * kGiB / 50);
  EXPECT_EQ(default_budget(find_gpu("rtx4090")), 24 * kGiB - kGiB - 8 * kGiB / 50);
  EXPECT_EQ(framework_reserve(find_gpu("t4")), kGiB);
}

TEST(AutoPlanner, LowerBoundIsComputeWhenStatesFit) {
  const Graph g = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const Hardware& hw = find_gpu("a100-80g");
  const LowerBound b = iteration_lower_bound(g, hw, {});
  double compute = 0;
  for (const Op& op : g.ops) {
    if (op.phase == Phase::kForward || op.phase == Phase::kBackward) compute += op_time(hw, g, op);
  }
  EXPECT_DOUBLE_EQ(b.compute, compute);
  EXPECT_EQ(b.transfer, 0);
  EXPECT_DOUBLE_EQ(b.seconds, compute);
  const SimResult keep_all = simulate(g, default_plan(g, hw.name, kMaxBytes), hw);
  EXPECT_LT(b.seconds, keep_all.iteration_time);  // the optimizer step is left out
}

}  // namespace
}  // namespace memwall
