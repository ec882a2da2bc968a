// `memwall plan --pipeline-parallel N`: the graph cut into pipeline chunks
// (Tarnawski et al.'s programme, Megatron-LM's even layer split, or
// Tarnawski et al.'s integer programme for non-contiguous placement) and one
// step of the schedule simulated over the devices (docs/pipeline.md). Every
// figure printed comes from that simulation. Exit code 0: every device
// fits its budget; 2: bad input, or a device over its budget (the table
// still printed, the message naming the device).
#include <sys/stat.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/pipeline_layout.h"
#include "memwall/planner/pipeline_placement.h"
#include "memwall/planner/pipeline_plan.h"
#include "memwall/planner/planner.h"
#include "memwall/planner/torch_layout.h"
#include "memwall/report/format.h"
#include "options.h"
#include "plan_args.h"

namespace memwall::cli {
namespace {

// The device of chunk k: the placement's (--partition ip), else the schedule's.
int plan_chunk_device(const PipelinePlan& p, const PlacementPlan* placed, size_t k) {
  return placed != nullptr ? placed->chunk_devices[k]
                           : chunk_device(p.shape.schedule, static_cast<int>(k), p.shape.devices);
}

// Per device, its segments as runs: "0-2, 7".
std::vector<std::string> segment_runs(const PlacementPlan& placed, int devices) {
  std::vector<std::string> runs(devices);
  const std::vector<int>& device = placed.placement.device;
  for (size_t u = 0; u < device.size(); ++u) {
    if (u > 0 && device[u] == device[u - 1]) continue;
    size_t last = u;
    while (last + 1 < device.size() && device[last + 1] == device[u]) ++last;
    std::string& text = runs[device[u]];
    text += (text.empty() ? "" : ", ") +
            (last == u ? fmt::format("{}", u) : fmt::format("{}-{}", u, last));
  }
  return runs;
}

nlohmann::json plan_json(const PipelinePlan& p, const PlacementPlan* placed = nullptr) {
  nlohmann::json chunks = nlohmann::json::array();
  for (size_t k = 0; k < p.costs.size(); ++k) {
    const ChunkCost& c = p.costs[k];
    chunks.push_back({{"first_op", p.chunk_names[k]},
                      {"device", plan_chunk_device(p, placed, k)},
                      {"forward_s", c.forward},
                      {"backward_s", c.backward},
                      {"optimizer_s", c.optimizer},
                      {"grad_sync_s", c.grad_sync},
                      {"grads_bytes", c.grads},
                      {"states_bytes", c.states},
                      {"saved_bytes", c.saved},
                      {"forward_peak_bytes", c.forward_peak},
                      {"backward_peak_bytes", c.backward_peak},
                      {"send_forward_bytes", c.send_forward},
                      {"send_backward_bytes", c.send_backward}});
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const PipelineDevice& d : p.sim.devices) {
    devices.push_back({{"peak_bytes", d.peak_bytes},
                       {"states_bytes", d.states},
                       {"engine_buffers_bytes", d.engine_buffers},
                       {"max_in_flight", d.max_in_flight},
                       {"busy_s", d.busy},
                       {"idle_s", d.idle},
                       {"grad_sync_s", d.grad_sync},
                       {"optimizer_s", d.optimizer}});
  }
  nlohmann::json j = {{"schedule", to_string(p.shape.schedule)},
                      {"engine", to_string(p.engine)},
                      {"partition", placed != nullptr ? "ip" : to_string(p.partition)},
                      {"checkpointing", to_string(p.recompute)},
                      {"pipeline_devices", p.shape.devices},
                      {"chunks_per_device", p.shape.chunks_per_device},
                      {"micro_batches", p.shape.micro_batches},
                      {"tensor_parallel", p.tensor_parallel},
                      {"data_parallel", p.data_parallel},
                      {"expert_parallel", p.expert_parallel},
                      {"context_parallel", p.context_parallel},
                      {"distributed_optimizer", p.distributed_optimizer},
                      {"zero_stage", p.zero_stage},
                      {"offload_optimizer", p.offload_optimizer},
                      {"swap_activations", p.swap_activations},
                      {"host_bytes_per_node", p.host_bytes_per_node},
                      {"gpus", p.gpus},
                      {"budget_bytes", p.budget},
                      {"fits", p.fits},
                      {"step_time_s", p.sim.step_time},
                      {"bubble_fraction", p.sim.bubble_fraction},
                      {"tokens_per_s", p.tokens_per_s},
                      {"samples_per_s", p.samples_per_s},
                      {"mfu", p.mfu},
                      {"chunks", chunks},
                      {"devices", devices}};
  if (placed != nullptr) {
    const PlacementResult& r = placed->placement;
    j["placement"] = {
        {"segment_starts", placed->cut_points},
        {"segment_devices", r.device},
        {"device_loads_s", r.loads},
        {"max_load_s", r.max_load},
        {"bound_s", r.bound},
        {"optimal", r.optimal},
        {"timed_out", r.timed_out},
        {"contiguous_max_load_s", r.contiguous_device.empty() ? nlohmann::json(nullptr)
                                                              : nlohmann::json(r.contiguous_load)}};
  }
  return j;
}

// The placement's lines (--partition ip): its objective against the best
// contiguous placement's, and each device's segments.
std::string placement_text(const PlacementPlan& placed, int devices) {
  const PlacementResult& r = placed.placement;
  const std::string proof = r.optimal     ? "proven optimal"
                            : r.timed_out ? "CBC stopped at the deadline: the contiguous one"
                                          : fmt::format("CBC's bound {:.4f} ms", r.bound * 1e3);
  const std::string contiguous =
      r.contiguous_device.empty()
          ? "no contiguous placement fits"
          : fmt::format("contiguous best {:.4f} ms ({:+.1f}%)", r.contiguous_load * 1e3,
                        100 * (r.max_load / r.contiguous_load - 1));
  std::string out = field("ip objective", fmt::format("{:.4f} ms a micro-batch on the busiest "
                                                      "device ({}), {}",
                                                      r.max_load * 1e3, proof, contiguous));
  out +=
      fmt::format("\n  device  {:<24} load ms\n", fmt::format("segments (of {})", r.device.size()));
  const std::vector<std::string> runs = segment_runs(placed, devices);
  for (int d = 0; d < devices; ++d) {
    out += fmt::format("  {:>6}  {:<24} {:>7.3f}\n", d, runs[d], r.loads[d] * 1e3);
  }
  return out;
}

std::string plan_text(std::string_view graph_name, const Hardware& hw, const PipelinePlan& p,
                      const PlacementPlan* placed = nullptr) {
  std::string out = fmt::format("{} on {} x {}\n", graph_name, p.gpus, hw.name);
  const std::string chunks =
      placed != nullptr ? fmt::format("{} chunks placed by the integer programme", p.costs.size())
                        : fmt::format("{} chunk{} a device", p.shape.chunks_per_device,
                                      p.shape.chunks_per_device == 1 ? "" : "s");
  out += field(
      "layout",
      fmt::format(
          "{} pipeline devices x {} tensor-parallel{} x {} data-parallel, {}", p.shape.devices,
          p.tensor_parallel,
          p.context_parallel > 1 ? fmt::format(" x {} context-parallel", p.context_parallel) : "",
          p.expert_parallel > 1
              ? fmt::format("{} (expert-parallel {})", p.data_parallel, p.expert_parallel)
              : fmt::format("{}", p.data_parallel),
          chunks) +
          (p.zero_stage == 1   ? ", optimizer states sharded (ZeRO-1)"
           : p.zero_stage == 2 ? ", optimizer states and gradients sharded (ZeRO-2)"
           : p.zero_stage == 3 ? ", parameters, gradients and optimizer states sharded "
                                 "(ZeRO-3)"
                               : ""));
  if (placed != nullptr) {
    out += field(
        "schedule",
        fmt::format("list schedule over the placement, {} micro-batches, at most {} in "
                    "flight a chunk ({})",
                    p.shape.micro_batches,
                    placement_in_flight(p.shape.schedule, p.shape.devices, p.shape.micro_batches),
                    to_string(p.shape.schedule)));
    out += field("partition", "ip (Tarnawski et al.'s integer programme, non-contiguous)");
    out += placement_text(*placed, p.shape.devices);
  } else {
    out += field("schedule", fmt::format("{}, {} micro-batches", to_string(p.shape.schedule),
                                         p.shape.micro_batches));
    out += field("partition", std::string(to_string(p.partition)));
  }
  if (p.engine == PipelineEngine::kTorch) {
    out += field("engine", "torch.distributed.pipelining (receive buffers kept, outputs cached)");
  }
  if (p.recompute == ChunkRecompute::kFullLayers) {
    out += field("checkpointing", "per-layer: each layer keeps its input and reruns its forward");
  } else if (p.recompute == ChunkRecompute::kSelective) {
    out += field("checkpointing",
                 "selective: each layer reruns its attention's s x s part before its backward");
  }
  out += field("budget", exact_bytes(p.budget) + " a device");
  if (p.offload_optimizer || p.swap_activations) {
    const char* what = p.offload_optimizer && p.swap_activations
                           ? "optimizer states (stepped by the CPU) and swapped activations"
                       : p.offload_optimizer ? "optimizer states on the host, stepped by the CPU"
                                             : "activations swapped between forward and backward";
    out +=
        field("host", fmt::format("{}: {} a node of {}{}", what, human_bytes(p.host_bytes_per_node),
                                  human_bytes(hw.host_memory_bytes), p.host_fits ? "" : " (over)"));
  }
  out += field("step time", fmt::format("{:.6g} s (simulated), bubble {:.1f}%", p.sim.step_time,
                                        100 * p.sim.bubble_fraction));
  if (p.tokens_per_s > 0) {
    out += field("throughput",
                 fmt::format("{:.0f} tokens/s, MFU {:.1f}%", p.tokens_per_s, 100 * p.mfu));
  } else {
    out += field("throughput",
                 fmt::format("{:.1f} samples/s, MFU {:.1f}%", p.samples_per_s, 100 * p.mfu));
  }
  out += "\n  chunk  device  first op                 fwd ms   bwd ms   states       saved/mb\n";
  for (size_t k = 0; k < p.costs.size(); ++k) {
    const ChunkCost& c = p.costs[k];
    out += fmt::format("  {:>5}  {:>6}  {:<22} {:>8.3f} {:>8.3f}   {:<12} {}\n", k,
                       plan_chunk_device(p, placed, k), p.chunk_names[k], c.forward * 1e3,
                       c.backward * 1e3, human_bytes(c.states), human_bytes(c.saved));
  }
  out += "\n  device  peak        states      in flight  busy ms   idle ms   sync ms\n";
  for (size_t d = 0; d < p.sim.devices.size(); ++d) {
    const PipelineDevice& dev = p.sim.devices[d];
    out += fmt::format("  {:>6}  {:<11} {:<11} {:>9}  {:>8.3f}  {:>8.3f}  {:>8.3f}{}\n", d,
                       human_bytes(dev.peak_bytes), human_bytes(dev.states), dev.max_in_flight,
                       dev.busy * 1e3, dev.idle * 1e3, dev.grad_sync * 1e3,
                       dev.peak_bytes > p.budget ? "  over budget" : "");
  }
  return out;
}

// The first option of the one-GPU plans (a strategy, its files, the
// capacity searches) given, which neither pipeline plans nor the layout
// search take; nullptr when none is.
const char* single_gpu_option(const PlanArgs& args) {
  return args.strategy != "auto"   ? "--strategy"
         : !args.out.empty()       ? "--out"
         : !args.out_graph.empty() ? "--out-graph"
         : args.max_batch          ? "--max-batch"
         : !args.max_model.empty() ? "--max-model"
                                   : nullptr;
}

// --checkpointing with pipelines: per-layer (Megatron-LM's full
// recomputation, Note [Pipeline recomputation]) or keep-all; nullopt when
// not given.
std::optional<ChunkRecompute> pipeline_recompute(const PlanArgs& args) {
  if (args.checkpointing.empty()) return std::nullopt;
  const auto recompute = parse_chunk_recompute(args.checkpointing);
  if (!recompute) {
    fail(
        "--checkpointing {} with pipelines: per-layer (each layer keeps its input and reruns "
        "its forward before its backward), selective (it reruns its attention's s x s part) "
        "or keep-all",
        args.checkpointing);
  }
  return recompute;
}

// --partition: tarnawski (the default) or even (ip: run_placement_plan).
PipelinePartition partition_option(const PlanArgs& args) {
  if (args.partition.empty()) return PipelinePartition::kTarnawski;
  if (args.partition == "ip") {
    fail(
        "--partition ip places one --pipeline-parallel plan; the layout search (--gpus) "
        "partitions with tarnawski or even");
  }
  const auto partition = parse_pipeline_partition(args.partition);
  if (!partition) fail("--partition {}: unknown (tarnawski, even, ip)", args.partition);
  return *partition;
}

int parse_positive(const std::optional<std::string>& text, const char* option, int fallback) {
  if (!text) return fallback;
  const int64_t value = parse_count(*text, option);
  if (value > (1 << 16)) fail("{} {} is more than 65,536", option, value);
  return static_cast<int>(value);
}

// --torchrun DIR: DIR/layout.json and DIR/torchrun.sh, both or neither
// (Note [Output files]); DIR is made when missing and removed again when
// nothing was written into it.
class TorchrunOutputs {
 public:
  explicit TorchrunOutputs(const std::string& dir) : dir_(dir) {
    if (dir_.empty()) return;
    std::error_code error;
    made_dir_ = std::filesystem::create_directory(dir_, error);
    if (error) fail("cannot write {}: {}", dir_, error.message());
    files_.emplace();
    files_->declare(layout());
    files_->declare(script());
  }
  ~TorchrunOutputs() {
    files_.reset();  // its temporaries go first, so that the directory is empty
    std::error_code ignored;
    if (made_dir_ && !committed_) std::filesystem::remove(dir_, ignored);
  }
  TorchrunOutputs(const TorchrunOutputs&) = delete;
  TorchrunOutputs& operator=(const TorchrunOutputs&) = delete;

  void write(const nlohmann::json& layout_json, const std::string& script_text) {
    if (dir_.empty()) return;
    files_->set(layout(), layout_json.dump(2) + "\n");
    files_->set(script(), script_text);
    files_->commit();
    committed_ = true;
    ::chmod(script().c_str(), 0755);  // best effort: `sh torchrun.sh` runs it anyway
  }

 private:
  std::string layout() const { return dir_ + "/layout.json"; }
  std::string script() const { return dir_ + "/torchrun.sh"; }
  std::string dir_;
  std::optional<OutputFiles> files_;
  bool made_dir_ = false;
  bool committed_ = false;
};

}  // namespace

bool is_pipeline(const PlanArgs& args) {
  return args.pipeline_parallel || args.micro_batches || !args.schedule.empty() ||
         args.chunks_per_device || !args.partition.empty() || !args.torchrun.empty();
}

int run_pipeline_plan(const PlanArgs& args) {
  if (!args.pipeline_parallel) {
    fail(
        "--micro-batches, --schedule, --chunks-per-device, --partition and --torchrun apply to "
        "--pipeline-parallel N (or --gpus N)");
  }
  // Note [Offload in a pipeline stage]: --strategy zero-offload offloads
  // every stage's optimizer states; Note [Swapped activations in a pipeline
  // stage]: --strategy vdnn swaps its activations.
  const bool offload = args.strategy == "zero-offload";
  const bool swap = args.strategy == "vdnn";
  const char* ignored = !args.host_memory.empty() ? "--host-memory"
                        : !args.nvme.empty()      ? "--nvme"
                        : (offload || swap) && args.out.empty() && args.out_graph.empty() &&
                                !args.max_batch && args.max_model.empty()
                            ? nullptr
                            : single_gpu_option(args);
  if (ignored != nullptr) {
    fail(
        "{} does not apply to --pipeline-parallel: a pipeline plan keeps every chunk's states and "
        "activations on its device (--strategy zero-offload its optimizer states on the host, "
        "vdnn its activations)",
        ignored);
  }
  PipelineRequest request;
  request.offload_optimizer = offload;
  request.swap_activations = swap;
  request.devices = parse_positive(args.pipeline_parallel, "--pipeline-parallel", 1);
  request.data_parallel = parse_positive(args.ranks, "--ranks", 1);
  if (args.zero_stage) {
    if (*args.zero_stage < 0 || *args.zero_stage > 3) {
      fail("--zero-stage {} does not exist (0, 1, 2 or 3)", *args.zero_stage);
    }
    // Note [ZeRO in a pipeline stage]: over the data-parallel replicas
    // (and the context-parallel ranks, which the model's graph tells).
    if (*args.zero_stage >= 1 && request.data_parallel < 2 && !args.source.context_parallel) {
      fail("--zero-stage {} shards over data-parallel replicas: give --ranks 2 or more",
           *args.zero_stage);
    }
    request.distributed_optimizer = *args.zero_stage >= 1;
    request.zero_stage = *args.zero_stage;
  }
  request.micro_batches = parse_positive(args.micro_batches, "--micro-batches", request.devices);
  request.chunks_per_device = parse_positive(args.chunks_per_device, "--chunks-per-device", 1);
  if (!args.schedule.empty()) {
    const auto schedule = parse_pipeline_schedule(args.schedule);
    if (!schedule) fail("--schedule {}: unknown (gpipe, 1f1b, interleaved, hanayo)", args.schedule);
    request.schedule = *schedule;
  } else if (request.chunks_per_device > 1) {
    request.schedule = PipelineSchedule::kInterleaved;
  }
  // --partition ip: the integer programme's placement, within --time-limit.
  const bool ip = args.partition == "ip";
  const Deadline deadline = work_deadline(checked_time_limit(args.time_limit));
  if (ip) {
    const char* refused = args.chunks_per_device      ? "--chunks-per-device"
                          : !args.torchrun.empty()    ? "--torchrun"
                          : request.data_parallel > 1 ? "--ranks"
                                                      : nullptr;
    if (refused != nullptr) {
      fail(
          "{} does not apply to --partition ip: the integer programme places one pipeline's "
          "layers, choosing how many chunks each device runs (no data-parallel replicas, no "
          "PyTorch layout)",
          refused);
    }
  }
  request.partition = ip ? PipelinePartition::kTarnawski : partition_option(args);
  request.recompute = pipeline_recompute(args).value_or(ChunkRecompute::kNone);
  // A layout for PyTorch is predicted as its pipelining keeps memory.
  if (!args.torchrun.empty()) request.engine = PipelineEngine::kTorch;
  const Hardware hw = load_node(args);
  TorchrunOutputs torchrun(args.torchrun);
  const Graph graph = args.source.load(hw);
  if (!args.budget.empty()) {
    request.budget = parse_budget(args.budget, hw, [&] { return keep_all_peak(graph, hw); });
    check_budget_within_device(request.budget, hw);
  }
  std::optional<PlacementPlan> placed;
  if (ip) placed = plan_placement(graph, hw, request, deadline);
  const PipelinePlan plan = placed ? placed->plan : plan_pipeline(graph, hw, request);
  const PlacementPlan* placement = placed ? &*placed : nullptr;
  const nlohmann::json json = plan_json(plan, placement);
  const nlohmann::json layout =
      args.torchrun.empty() ? nlohmann::json() : torch_layout(json, graph, hw, plan);
  if (args.json) {
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << plan_text(graph.name, hw, plan, placement);
    if (!args.torchrun.empty()) {
      std::cout << "\n"
                << field("torchrun", args.torchrun + "/torchrun.sh: " +
                                         torchrun_command(hw, plan, "layout.json"));
    }
  }
  if (plan.fits) torchrun.write(layout, torchrun_script(hw, plan));
  if (!plan.host_fits) {
    fail("the node's ranks hold {} in host memory, over its {}",
         exact_bytes(plan.host_bytes_per_node), exact_bytes(hw.host_memory_bytes));
  }
  if (!plan.fits) {
    for (size_t d = 0; d < plan.sim.devices.size(); ++d) {
      if (plan.sim.devices[d].peak_bytes > plan.budget) {
        fail("pipeline device {} peaks at {}, over its budget of {}", d,
             exact_bytes(plan.sim.devices[d].peak_bytes), exact_bytes(plan.budget));
      }
    }
  }
  return 0;
}

int run_layout_search(const PlanArgs& args) {
  if ((!args.gpus && !args.nodes) || !args.global_batch) {
    fail("--gpus N (or --nodes M) and --global-batch B go together: the layout search needs both");
  }
  const char* ignored = args.micro_batches                ? "--micro-batches"
                        : !args.schedule.empty()          ? "--schedule"
                        : args.chunks_per_device          ? "--chunks-per-device"
                        : args.source.batch               ? "--batch"
                        : args.ranks                      ? "--ranks"
                        : !args.source.graph_file.empty() ? "--graph"
                        : args.strategy == "zero-offload" && args.out.empty() &&
                                args.out_graph.empty() && !args.max_batch && args.max_model.empty()
                            ? nullptr
                            : single_gpu_option(args);
  if (ignored != nullptr) {
    fail(
        "{} does not apply to --gpus: the layout search chooses the data parallelism, the "
        "micro-batch and the schedule of a zoo model (--tensor-parallel and "
        "--pipeline-parallel fix those parts)",
        ignored);
  }
  LayoutRequest request;
  // Note [Offload in a pipeline stage] in every layout (else the search
  // tries it where nothing else fits).
  request.offload_optimizer = args.strategy == "zero-offload";
  const Hardware node = load_node(args);
  int64_t gpus = args.gpus ? parse_count(*args.gpus, "--gpus") : 0;
  if (args.nodes) {
    const int64_t nodes = parse_count(*args.nodes, "--nodes");
    const int64_t of_nodes = nodes > (1 << 20) ? int64_t{1} << 21 : nodes * node.gpus_per_node;
    if (args.gpus && gpus != of_nodes) {
      fail("--gpus {} is not --nodes {} of {} GPUs ({})", gpus, nodes, node.gpus_per_node,
           of_nodes);
    }
    gpus = of_nodes;
  }
  if (gpus > (1 << 20)) fail("--gpus {} is more than 2^20 GPUs", gpus);
  request.gpus = static_cast<int>(gpus);
  request.global_batch = parse_count(*args.global_batch, "--global-batch");
  request.recompute = pipeline_recompute(args);
  request.pipeline_parallel = parse_positive(args.pipeline_parallel, "--pipeline-parallel", 0);
  request.expert_parallel = parse_positive(args.source.expert_parallel, "--expert-parallel", 0);
  request.context_parallel = parse_positive(args.source.context_parallel, "--context-parallel", 0);
  if (args.source.tensor_parallel) {
    request.tensor_parallel = parse_positive(args.source.tensor_parallel, "--tensor-parallel", 0);
    request.sequence_parallel = args.source.sequence_parallel;
  } else if (args.source.sequence_parallel) {
    fail(
        "--sequence-parallel with --gpus goes with --tensor-parallel (the search turns it on "
        "wherever it splits tensors)");
  }
  if (args.zero_stage) {
    if (*args.zero_stage < 0 || *args.zero_stage > 3) {
      fail("--zero-stage {} does not exist (0, 1, 2 or 3)", *args.zero_stage);
    }
    // Note [ZeRO in a pipeline stage]; 1 is the search's default.
    request.distributed_optimizer = *args.zero_stage >= 1;
    request.zero_stage = *args.zero_stage;
  }
  request.partition = partition_option(args);
  if (!args.torchrun.empty()) request.engine = PipelineEngine::kTorch;
  const Hardware hw = load_node(args);
  TorchrunOutputs torchrun(args.torchrun);
  // Tensor and sequence parallelism are the search's, set per layout.
  const ModelOptions options = args.source.model_options(hw);
  if (!args.budget.empty()) {
    request.budget =
        parse_budget(args.budget, hw, [&] { return keep_all_peak(args.source.load(hw), hw); });
    check_budget_within_device(request.budget, hw);
  }
  const LayoutSearch search = search_layouts(args.source.model, options, hw, request);
  if (args.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const LayoutCandidate& c : search.candidates) {
      rows.push_back({{"tensor_parallel", c.tensor_parallel},
                      {"pipeline_parallel", c.pipeline_parallel},
                      {"data_parallel", c.data_parallel},
                      {"expert_parallel", c.expert_parallel},
                      {"context_parallel", c.context_parallel},
                      {"micro_batch", c.micro_batch},
                      {"micro_batches", c.micro_batches},
                      {"schedule", to_string(c.schedule)},
                      {"chunks_per_device", c.chunks_per_device},
                      {"checkpointing", to_string(c.recompute)},
                      {"zero_stage", c.zero_stage},
                      {"offload_optimizer", c.offload_optimizer},
                      {"fits", c.fits},
                      {"step_time_s", c.step_time},
                      {"tokens_per_s", c.tokens_per_s},
                      {"mfu", c.mfu},
                      {"peak_bytes", c.peak_bytes},
                      {"why_not", c.why_not}});
    }
    nlohmann::json j = {{"gpus", request.gpus},
                        {"global_batch", request.global_batch},
                        {"search_seconds", search.seconds},
                        {"layouts", rows},
                        {"best", search.best ? plan_json(*search.best) : nlohmann::json(nullptr)}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} layouts of {} GPUs searched in {:.1f} s\n",
                             search.candidates.size(), request.gpus, search.seconds);
    if (search.best) {
      std::cout << field("chosen", layout_label(search.candidates.front()));
      std::cout << plan_text(search.best_graph_name, hw, *search.best);
    }
    std::cout << "\n  runners-up                                                         step s   "
                 "MFU    fullest device\n";
    const size_t shown = std::min<size_t>(search.candidates.size(), 6);
    for (size_t i = search.best ? 1 : 0; i < shown; ++i) {
      const LayoutCandidate& c = search.candidates[i];
      if (c.step_time <= 0) {
        std::cout << fmt::format("  {:<64} {}\n", layout_label(c), c.why_not);
        continue;
      }
      std::cout << fmt::format("  {:<64} {:>8.4f}  {:>4.1f}%  {}{}\n", layout_label(c), c.step_time,
                               100 * c.mfu, human_bytes(c.peak_bytes),
                               c.fits ? "" : " (over budget)");
    }
  }
  if (search.best && !args.torchrun.empty()) {
    torchrun.write(torch_layout(plan_json(*search.best), *search.best_graph, hw, *search.best),
                   torchrun_script(hw, *search.best));
    if (!args.json) {
      std::cout << "\n"
                << field("torchrun", args.torchrun + "/torchrun.sh: " +
                                         torchrun_command(hw, *search.best, "layout.json"));
    }
  }
  if (!search.best) {
    fail("no layout of {} GPUs fits {} a device with a global batch of {}", request.gpus,
         exact_bytes(request.budget > 0 ? request.budget : default_budget(hw)),
         request.global_batch);
  }
  return 0;
}

}  // namespace memwall::cli
