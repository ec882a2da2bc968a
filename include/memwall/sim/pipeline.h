// Pipeline parallelism in the simulator: several devices, each running its
// model chunks' forward and backward passes of every micro-batch in the
// order a schedule gives, with point-to-point transfers between chunks on
// different devices (Note [Pipeline simulation] in src/sim/pipeline.cc).
// The bubble, the step time and the micro-batches each device holds at once
// come out of the simulation, not a formula.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace memwall {

enum class PipelineSchedule : uint8_t {
  kGPipe,        // Huang et al. 2019: every forward, then every backward
  kOneFOneB,     // PipeDream-Flush (Narayanan et al. 2021): warm-up, one forward one backward
  kInterleaved,  // Narayanan et al. 2021 (SC21): v chunks per device, round-robin
  kHanayo,       // Liu et al. 2023 (SC23): chunks placed in waves, down and back up
};
std::string_view to_string(PipelineSchedule schedule);
// gpipe, 1f1b, interleaved, hanayo; nullopt for any other name.
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view name);

// What one micro-batch costs on one model chunk (a virtual stage), as
// src/sim/pipeline_chunks.cc measures it from the chunk's ops.
struct ChunkCost {
  double forward = 0;   // seconds of its forward ops
  double backward = 0;  // seconds of its backward ops
  double optimizer = 0;  // seconds of its optimizer step, once per step after the last backward
  // Seconds of its gradients' all-reduce over the data-parallel replicas,
  // after the last backward and before the optimizer step.
  double grad_sync = 0;
  uint64_t grads = 0;  // bytes of its parameters' gradients (among `states`)
  uint64_t optimizer_states = 0;  // bytes of its optimizer states (among `states`)
  // Of those, the expert-parallel experts' (Note [Expert parallelism in the
  // zoo] in src/models/expert_parallel.cc): replicated over d / e ranks,
  // not d.
  uint64_t expert_grads = 0;
  uint64_t expert_optimizer_states = 0;
  // Bytes the engine keeps the whole step beside the states, a
  // micro-batch's (the simulation counts one set for every micro-batch):
  // under torch.distributed.pipelining a receive buffer for its input and
  // one for its output's gradient (Note [Pipeline engines]).
  uint64_t engine_buffers = 0;
  uint64_t states = 0;   // bytes resident the whole step: parameters, their gradients, optimizer states
  // Bytes one micro-batch holds from the end of its forward to the start of
  // its backward (the activations saved for backward, the received input
  // among them).
  uint64_t saved = 0;
  // The most bytes above the states and the other micro-batches' saved ones
  // while its forward runs (its own saved bytes growing among them), and
  // while its backward runs (its own saved bytes at the start included).
  uint64_t forward_peak = 0;
  uint64_t backward_peak = 0;
  // The most bytes above the states while its optimizer step runs (after
  // the last backward, nothing in flight).
  uint64_t optimizer_peak = 0;
  // The largest unit's parameter and gradient bytes among its states: a
  // layer's, or a parameter outside every layer (ZeRO-3 gathers a unit at
  // a time, Note [ZeRO in a pipeline stage] in src/sim/pipeline_zero.cc).
  uint64_t largest_unit_params = 0;
  uint64_t largest_unit_grads = 0;
  uint64_t param_elements = 0;  // its parameters' elements (what an optimizer step updates)
  // Bytes of the gradients of parameters another chunk holds too (a tied
  // embedding), all-reduced between the two after the last backward.
  uint64_t shared_grads = 0;
  // Bytes held in host memory instead of the device's (its optimizer
  // states offloaded: Note [Offload in a pipeline stage] in
  // src/planner/pipeline_plan.cc), not among `states`.
  uint64_t host_states = 0;
  // Bytes it sends, per micro-batch, to the next chunk (activations) and to
  // the previous one (their gradients).
  uint64_t send_forward = 0;
  uint64_t send_backward = 0;
};

// A point-to-point link: seconds = latency + bytes / bandwidth.
struct P2pLink {
  double bandwidth = 0;  // bytes/s, one direction
  double latency = 0;
};

struct PipelineSetup {
  // Chunks in model order: devices x chunks_per_device of them.
  std::vector<ChunkCost> chunks;
  int devices = 1;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  // Devices d and d' share a node when d / devices_per_node == d' / devices_per_node.
  int devices_per_node = 1;
  P2pLink in_node;
  P2pLink across_nodes;
  // Per chunk, the device it runs on: a placement of its own (a
  // non-contiguous one, memwall/planner/pipeline_placement.h), any chunk
  // count of at least one a device, run by the list schedule (Note
  // [Pipeline simulation]). Empty: the schedule's own (chunk_device).
  std::vector<int> chunk_devices;
  // Activations swapped to host memory between a micro-batch's forward and
  // its backward (Note [Swapped activations in a pipeline stage] in
  // src/sim/pipeline.cc): a device keeps at most two micro-batch chunks'
  // saved bytes, the host the rest.
  bool swap_activations = false;
};

// The device that runs a chunk under a schedule: chunk % devices for GPipe,
// 1F1B and interleaved (Megatron's round-robin), and Hanayo's waves, which
// go down the devices and back up (device devices-1-(chunk % devices) on
// every odd pass).
int chunk_device(PipelineSchedule schedule, int chunk, int devices);

// The most micro-batch chunks a schedule holds on a device at once: all m
// under GPipe, devices - device under 1F1B (at most m), interleaved 1F1B's
// warm-up plus one (at most m x chunks per device).
int schedule_in_flight(PipelineSchedule schedule, int devices, int chunks_per_device,
                       int micro_batches, int device);

// Under an explicit placement (PipelineSetup::chunk_devices): the most
// micro-batches the list schedule holds in flight on one chunk: all m under
// GPipe, else min(m, devices), as many as keep the first chunk busy while
// its oldest micro-batch goes down the model and back.
int placement_in_flight(PipelineSchedule schedule, int devices, int micro_batches);

// Seconds to send `bytes` from device `from` to device `to` over the
// setup's links (0 on one device); its chunks are not read.
double transfer_seconds(const PipelineSetup& setup, int from, int to, uint64_t bytes);

// One forward or backward pass of one micro-batch on one chunk.
struct PipelineTask {
  int device = 0;
  int chunk = 0;
  int micro_batch = 0;
  bool backward = false;
  double start = 0;
  double end = 0;
};

struct PipelineDevice {
  double busy = 0;              // seconds of forward and backward passes
  double grad_sync = 0;         // seconds of its chunks' gradient all-reduces
  double optimizer = 0;         // seconds of its chunks' optimizer steps
  double idle = 0;              // seconds without a pass between the step's start and its last pass's end
  uint64_t states = 0;          // bytes of its chunks' states
  uint64_t host_states = 0;     // bytes of its chunks' states in host memory
  uint64_t host_activations = 0;  // the most saved bytes it had swapped to the host at once
  uint64_t engine_buffers = 0;  // bytes of its chunks' engine buffers (ChunkCost)
  uint64_t peak_bytes = 0;      // the most bytes it held at once
  int peak_in_flight = 0;       // micro-batch chunks held (forward done, backward not) at its peak
  int max_in_flight = 0;        // the most micro-batch chunks it held at once
};

struct PipelineResult {
  double step_time = 0;  // the last device's optimizer step's end (after its gradient all-reduce)
  double passes_end = 0;  // the last backward's end
  // Idle over the step's pass time, summed over devices: sum(idle) /
  // (devices x passes_end).
  double bubble_fraction = 0;
  std::vector<PipelineDevice> devices;
  std::vector<PipelineTask> tasks;  // in the order they were started
};

// Simulates one training step. Throws Error on a setup no schedule can run:
// no chunks, a chunk count that is not a multiple of the devices, several
// chunks per device under GPipe or 1F1B, interleaved with micro-batches not
// a multiple of the devices (Megatron-LM's requirement), counts out of
// range; with chunk_devices, none of the count rules but one device per
// chunk, each in range, and every device with a chunk.
PipelineResult simulate_pipeline(const PipelineSetup& setup);

// The order a device runs its passes in under the static schedules (GPipe,
// 1F1B, interleaved): exposed for tests. Hanayo's order and an explicit
// placement's come out of the simulation (Note [Pipeline simulation]):
// empty.
std::vector<PipelineTask> device_order(const PipelineSetup& setup, int device);

}  // namespace memwall
