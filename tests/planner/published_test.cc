// Published runs (src/planner/published*.cc): the rows compiled in, the
// sources' own FLOP formulas against the figures they printed, gradient
// accumulation, and Note [Checkpointing under a technique] (auto.cc).
#include "memwall/planner/published.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "memwall/base/error.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/pipeline_layout.h"
#include "memwall/planner/planner.h"
#include "memwall/planner/published_fit.h"
#include "test_util.h"

namespace memwall {
namespace {

using nlohmann::json;

std::string error_of(const json& document) {
  try {
    parse_published_runs(document);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

json one_row() {
  return json::parse(R"({"format": "memwall.published/1", "rows": [{
    "id": "r", "source": "s", "setting": "s", "gpu": "a100-80g", "ranks": 8, "zero_stage": 3,
    "technique": "zero", "model": "gpt2-small", "batch": 2, "seq": 128, "grad_accum": 3,
    "dtype": "bf16", "optimizer": "adamw", "layers": 12, "hidden": 768, "vocab": 50257,
    "published": {"metric": "tokens_per_s_per_gpu", "value": 1000, "as_published": "1000"},
    "fitted": false}]})");
}

TEST(PublishedRuns, TheBuiltInTableCoversThreeGenerationsWithHeldOutRows) {
  const std::vector<PublishedRun> runs = parse_published_runs(builtin_published_runs());
  EXPECT_GE(runs.size(), 15u);
  std::set<std::string> families, fitted_families, held_families;
  for (const PublishedRun& r : runs) {
    (void)find_gpu(r.gpu);  // a built-in profile
    EXPECT_FALSE(r.source.empty()) << r.id;
    families.insert(gpu_family(r.gpu));
    (r.fitted ? fitted_families : held_families).insert(gpu_family(r.gpu));
  }
  for (const char* family : {"v100", "a100", "h100"}) {
    EXPECT_TRUE(fitted_families.contains(family)) << family;
    EXPECT_TRUE(held_families.contains(family)) << family;
  }
}

TEST(PublishedRuns, BadRowsAreNamed) {
  EXPECT_EQ(error_of(json::object()), "published runs: not a memwall.published/1 document");
  json j = one_row();
  j["rows"][0].erase("source");
  EXPECT_EQ(error_of(j), "published run 'r': field 'source' is missing");
  j = one_row();
  j["rows"][0]["published"]["metric"] = "samples";
  EXPECT_EQ(error_of(j),
            "published run 'r': metric 'samples' is unknown (known: iteration_s, "
            "tokens_per_s_per_gpu, tflops_per_gpu_megatron, tflops_per_gpu_model, "
            "tflops_per_gpu_8n)");
  j = one_row();
  j["rows"][0]["batch"] = 0;
  EXPECT_EQ(error_of(j),
            "published run 'r': field 'batch' must be an integer in [1, 2147483648], got 0");
  j = one_row();
  j["rows"].push_back(j["rows"][0]);
  EXPECT_EQ(error_of(j), "published runs: id 'r' appears twice");
  j = one_row();
  j["rows"][0]["published"]["value"] = -1;
  EXPECT_EQ(error_of(j), "published run 'r': published value must be a positive number");
  j = one_row();
  j["rows"][0]["hardware"] = {{"compute_efficiency", 0.9}};
  EXPECT_EQ(error_of(j),
            "published run 'r': field 'hardware' may set host_memory_bytes, "
            "cpu_adam_params_per_s, interconnect_bandwidth, host_pcie_bandwidth, gpus_per_node, "
            "h2d_bandwidth, d2h_bandwidth, device_memory_bytes, hbm_bandwidth, not "
            "'compute_efficiency'");
  j = one_row();
  j["rows"][0]["nvme"] = "2TB";
  EXPECT_EQ(error_of(j), "published run 'r': field 'nvme' can only be \"none\"");
  // A field laid over the profile is range-checked as a profile's.
  j = one_row();
  j["rows"][0]["hardware"] = {{"host_memory_bytes", -5}};
  const PublishedRun bad = parse_published_runs(j).front();
  EXPECT_THROW(published_hardware(bad), Error);
  j["rows"][0]["hardware"] = {{"host_memory_bytes", 549755813888}, {"cpu_adam_params_per_s", 2.594e9}};
  const Hardware hw = published_hardware(parse_published_runs(j).front());
  EXPECT_EQ(hw.host_memory_bytes, 549755813888u);
  EXPECT_DOUBLE_EQ(hw.cpu_adam_params_per_s, 2.594e9);
  EXPECT_EQ(hw.hbm_bandwidth, find_gpu("a100-80g").hbm_bandwidth);
}

// Colossal-AI's examples count 8 N FLOPs per token (forward, backward, the
// recomputed forward). Its Llama example's README prints, for 7B (N =
// 6,738,415,616) at batch 16, seq 4096 on 32 GPUs, "throughput: 24.26
// samples/s, TFLOPS/GPU: 167.43" (hpcaitech/ColossalAI
// examples/language/llama/README.md @ 4f9953be3); the formula turns one
// into the other.
TEST(PublishedRuns, ColossalAisFormulaReproducesItsReadme) {
  PublishedRun r;
  r.batch = 16;
  r.seq = 4096;
  r.metric = PublishedMetric::kTflops8N;
  const double params = 6738415616;
  const double step = 16.0 * 32 / 24.26;  // 512 samples a step over 24.26 a second
  EXPECT_NEAR(in_metric(r, step, params), 167.43, 0.05);
}

// Megatron-LM v1.1.5's README (DGX-2, V100, batch 8, case 1B: 24 layers,
// h 1920, vocab 51,200, seq 1024) prints 1121 ms per iteration and 71.9
// TFLOP/s per GPU; Narayanan et al. 2021's eq. 3 with recomputation turns
// one into the other.
TEST(PublishedRuns, MegatronsFormulaReproducesItsTable) {
  PublishedRun r;
  r.batch = 8;
  r.seq = 1024;
  r.layers = 24;
  r.hidden = 1920;
  r.vocab = 51200;
  r.checkpointing = "per-layer";
  r.metric = PublishedMetric::kTflopsMegatron;
  EXPECT_NEAR(in_metric(r, 1.121, 0), 71.9, 0.05);
  r.value = 71.9;
  EXPECT_NEAR(published_step_seconds(r, 0), 1.121, 0.001);
  r.checkpointing.clear();  // no recomputation: 72 instead of 96
  EXPECT_NEAR(in_metric(r, 1.121, 0), 71.9 * 72 / 96, 0.05);
}

// llm-foundry's A100 80GB table, MPT-7b at seq 2048 on 8 GPUs without
// checkpointing: 4641 tokens/s per GPU and 64.23% MFU of 312 TFLOP/s, with
// NumParams 6,658,859,008 (scripts/train/benchmarking/README.md).
TEST(PublishedRuns, LlmFoundrysMfuFormulaReproducesItsTable) {
  PublishedRun r;
  r.batch = 6;
  r.seq = 2048;
  r.grad_accum = 2;
  r.layers = 32;
  r.hidden = 4096;
  r.metric = PublishedMetric::kTokensPerGpu;
  r.value = 4641;
  const double params = 6658859008;
  const double step = published_step_seconds(r, params);
  EXPECT_DOUBLE_EQ(step, 6.0 * 2048 * 2 / 4641);
  r.metric = PublishedMetric::kTflopsModelFlops;
  EXPECT_NEAR(in_metric(r, step, params) / 312, 0.6423, 0.0002);
}

// Gradient accumulation: micro-batches after the first repeat the
// iteration without its optimizer step.
TEST(PublishedRuns, GradientAccumulationRepeatsForwardAndBackward) {
  PublishedRun r = parse_published_runs(one_row()).front();
  ModelOptions o;
  o.batch = r.batch;
  o.seq = r.seq;
  o.flash = true;
  const Graph g = build_model(r.zoo_model, o);
  const PublishedPrediction p = predict_published(r, g, find_gpu(r.gpu));
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_GT(p.optimizer_seconds, 0);
  EXPECT_DOUBLE_EQ(p.step_seconds,
                   p.iteration_seconds + 2 * (p.iteration_seconds - p.optimizer_seconds));
  EXPECT_EQ(p.plan, "ZeRO-3, all on the device; keep-all");
}

// Note [Checkpointing under a technique]: ZeRO-Offload as its paper ran it,
// with per-layer checkpointing, recomputes and holds less than without.
TEST(CheckpointingUnderATechnique, ZeroOffloadWithPerLayerCheckpointing) {
  const Graph g = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const Hardware& hw = find_gpu("a100-40g");
  PlannerOptions options{.budget = default_budget(hw), .time_limit = search_seconds(5)};
  const Candidate own = plan_single_technique(g, hw, options, "zero-offload");
  options.checkpointing = "per-layer";
  const Candidate checkpointed = plan_single_technique(g, hw, options, "zero-offload");
  ASSERT_TRUE(own.fits && checkpointed.fits);
  EXPECT_EQ(own.activations, "keep-all");
  EXPECT_EQ(checkpointed.activations, "remat:per-layer");
  EXPECT_LT(checkpointed.sim.peak_bytes[0], own.sim.peak_bytes[0]);
  EXPECT_GT(checkpointed.sim.iteration_time, own.sim.iteration_time);
  size_t recomputed = 0;
  for (const Step& s : checkpointed.plan.steps) recomputed += s.kind == StepKind::kRecompute;
  EXPECT_GT(recomputed, 0u);

  // "zero": every state on the device, sharded by the stage.
  options.ranks = 4;
  options.zero_stage = 3;
  const Candidate zero = plan_single_technique(g, hw, options, "zero");
  ASSERT_TRUE(zero.fits) << zero.why;
  EXPECT_EQ(zero.states.name(), "ZeRO-3, all on the device");
  EXPECT_EQ(zero.activations, "remat:per-layer");
}

TEST(CheckpointingUnderATechnique, RefusedWhereItCannotApply) {
  const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 64});
  const Hardware& hw = find_gpu("a100-40g");
  PlannerOptions options{.checkpointing = "per-layer"};
  std::string message;
  try {
    plan_single_technique(g, hw, options, "capuchin");
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_EQ(message,
            "checkpointing per-layer applies to the techniques that move model states "
            "(zero, zero-offload, zero-infinity, patrickstar, paged), not to capuchin, "
            "which plans activations itself");
  options.checkpointing = "every-other";
  try {
    plan_single_technique(g, hw, options, "zero-offload");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(
        std::string(e.what()).starts_with("unknown checkpointing 'every-other' (known: "
                                          "keep-all, per-layer, selective"))
        << e.what();
  }
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

const PublishedRun& builtin_row(const std::vector<PublishedRun>& runs, std::string_view id) {
  for (const PublishedRun& r : runs) {
    if (r.id == id) return r;
  }
  throw Error(fmt::format("no row {}", id));
}

// Narayanan et al. 2021 (SC21), Table 1's 1T row: 128 layers, h 25600,
// 3,072 GPUs as tensor 8 x pipeline 64 x data 6, global batch 3,072, 163
// teraFLOP/s per GPU. Eq. 3 over the GPUs gives the step: 96 B s l h^2
// (1 + s/6h + V/16lh) / 3072 / 163e12.
TEST(PublishedLayouts, NarayanansTableCountsFlopsPerGpu) {
  const std::vector<PublishedRun> runs = parse_published_runs(builtin_published_runs());
  const PublishedRun& r = builtin_row(runs, "megatron-sc21-1008b");
  ASSERT_TRUE(r.layout.has_value());
  EXPECT_EQ(r.layout->tensor_parallel, 8);
  EXPECT_EQ(r.layout->pipeline_parallel, 64);
  EXPECT_EQ(r.ranks, 6);
  EXPECT_EQ(sequences_per_gpu(r), 1.0);
  const double s = 2048, l = 128, h = 25600, v = 51200;
  const double flops = 96 * 3072 * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  EXPECT_DOUBLE_EQ(published_step_seconds(r, 0), flops / 3072 / 163e12);
  int rows = 0;
  for (const PublishedRun& run : runs) rows += run.layout.has_value();
  EXPECT_EQ(rows, 13);  // and Llama 3 405B's three
}

// The Llama 3 paper's Table 4, its long-context row: 16,384 GPUs as tensor
// 8 x context 16 x pipeline 16 x data 8, 16 sequences of 131,072 tokens a
// data-parallel rank (16M tokens a step): 128 sequences over 16,384 GPUs.
TEST(PublishedLayouts, ContextParallelRowCountsItsGpus) {
  const std::vector<PublishedRun> runs = parse_published_runs(builtin_published_runs());
  const PublishedRun& r = builtin_row(runs, "llama3-405b-16k-gpus-128k-context");
  ASSERT_TRUE(r.layout.has_value());
  EXPECT_EQ(r.layout->context_parallel, 16);
  EXPECT_EQ(published_gpus(r), 16384);
  EXPECT_EQ(r.layout->global_batch * r.seq, 16777216);
  EXPECT_DOUBLE_EQ(sequences_per_gpu(r), 128.0 / 16384);
}

// Note [Published layouts]: the prediction is the layout search's, fixed
// to the row's sizes, recomputation and partition.
TEST(PublishedLayouts, PredictedByTheLayoutSearch) {
  const std::vector<PublishedRun> runs = parse_published_runs(builtin_published_runs());
  const PublishedRun& r = builtin_row(runs, "megatron-sc21-39.1b");
  const Hardware& hw = find_gpu(r.gpu);
  const PublishedPrediction p = predict_published_layout(r, hw);
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_TRUE(p.over_memory.empty());
  EXPECT_NE(p.plan.find("tp 8 x pp 2 x dp 32"), std::string::npos) << p.plan;
  EXPECT_NE(p.plan.find("per-layer recompute"), std::string::npos) << p.plan;
  const ModelOptions options = published_model_options(r);
  const LayoutSearch search = search_layouts(
      r.zoo_model, options, hw,
      {.gpus = 512, .global_batch = 1536, .recompute = ChunkRecompute::kFullLayers,
       .tensor_parallel = 8, .pipeline_parallel = 2, .sequence_parallel = false,
       .distributed_optimizer = false, .partition = PipelinePartition::kEvenLayers});
  ASSERT_TRUE(search.best.has_value());
  EXPECT_EQ(p.step_seconds, search.best->sim.step_time);
  EXPECT_LE(p.device_peak, default_budget(hw));
}

TEST(PublishedLayouts, BadLayoutsAreNamed) {
  json j = one_row();
  j["rows"][0]["layout"] = {{"tensor_parallel", 8}};
  EXPECT_EQ(error_of(j), "published run 'r': field 'layout.global_batch' is missing");
  j["rows"][0]["layout"] = {{"global_batch", 8}, {"partition", "random"}};
  EXPECT_EQ(error_of(j), "published run 'r': field 'layout.partition' must be tarnawski or even");
  j["rows"][0]["layout"] = {{"global_batch", 8}, {"pipeline_parallel", 0}};
  EXPECT_EQ(error_of(j),
            "published run 'r': field 'layout.pipeline_parallel' must be an integer in [1, 65536]");
  j["rows"][0]["layout"] = {{"global_batch", 8}};
  j["rows"][0]["model"] = {{"zoo", "gpt2-small"}, {"shape", {{"layers", 2}}}};
  EXPECT_EQ(error_of(j), "published run 'r': field 'hidden' is missing");
}

}  // namespace
}  // namespace memwall
