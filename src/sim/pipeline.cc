// Pipeline parallelism in the simulator (memwall/sim/pipeline.h).
//
// Note [Pipeline simulation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A step is 2 x micro-batches x chunks passes. Each device runs one pass at
// a time on its compute stream. A pass starts when its device is free and
// its inputs are there:
//   - forward of chunk c, micro-batch j: the forward of chunk c-1 ended,
//     plus the transfer of chunk c-1's output when the two chunks sit on
//     different devices;
//   - backward of chunk c: its own forward ended, and the backward of chunk
//     c+1 ended plus the transfer of its input gradient (the last chunk's
//     backward starts from the loss, at the end of its forward).
// A transfer takes latency + bytes / bandwidth of the link (in a node or
// across nodes) and does not hold the sender: Megatron-LM's p2p calls are
// batched isend/irecv pairs, and the receiver is the one that waits.
// GPipe, 1F1B and interleaved 1F1B give each device a fixed order of passes
// (device_order below, Megatron-LM's schedules.py as written): the device
// runs them in that order, waiting where an input is late. Hanayo's waves
// (Liu et al., SC23) are simulated as a list schedule over their placement:
// when its device is free, the ready pass goes first, backward before
// forward, the earliest micro-batch first, forwards of one micro-batch group
// (as many micro-batches as devices) at a time and at most as many
// micro-batch chunks in flight on a device as interleaved 1F1B allows it
// (warm-up plus one). This is memwall's list schedule, not the paper's
// hand-made one: on equal chunks it leaves more bubble than interleaved 1F1B
// (docs/pipeline.md, "Known gaps").
// An explicit placement (PipelineSetup::chunk_devices, a non-contiguous
// one from Note [Non-contiguous placement]) runs on the same list schedule,
// with any number of chunks a device: every pass whose inputs are there may
// go, with at most placement_in_flight micro-batches in flight on each
// chunk and no micro-batch groups. It cannot deadlock: the oldest
// micro-batch in flight on a chunk is forwarded, or has room to be, on the
// next chunk (forwards go in micro-batch order), so the last chunk's
// backward of it can always run, and so on back up the chain.
// After its last backward, each device all-reduces its chunks' gradients
// over the data-parallel replicas, then runs their optimizer steps.
//
// Note [Swapped activations in a pipeline stage]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With PipelineSetup::swap_activations (vDNN's swapping per stage, as
// MPress combines it with pipelines), a micro-batch chunk's saved bytes go
// to host memory once its forward is done and come back before its
// backward: while a pass runs the device holds, of the other micro-batch
// chunks in flight, at most two's saved bytes (the last one going out and
// the next backward's coming in; counted as twice the device's largest
// chunk's), the host the rest. The copies' time is the planner's (Note
// [Offload in a pipeline stage] in src/planner/pipeline_plan.cc charges
// what a pass does not hide); the memory is counted here.
//
// Memory per device: its chunks' states throughout, plus the saved bytes of
// every micro-batch chunk whose forward ended and whose backward has not,
// plus the running pass's own peak (ChunkCost). Passes on a device do not
// overlap, so the in-flight set changes only between them and the peak is
// exact for these inputs. The bubble is what the devices did not compute
// between the step's start and the last backward's end.
#include "memwall/sim/pipeline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "memwall/base/error.h"

namespace memwall {
namespace {

constexpr int kMaxCount = 1 << 20;  // devices, chunks, micro-batches: keeps counts in int

struct Shape {
  int devices = 0;
  int per_device = 0;  // chunks per device
  int chunks = 0;
  int micro_batches = 0;
};

// One device per chunk, each in range, and a chunk on every device.
void check_chunk_devices(const PipelineSetup& s) {
  if (s.chunk_devices.size() != s.chunks.size()) {
    fail("pipeline: {} chunk devices for {} chunks: give one device a chunk",
         s.chunk_devices.size(), s.chunks.size());
  }
  std::vector<int> held(s.devices, 0);
  for (size_t c = 0; c < s.chunk_devices.size(); ++c) {
    const int d = s.chunk_devices[c];
    if (d < 0 || d >= s.devices) {
      fail("pipeline: chunk {} is placed on device {}: the devices are 0 to {}", c, d,
           s.devices - 1);
    }
    ++held[d];
  }
  for (int d = 0; d < s.devices; ++d) {
    if (held[d] == 0) fail("pipeline: device {} has no chunk in the placement", d);
  }
}

Shape check_setup(const PipelineSetup& s) {
  if (s.devices < 1 || s.devices > kMaxCount) {
    fail("pipeline: devices must be from 1 to {} (got {})", kMaxCount, s.devices);
  }
  if (s.micro_batches < 1 || s.micro_batches > kMaxCount) {
    fail("pipeline: micro-batches must be from 1 to {} (got {})", kMaxCount, s.micro_batches);
  }
  const size_t chunks = s.chunks.size();
  const bool placed = !s.chunk_devices.empty();
  if (placed) check_chunk_devices(s);
  if (chunks == 0 || (!placed && chunks % static_cast<size_t>(s.devices) != 0) ||
      chunks > kMaxCount) {
    fail("pipeline: {} chunks over {} devices: give a positive multiple of the devices", chunks,
         s.devices);
  }
  // Under an explicit placement the count varies by device; nothing reads it.
  const int per_device = placed ? 0 : static_cast<int>(chunks) / s.devices;
  const bool one_chunk =
      s.schedule == PipelineSchedule::kGPipe || s.schedule == PipelineSchedule::kOneFOneB;
  if (!placed && one_chunk && per_device != 1) {
    fail("pipeline: {} runs one chunk per device (got {}); interleaved and hanayo run several",
         to_string(s.schedule), per_device);
  }
  if (!placed && s.schedule == PipelineSchedule::kInterleaved && s.micro_batches % s.devices != 0) {
    fail(
        "pipeline: interleaved 1F1B runs micro-batches in groups of the {} devices: {} "
        "micro-batches is not a multiple (Megatron-LM's requirement)",
        s.devices, s.micro_batches);
  }
  if (s.devices_per_node < 1) fail("pipeline: devices per node must be at least 1");
  for (const P2pLink& link : {s.in_node, s.across_nodes}) {
    if (s.devices > 1 && (!(link.bandwidth > 0) || !(link.latency >= 0))) {
      fail("pipeline: a link needs a positive bandwidth and a latency of 0 or more");
    }
  }
  for (const ChunkCost& c : s.chunks) {
    for (const double t : {c.forward, c.backward, c.optimizer, c.grad_sync}) {
      if (!(t >= 0) || !std::isfinite(t))
        fail("pipeline: a chunk's time is negative or not finite");
    }
  }
  return {s.devices, per_device, static_cast<int>(chunks), s.micro_batches};
}

// Megatron-LM's interleaved schedule: the k-th forward (or backward) pass
// of a device runs local chunk (k mod (devices x v)) / devices (backward:
// from the last chunk) on micro-batch group k / (devices x v).
// The model chunk a device's local chunk is: round-robin, or Hanayo's
// waves, every odd pass from the last device back.
int local_chunk(PipelineSchedule schedule, int local, int device, int devices) {
  const bool back = schedule == PipelineSchedule::kHanayo && local % 2 == 1;
  return local * devices + (back ? devices - 1 - device : device);
}

PipelineTask interleaved_pass(const Shape& s, PipelineSchedule schedule, int device, int k,
                              bool backward) {
  const int group_size = s.devices * s.per_device;
  const int in_group = k % group_size;
  int local = in_group / s.devices;
  if (backward) local = s.per_device - 1 - local;
  const int micro_batch = k / group_size * s.devices + in_group % s.devices;
  return {.device = device,
          .chunk = local_chunk(schedule, local, device, s.devices),
          .micro_batch = micro_batch,
          .backward = backward};
}

// The forwards a device runs before its first backward under interleaved
// 1F1B (Megatron-LM: (devices - device - 1) x 2 + (v - 1) x devices, all of
// them when the micro-batches equal the devices): twice its distance from
// the device of the last chunk, where backwards start, plus a round of the
// other chunks. Hanayo's waves end on device 0 after an even number of
// passes, so there the distance runs the other way.
int interleaved_warmup(const Shape& s, PipelineSchedule schedule, int device) {
  const int total = s.micro_batches * s.per_device;
  if (s.micro_batches == s.devices) return total;
  const int last = chunk_device(schedule, s.chunks - 1, s.devices);
  return std::min(std::abs(last - device) * 2 + (s.per_device - 1) * s.devices, total);
}

std::vector<PipelineTask> static_order(const Shape& s, PipelineSchedule schedule, int device) {
  std::vector<PipelineTask> order;
  const auto pass = [&](int micro_batch, bool backward) {
    order.push_back(
        {.device = device, .chunk = device, .micro_batch = micro_batch, .backward = backward});
  };
  const int m = s.micro_batches;
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      for (int j = 0; j < m; ++j) pass(j, false);
      for (int j = 0; j < m; ++j) pass(j, true);
      break;
    case PipelineSchedule::kOneFOneB: {
      const int warmup = std::min(s.devices - device - 1, m);
      for (int j = 0; j < warmup; ++j) pass(j, false);
      for (int j = 0; j + warmup < m; ++j) {
        pass(j + warmup, false);
        pass(j, true);
      }
      for (int j = std::max(m - warmup, 0); j < m; ++j) pass(j, true);
      break;
    }
    case PipelineSchedule::kInterleaved: {
      const int total = m * s.per_device;
      const int warmup = interleaved_warmup(s, schedule, device);
      for (int k = 0; k < warmup; ++k)
        order.push_back(interleaved_pass(s, schedule, device, k, false));
      for (int k = 0; k + warmup < total; ++k) {
        order.push_back(interleaved_pass(s, schedule, device, k + warmup, false));
        order.push_back(interleaved_pass(s, schedule, device, k, true));
      }
      for (int k = total - warmup; k < total; ++k) {
        order.push_back(interleaved_pass(s, schedule, device, k, true));
      }
      break;
    }
    case PipelineSchedule::kHanayo:
      break;  // a list schedule (Note [Pipeline simulation])
  }
  return order;
}

constexpr double kNotYet = std::numeric_limits<double>::infinity();

// End times of every pass scheduled so far, and when each pass's inputs are there.
class Passes {
 public:
  Passes(const PipelineSetup& setup, const Shape& shape, const std::vector<int>& device_of)
      : setup_(setup),
        shape_(shape),
        device_of_(device_of),
        forward_end_(static_cast<size_t>(shape.chunks) * shape.micro_batches, kNotYet),
        backward_end_(forward_end_.size(), kNotYet) {}

  // When the pass's inputs are on its device; kNotYet while a pass it
  // needs is not scheduled.
  double ready(const PipelineTask& t) const {
    const int c = t.chunk;
    const int device = device_of_[c];
    if (!t.backward) {
      if (c == 0) return 0;
      const double before = forward_end_[at(c - 1, t.micro_batch)];
      const int from = device_of_[c - 1];
      return before + transfer_seconds(setup_, from, device, setup_.chunks[c - 1].send_forward);
    }
    const double own = forward_end_[at(c, t.micro_batch)];
    if (c + 1 == shape_.chunks) return own;
    const double after = backward_end_[at(c + 1, t.micro_batch)];
    const int from = device_of_[c + 1];
    return std::max(
        own, after + transfer_seconds(setup_, from, device, setup_.chunks[c + 1].send_backward));
  }
  bool done(const PipelineTask& t) const {
    return (t.backward ? backward_end_ : forward_end_)[at(t.chunk, t.micro_batch)] != kNotYet;
  }
  void record(const PipelineTask& t) {
    (t.backward ? backward_end_ : forward_end_)[at(t.chunk, t.micro_batch)] = t.end;
  }
  double duration(const PipelineTask& t) const {
    const ChunkCost& c = setup_.chunks[t.chunk];
    return t.backward ? c.backward : c.forward;
  }

 private:
  size_t at(int chunk, int micro_batch) const {
    return static_cast<size_t>(chunk) * shape_.micro_batches + micro_batch;
  }
  const PipelineSetup& setup_;
  Shape shape_;
  const std::vector<int>& device_of_;
  std::vector<double> forward_end_;
  std::vector<double> backward_end_;
};

// Runs each device's fixed order: the device whose next pass can start
// first goes next.
std::vector<PipelineTask> run_static(const PipelineSetup& setup, const Shape& shape,
                                     const std::vector<int>& device_of) {
  std::vector<std::vector<PipelineTask>> orders;
  for (int d = 0; d < shape.devices; ++d) orders.push_back(static_order(shape, setup.schedule, d));
  std::vector<size_t> next(shape.devices, 0);
  std::vector<double> free_at(shape.devices, 0);
  Passes passes(setup, shape, device_of);
  std::vector<PipelineTask> ran;
  const size_t total = static_cast<size_t>(2) * shape.chunks * shape.micro_batches;
  while (ran.size() < total) {
    int best = -1;
    double best_start = kNotYet;
    for (int d = 0; d < shape.devices; ++d) {
      if (next[d] == orders[d].size()) continue;
      const double start = std::max(free_at[d], passes.ready(orders[d][next[d]]));
      if (start < best_start) {
        best_start = start;
        best = d;
      }
    }
    if (best < 0)
      fail("pipeline: internal error: {} waits on a pass never run", to_string(setup.schedule));
    PipelineTask t = orders[best][next[best]++];
    t.start = best_start;
    t.end = best_start + passes.duration(t);
    passes.record(t);
    free_at[best] = t.end;
    ran.push_back(t);
  }
  return ran;
}

// Hanayo's waves, or an explicit placement, as a list schedule (Note
// [Pipeline simulation]).
std::vector<PipelineTask> run_list(const PipelineSetup& setup, const Shape& shape,
                                   const std::vector<int>& device_of) {
  const bool placed = !setup.chunk_devices.empty();
  std::vector<std::vector<int>> chunks_of(shape.devices);
  for (int c = 0; c < shape.chunks; ++c) chunks_of[device_of[c]].push_back(c);
  // Priority: backward first, then earlier micro-batches, each as deep into
  // the wave as it has come (backward: the later chunk; forward: the
  // earlier), so that the first micro-batch turns and comes back soonest.
  const int group = shape.devices;
  const auto key = [&](const PipelineTask& t) {
    return std::make_tuple(t.backward ? 0 : 1, t.micro_batch, t.backward ? -t.chunk : t.chunk);
  };
  Passes passes(setup, shape, device_of);
  std::vector<double> free_at(shape.devices, 0);
  std::vector<int> in_flight(shape.devices, 0);
  std::vector<int> chunk_in_flight(shape.chunks, 0);
  std::vector<int> forwards_run(shape.devices, 0);
  std::vector<int> cap(shape.devices);
  for (int d = 0; d < shape.devices && !placed; ++d) {
    cap[d] = interleaved_warmup(shape, setup.schedule, d) + 1;
  }
  const int chunk_cap = placement_in_flight(setup.schedule, shape.devices, shape.micro_batches);
  std::vector<PipelineTask> ran;
  const size_t total = static_cast<size_t>(2) * shape.chunks * shape.micro_batches;
  while (ran.size() < total) {
    int best_device = -1;
    double best_start = kNotYet;
    PipelineTask best_task;
    for (int d = 0; d < shape.devices; ++d) {
      // The passes it may run: every backward whose inputs are scheduled,
      // and each chunk's next forward (a chunk's forwards go in micro-batch
      // order) while under its cap.
      std::vector<std::pair<PipelineTask, double>> candidates;
      // Forwards of the device's first micro-batch group with one not run.
      const int open_group = placed ? 0 : forwards_run[d] / (group * shape.per_device);
      for (const int c : chunks_of[d]) {
        bool next_forward = placed ? chunk_in_flight[c] < chunk_cap : in_flight[d] < cap[d];
        for (int j = 0; j < shape.micro_batches; ++j) {
          for (const bool backward : {true, false}) {
            const PipelineTask t{.device = d, .chunk = c, .micro_batch = j, .backward = backward};
            if (passes.done(t) || (!backward && !next_forward)) continue;
            if (!backward) next_forward = false;
            if (!backward && !placed && j / group != open_group) continue;
            const double ready = passes.ready(t);
            if (ready != kNotYet) candidates.emplace_back(t, std::max(free_at[d], ready));
          }
        }
      }
      // The earliest any can start; the first by priority among those
      // ready by then.
      double start = kNotYet;
      for (const auto& [t, at] : candidates) start = std::min(start, at);
      std::optional<PipelineTask> pick;
      for (const auto& [t, at] : candidates) {
        if (at <= start && (!pick || key(t) < key(*pick))) pick = t;
      }
      if (pick && start < best_start) {
        best_start = start;
        best_device = d;
        best_task = *pick;
      }
    }
    if (best_device < 0) fail("pipeline: internal error: the list schedule is stuck");
    PipelineTask t = best_task;
    t.start = best_start;
    t.end = best_start + passes.duration(t);
    passes.record(t);
    free_at[best_device] = t.end;
    in_flight[best_device] += t.backward ? -1 : 1;
    chunk_in_flight[t.chunk] += t.backward ? -1 : 1;
    forwards_run[best_device] += t.backward ? 0 : 1;
    ran.push_back(t);
  }
  return ran;
}

}  // namespace

std::string_view to_string(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      return "gpipe";
    case PipelineSchedule::kOneFOneB:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
    case PipelineSchedule::kHanayo:
      return "hanayo";
  }
  return "?";
}

std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view name) {
  for (const PipelineSchedule s : {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB,
                                   PipelineSchedule::kInterleaved, PipelineSchedule::kHanayo}) {
    if (to_string(s) == name) return s;
  }
  return std::nullopt;
}

int chunk_device(PipelineSchedule schedule, int chunk, int devices) {
  const int pass = chunk / devices;
  const int at = chunk % devices;
  if (schedule == PipelineSchedule::kHanayo && pass % 2 == 1) return devices - 1 - at;
  return at;
}

int schedule_in_flight(PipelineSchedule schedule, int devices, int chunks_per_device,
                       int micro_batches, int device) {
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      return micro_batches;
    case PipelineSchedule::kOneFOneB:
      return std::min(devices - device, micro_batches);
    case PipelineSchedule::kInterleaved:
    case PipelineSchedule::kHanayo: {
      const Shape s{devices, chunks_per_device, devices * chunks_per_device, micro_batches};
      return std::min(interleaved_warmup(s, schedule, device) + 1,
                      micro_batches * chunks_per_device);
    }
  }
  return micro_batches;
}

int placement_in_flight(PipelineSchedule schedule, int devices, int micro_batches) {
  return schedule == PipelineSchedule::kGPipe ? micro_batches : std::min(micro_batches, devices);
}

double transfer_seconds(const PipelineSetup& setup, int from, int to, uint64_t bytes) {
  if (from == to) return 0;
  const bool same_node = from / setup.devices_per_node == to / setup.devices_per_node;
  const P2pLink& link = same_node ? setup.in_node : setup.across_nodes;
  return link.latency + static_cast<double>(bytes) / link.bandwidth;
}

std::vector<PipelineTask> device_order(const PipelineSetup& setup, int device) {
  const Shape shape = check_setup(setup);
  if (device < 0 || device >= shape.devices) fail("pipeline: no device {}", device);
  if (!setup.chunk_devices.empty()) return {};  // the list schedule's
  return static_order(shape, setup.schedule, device);
}

PipelineResult simulate_pipeline(const PipelineSetup& setup) {
  const Shape shape = check_setup(setup);
  std::vector<int> device_of = setup.chunk_devices;
  if (device_of.empty()) {
    for (int c = 0; c < shape.chunks; ++c) {
      device_of.push_back(chunk_device(setup.schedule, c, shape.devices));
    }
  }
  PipelineResult result;
  result.tasks = setup.schedule == PipelineSchedule::kHanayo || !setup.chunk_devices.empty()
                     ? run_list(setup, shape, device_of)
                     : run_static(setup, shape, device_of);
  result.devices.resize(shape.devices);
  std::vector<double> last_end(shape.devices, 0);
  std::vector<uint64_t> saved_in_flight(shape.devices, 0);
  std::vector<int> count_in_flight(shape.devices, 0);
  std::vector<uint64_t> largest_saved(shape.devices, 0);
  for (int c = 0; c < shape.chunks; ++c) {
    largest_saved[device_of[c]] = std::max(largest_saved[device_of[c]], setup.chunks[c].saved);
  }
  for (int c = 0; c < shape.chunks; ++c) {
    PipelineDevice& d = result.devices[device_of[c]];
    d.states = checked_add(d.states, setup.chunks[c].states, "a pipeline device's states");
    d.host_states =
        checked_add(d.host_states, setup.chunks[c].host_states, "a pipeline device's host states");
    // Note [Pipeline engines]: a set of receive buffers for every micro-batch.
    d.engine_buffers = checked_add(
        d.engine_buffers,
        checked_mul(setup.chunks[c].engine_buffers, static_cast<uint64_t>(setup.micro_batches),
                    "a pipeline device's engine buffers"),
        "a pipeline device's engine buffers");
    d.optimizer += setup.chunks[c].optimizer;
    d.grad_sync += setup.chunks[c].grad_sync;
  }
  for (int c = 0; c < shape.chunks; ++c) {
    PipelineDevice& d = result.devices[device_of[c]];
    d.peak_bytes =
        std::max(d.peak_bytes,
                 checked_add(checked_add(d.states, d.engine_buffers, "a pipeline device's bytes"),
                             setup.chunks[c].optimizer_peak, "a pipeline device's bytes"));
  }
  // Tasks were started in time order, and each device's in start order.
  for (const PipelineTask& t : result.tasks) {
    PipelineDevice& d = result.devices[t.device];
    const ChunkCost& c = setup.chunks[t.chunk];
    d.busy += t.end - t.start;
    last_end[t.device] = t.end;
    result.passes_end = std::max(result.passes_end, t.end);
    uint64_t others = saved_in_flight[t.device] - (t.backward ? c.saved : 0);
    if (setup.swap_activations) {
      // Note [Swapped activations in a pipeline stage].
      const uint64_t kept = std::min(others, checked_mul(largest_saved[t.device], 2, "bytes"));
      d.host_activations = std::max(d.host_activations, others - kept);
      others = kept;
    }
    const uint64_t bytes = checked_add(
        checked_add(checked_add(d.states, d.engine_buffers, "a pipeline device's bytes"), others,
                    "a pipeline device's bytes"),
        t.backward ? c.backward_peak : c.forward_peak, "a pipeline device's bytes");
    if (bytes > d.peak_bytes) {
      d.peak_bytes = bytes;
      d.peak_in_flight = count_in_flight[t.device];
    }
    if (t.backward) {
      saved_in_flight[t.device] -= c.saved;
      --count_in_flight[t.device];
    } else {
      saved_in_flight[t.device] =
          checked_add(saved_in_flight[t.device], c.saved, "a pipeline device's bytes");
      d.max_in_flight = std::max(d.max_in_flight, ++count_in_flight[t.device]);
    }
  }
  double idle = 0;
  for (int i = 0; i < shape.devices; ++i) {
    PipelineDevice& d = result.devices[i];
    d.idle = result.passes_end - d.busy;
    idle += d.idle;
    result.step_time = std::max(result.step_time, last_end[i] + d.grad_sync + d.optimizer);
  }
  result.bubble_fraction = result.passes_end > 0 ? idle / (shape.devices * result.passes_end) : 0;
  return result;
}

}  // namespace memwall
