// The discrete-event simulator (simulator.h).
//
// Note [Simulation model]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Residency is a property of the plan's order; time is a property of the
// resources. Walking the steps in order, the simulator keeps, per buffer,
// which tiers hold a copy of it and when each copy is ready, and per
// resource, when it is next free.
//
// Issue. A runtime's host thread launches work in plan order and, for a
// device compute step, does not run ahead of the compute stream: the issue
// time ("cursor") is the start time of the latest device compute step (0
// before the first). Every other step issues at the cursor. So a swap_in
// placed after compute op k overlaps op k: it is a prefetch one op ahead;
// placed further back, it starts earlier.
//
// Note [The emulated device's thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On a device emulated by the host's cores (Hardware::device_is_host_cpu:
// memwall run on a machine without a GPU) there is no stream to run ahead
// of: the executor's thread runs each kernel itself, and blocks wherever
// the executor waits. So there the cursor is the END of the latest compute
// step (device or host), a prefetch placed after op k runs beside op k+1
// (or beside nothing, when op k+1 reads it), and the cursor also moves to
// the end of every wait the executor's thread makes: a compute starts no
// earlier than the cursor, a swap_out waits for its buffer to arrive, a
// swap_in for its source (a swap_out's copy to the host, or a synchronous
// NVMe read into a bounce buffer), a write to NVMe and a read from it into
// host memory run on the thread, and a free waits for its buffer to
// arrive. Measured on the CNN with batch norm's vDNN plan, the start-cursor
// model predicted a transfer overlap of 0.93-0.96 where the executor
// measured 0.77.
//
// Start and end. A step starts when its resource is free, it has issued, and
// its data is ready: compute waits for every input (`in` and `updates`) on
// its tier, and for in-flight copies of the buffers it updates (a copy must
// not see half-updated data); swap_out waits for the buffer to be produced;
// swap_in waits for its source copy. Durations come from the cost model
// (hw/cost_model): op_time for device compute; h2d_time/d2h_time for copies
// (bandwidth and latency; with the profile's copy contention, copies and
// compute slow each other, Note [Copy contention] in sim_contention.cc);
// bytes / NVMe bandwidth for NVMe, which is reached
// through a host bounce buffer (NVMe->host->device, device->host->NVMe);
// parameters / CPU Adam throughput for an optimizer op on the host.
// A swap_in "to" host reads NVMe into host memory, and a swap_out to NVMe of
// a buffer with no device copy writes its host copy back (host compute on
// NVMe-resident states). These serve the host CPU, whose thread issues them
// in plan order too: they issue at the later of the cursor and the start of
// the latest host compute step, so that a read placed after host step k
// prefetches one step ahead instead of buffering every state at once. A collective (an op of phase
// comm, e.g. ZeRO's all-gather or reduce-scatter) runs on its own stream: it issues at the cursor
// without moving it, takes collective_time of its bytes, and allocates its outputs at issue like a
// swap_in.
//
// Memory. Device compute allocates its outputs and workspace at its start;
// swap_in allocates device memory at issue; swap_out and the destination of
// any copy allocate at issue; bounce buffers are held while in flight. A
// swap_out releases the device copy when the copy ends (and pending readers
// are done); a swap_in releases its source copy when it ends, unless the
// buffer is persistent (param, optim_state: the source is its home copy);
// free releases the device copy, or if there is none, every other copy,
// after pending readers and copies; an op that updates a buffer drops the
// copies on other tiers (they are stale). Device allocations happen in
// non-decreasing time (compute starts are ordered and the cursor follows
// them), so device usage is exact when releases (kept in a heap) are applied
// before each allocation at or after their time. Host and NVMe events are
// not ordered that way; their curves are built by sorting at the end.
//
// Validity, in plan order: a compute finds each input on its tier (not
// freed, not swapped out, not yet created is an error, with the step that
// made it so); an op is computed once, recomputed only after it was computed
// and only if it updates nothing in place; swap_out needs a device copy
// (or, to NVMe, a host copy), swap_in needs none on its destination and a
// copy below it; free needs a copy, and may not
// drop the last copy of a persistent buffer; device bytes stay within the
// budget (time order); with offsets, co-resident buffers do not overlap and
// every allocated buffer has an offset. At the end, every op has been
// computed and every persistent buffer has a copy on its starting tier; host
// bytes stay within the host's memory.
//
// Note [Synchronous write-backs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A write of a host copy back to NVMe (a CPU step's states) holds the host
// thread until it ends: what that thread issues after it (the next read
// from NVMe, and so the next CPU step) waits. DeepSpeed's optimizer
// swapper writes a sub-group out and waits before it reads the next
// (pipeline_write off, its default; partitioned_optimizer_swapper.py), and
// memwall's executor writes on the thread that steps. Issued without the
// wait, the CPU steps ran at the reads' pace and the states waiting for the
// slower writes piled up on the host: 286 GiB a rank for a 1T GPT under
// ZeRO-Infinity on a DGX-2, where DeepSpeed holds 4 sub-group buffers. A
// plan overlaps reads with writes by reading ahead (nvme_read_ahead).
//
// Ranks. A graph of N data-parallel ranks (graph_ranks) is one rank's
// iteration, and `hardware` its node's profile: the simulator runs the rank
// on rank_share(hardware, N) (Note [Ranks on a node] in hw/ranks.cc), so
// host memory, host<->device and NVMe bandwidth and the CPU are the rank's
// share of the node's.
#include "memwall/sim/simulator.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/versions.h"
#include "memwall/plan/in_place.h"
#include "simulator_impl.h"

namespace memwall {
namespace sim_detail {

Simulator::Simulator(const Graph& graph, const Plan& plan, const Hardware& hw,
                     const SimOptions& options)
    : graph_(graph),
      plan_(plan),
      hw_(rank_share(hw, graph_gpus(graph))),
      node_ranks_(ranks_per_node(hw, graph_gpus(graph))),
      options_(options),
      state_(graph.buffers.size()),
      computed_(graph.ops.size(), 0) {
  result_.budget = plan.budget;
  op_time_.reserve(graph.ops.size());
  for (const Op& op : graph.ops) op_time_.push_back(op_time(hw_, graph, op));
  if (!plan.offsets.empty()) {
    stays_.assign(graph.buffers.size(), 0);
    held_at_.assign(graph.buffers.size(), kNoOffset);
  }
  if (options.record_timeline) result_.timeline.reserve(plan.steps.size());
  if (options.record_residency) open_stay_.assign(graph.buffers.size(), 0);
  in_place_ = in_place_steps(graph, plan);  // Note [In-place steps] in src/plan/in_place.cc
}

SimResult Simulator::run() {
  if (!place_initial_buffers()) return finish();
  const auto n = static_cast<uint32_t>(plan_.steps.size());
  for (step_ = 0; step_ < n; ++step_) {
    if (!execute(plan_.steps[step_])) return finish();
  }
  result_.steps_executed = plan_.steps.size();
  check_end();
  return finish();
}

// ---- Failure ------------------------------------------------------------------
std::string Simulator::absence(BufferId b, size_t tier) const {
  const Copy& c = state_[b].copies[tier];
  const auto where = to_string(static_cast<Tier>(tier));
  switch (c.gone) {
    case Gone::kFreed:
      return fmt::format("it was freed at step {}", c.gone_step);
    case Gone::kSwappedOut:
      return fmt::format("it was swapped out at step {}", c.gone_step);
    case Gone::kMovedIn:
      return fmt::format("its {} copy moved to the device at step {}", where, c.gone_step);
    case Gone::kStale:
      return fmt::format("its {} copy went stale when step {} updated it elsewhere", where,
                         c.gone_step);
    case Gone::kConsumed:
      return fmt::format("step {} updated it in place into its next version", c.gone_step);
    case Gone::kNever:
      break;
  }
  const BufferKind kind = graph_.buffers[b].kind;
  if (!exists_before_first_op(kind) && !ever_created_[b]) return "no op has created it yet";
  const auto it = plan_.placement.find(b);
  const Tier start = it == plan_.placement.end() ? Tier::kDevice : it->second;
  return fmt::format("it is not on the {} (it started on the {})", where, to_string(start));
}

// ---- Steps ---------------------------------------------------------------------
bool Simulator::place_initial_buffers() {
  step_ = 0;
  ever_created_.assign(graph_.buffers.size(), 0);
  for (const Buffer& b : graph_.buffers) {
    if (!exists_before_first_op(b.kind)) continue;
    const auto it = plan_.placement.find(b.id);
    const Tier tier = it == plan_.placement.end() ? Tier::kDevice : it->second;
    if (tier == Tier::kDevice) {
      copy(b.id, kDevice) = Copy{.present = true};
      if (!allocate_device(0, b.bytes, b.id)) return false;
    } else {
      create(b.id, static_cast<size_t>(tier), 0, Due{});
    }
  }
  // Plan::host_reserved: held on the host from the start to the end.
  const uint64_t reserved = host_reserved_bytes(plan_);
  if (reserved > (uint64_t{1} << 62)) {
    fail_at(0, "the plan reserves {} bytes of host memory, above the limit of 2^62 bytes",
            reserved);
    return false;
  }
  if (reserved > 0) tier_event(kHost, 0, static_cast<int64_t>(reserved));
  placing_ = false;
  return true;
}

bool Simulator::execute(const Step& s) {
  switch (s.kind) {
    case StepKind::kCompute:
    case StepKind::kRecompute:
      return s.on == Tier::kHost ? compute_on_host(s) : compute_on_device(s);
    case StepKind::kSwapOut:
      return swap_out(s.buf, static_cast<size_t>(s.to));
    case StepKind::kSwapIn:
      return s.to == Tier::kHost ? swap_in_to_host(s.buf) : swap_in(s.buf);
    case StepKind::kFree:
      return free_buffer(s.buf);
  }
  return fail_at(step_, "{}: unknown step kind", step_label(step_));
}

BufferIds Simulator::taken_over(const Step& s, const Op& op) {
  BufferIds taken;
  if (!in_place_[step_]) return taken;
  for (const BufferId v : op.out) {
    const BufferId prev = graph_.buffers[v].version_of;
    if (prev != kNoBuffer && copy(prev, kDevice).present && !copy(v, kDevice).present &&
        (s.kind == StepKind::kRecompute || !has_any_copy(v))) {
      taken.push_back(prev);
    }
  }
  return taken;
}

bool Simulator::check_compute_order(const Step& s) {
  const Op& op = graph_.ops[s.op];
  if (s.kind == StepKind::kCompute) {
    if (computed_[s.op]) {
      return fail_at(step_, "{}: {} is computed a second time (use recompute)", step_label(step_),
                     op_name(s.op));
    }
    return true;
  }
  if (!computed_[s.op]) {
    return fail_at(step_, "{}: {} is recomputed before it was computed", step_label(step_),
                   op_name(s.op));
  }
  if (!recomputable(graph_, op)) {
    return fail_at(step_, "{}: {} updates {} in place and cannot be recomputed", step_label(step_),
                   op_name(s.op), buf_name(op.updates[0]));
  }
  return true;
}

std::optional<Due> Simulator::inputs_ready(const Op& op, size_t tier, bool replay) {
  Due ready;
  const auto need = [&](BufferId b, const char* verb) {
    const Copy& c = copy(b, tier);
    if (!c.present) {
      return fail_at(step_, "{}: {} {} {}, which is not on the {}: {}", step_label(step_),
                     op_name(op.id), verb, buf_name(b), to_string(static_cast<Tier>(tier)),
                     absence(b, tier));
    }
    ready = later(ready, c.due());
    return true;
  };
  for (const BufferId b : op.in) {
    if (!need(b, "reads")) return std::nullopt;
  }
  for (const BufferId b : op.updates) {
    if (replay) break;
    if (!need(b, "updates")) return std::nullopt;
    ready = later(ready, copy(b, tier).reads_done());  // in-flight copies of it finish first
  }
  return ready;
}

void Simulator::finish_uses(const Op& op, size_t tier, double start, Due end, bool replay) {
  for (const BufferId b : op.in) copy(b, tier).read_until(end.time, end.link);
  for (const BufferId b : op.updates) {
    if (replay) break;
    Copy& c = copy(b, tier);
    c.ready = end.time;
    c.ready_link = end.link;
    c.read_until(end.time, end.link);
    for (size_t other = 0; other < kNumTiers; ++other) {
      if (other != tier && copy(b, other).present) drop(b, other, start, Gone::kStale);
    }
  }
}

bool Simulator::compute_on_device(const Step& s) {
  if (!check_compute_order(s)) return false;
  const Op& op = graph_.ops[s.op];
  const bool replay = s.kind == StepKind::kRecompute;
  std::optional<Due> ready = inputs_ready(op, kDevice, replay);
  if (!ready) return false;
  if (op.phase == Phase::kComm) return collective(s, op, *ready);
  const BufferIds taken = taken_over(s, op);
  // Writing over a buffer waits for its outgoing copies.
  for (const BufferId prev : taken) ready = later(*ready, copy(prev, kDevice).reads_done());
  ready = later(*ready, room_for(op));                         // Note [Waiting for an address]
  if (thread_runs_kernels()) ready = later(*ready, cursor());  // a blocked thread
  const Due natural = queue(Resource::kCompute);
  const Due start = later(natural, *ready);
  if (ready->time > natural.time) {
    result_.transfer_stall_time += ready->time - natural.time;
    path_.charge(natural.time, ready->time, ready->link, result_.waiting);
  }
  // Note [Op overhead]: the emulated device's thread also does the
  // executor's bookkeeping for the op.
  const double work = op_time_[s.op] + (thread_runs_kernels() ? hw_.op_overhead : 0.0);
  const Due end = busy_compute(start, work, s.op, kDevice, &SimResult::compute_time);
  // Its start is the cursor, or on an emulated device its end (Note [The
  // emulated device's thread]; a stretch by copy contention cannot move
  // that end, since no copy issues before it).
  cursor_ = thread_runs_kernels() ? end.time : start.time;
  cursor_link_ = end.link;

  // Released at the start, before the new version is allocated there.
  for (const BufferId prev : taken) {
    if (options_.record_residency) note_continued(op, prev);
    drop(prev, kDevice, start.time, Gone::kConsumed);
  }
  if (!allocate_outputs(s, op, start.time, end)) return false;
  finish_uses(op, kDevice, start.time, end, replay);
  computed_[s.op] = 1;
  return true;
}

bool Simulator::allocate_outputs(const Step& s, const Op& op, double alloc_time, Due end) {
  for (const BufferId b : op.out) {
    Copy& c = copy(b, kDevice);
    if (c.present) {
      if (s.kind == StepKind::kRecompute) continue;  // still resident: kept as is
      return fail_at(step_, "{}: {} creates {}, which already exists", step_label(step_),
                     op_name(s.op), buf_name(b));
    }
    if (s.kind == StepKind::kCompute && has_any_copy(b)) {
      return fail_at(step_, "{}: {} creates {}, which already exists", step_label(step_),
                     op_name(s.op), buf_name(b));
    }
    create(b, kDevice, alloc_time, end);
    ever_created_[b] = 1;
    if (!allocate_device(alloc_time, bytes_of(b), b)) return false;
  }
  // Note [Workspace span]: a plan holds the span while the op runs (the
  // workspace on an allocator without fixed addresses).
  if (const uint64_t span = options_.live_scratch ? op.workspace : contiguous_workspace(op);
      span > 0) {
    if (!allocate_device(alloc_time, span, -1)) return false;
    release_device(end.time, span, -1);
  }
  return true;
}

bool Simulator::collective(const Step& s, const Op& op, Due ready) {
  const Due start = later(later(queue(Resource::kComm), cursor()), ready);
  const Due end = busy(Resource::kComm, start, op_time_[s.op]);
  result_.comm_time += op_time_[s.op];
  moved(Resource::kComm, static_cast<uint64_t>(op.bytes));
  if (!allocate_outputs(s, op, cursor_, end)) return false;
  finish_uses(op, kDevice, start.time, end, s.kind == StepKind::kRecompute);
  computed_[s.op] = 1;
  return true;
}

double Simulator::host_op_time(const Op& op) const {
  if (op.time) return *op.time;
  uint64_t params = 0, largest = 0;
  for (const BufferId b : op.updates) {
    const uint64_t n = element_count(graph_.buffers[b]);
    if (graph_.buffers[b].kind == BufferKind::kParam) params += n;
    largest = std::max(largest, n);
  }
  if (params == 0) params = largest;
  return static_cast<double>(params) / hw_.cpu_adam_params_per_s;
}

bool Simulator::compute_on_host(const Step& s) {
  if (!check_compute_order(s)) return false;
  const Op& op = graph_.ops[s.op];
  if (op.phase != Phase::kOptimizer && !op.time) {
    return fail_at(step_,
                   "{}: {} runs on the host, but only optimizer ops (or ops with a measured "
                   "time) can",
                   step_label(step_), op_name(s.op));
  }
  if (hw_.cpu_adam_params_per_s <= 0 && !op.time) {
    return fail_at(step_,
                   "{}: {} runs on the host, but the hardware profile gives no CPU "
                   "Adam throughput",
                   step_label(step_), op_name(s.op));
  }
  const bool replay = s.kind == StepKind::kRecompute;
  const std::optional<Due> ready = inputs_ready(op, kHost, replay);
  if (!ready) return false;
  // On a device emulated by the host's cores, host compute is device
  // compute's resource (Hardware::device_is_host_cpu).
  const Resource cpu = hw_.device_is_host_cpu ? Resource::kCompute : Resource::kHostCpu;
  const Due start = later(later(queue(cpu), cursor()), *ready);
  const double duration = host_op_time(op);
  Due end;
  if (cpu == Resource::kCompute) {
    end = busy_compute(start, duration, s.op, kHost, &SimResult::host_compute_time);
  } else {
    end = busy(cpu, start, duration);
    result_.host_compute_time += duration;
  }
  host_cursor_ = start.time;
  host_cursor_link_ = end.link;  // its start is the host thread's cursor
  if (thread_runs_kernels()) {   // Note [The emulated device's thread]
    cursor_ = host_cursor_ = end.time;
    cursor_link_ = end.link;
  }
  for (const BufferId b : op.out) {
    if (has_any_copy(b) && s.kind == StepKind::kCompute) {
      return fail_at(step_, "{}: {} creates {}, which already exists", step_label(step_),
                     op_name(s.op), buf_name(b));
    }
    if (copy(b, kHost).present) continue;
    create(b, kHost, start.time, end);
    ever_created_[b] = 1;
  }
  finish_uses(op, kHost, start.time, end, replay);
  computed_[s.op] = 1;
  return true;
}

bool Simulator::swap_out(BufferId b, size_t to) {
  Copy& device = copy(b, kDevice);
  if (!device.present && to == kNvme && copy(b, kHost).present) return host_to_nvme(b);
  if (!device.present) {
    return fail_at(step_, "{}: {} is not on the device: {}", step_label(step_), buf_name(b),
                   absence(b, kDevice));
  }
  if (copy(b, to).present) {
    return fail_at(step_, "{}: {} already has a copy on the {}", step_label(step_), buf_name(b),
                   to_string(static_cast<Tier>(to)));
  }
  const uint64_t bytes = bytes_of(b);
  thread_waits(device.due());  // the executor waits for it to arrive
  const Due start = later(later(queue(Resource::kD2H), cursor()), device.due());
  const Due copied = busy_copy(Resource::kD2H, start, d2h_time(hw_, bytes));
  moved(Resource::kD2H, bytes);
  Due ready = copied;
  if (to == kNvme) {
    tier_event(kHost, cursor_, static_cast<int64_t>(bytes));  // bounce buffer
    ready = busy(Resource::kNvmeWrite, later(queue(Resource::kNvmeWrite), copied),
                 static_cast<double>(bytes) / hw_.nvme_write_bandwidth);
    moved(Resource::kNvmeWrite, bytes);
    tier_event(kHost, ready.time, -static_cast<int64_t>(bytes));
  }
  create(b, to, cursor_, ready);
  if (to == kNvme) thread_waits(ready);  // a synchronous write
  device.read_until(copied.time, copied.link);
  drop(b, kDevice, copied.time, Gone::kSwappedOut);
  return true;
}

bool Simulator::swap_in(BufferId b) {
  Copy& device = copy(b, kDevice);
  if (device.present) {
    return fail_at(step_, "{}: {} is already on the device", step_label(step_), buf_name(b));
  }
  const bool from_host = copy(b, kHost).present;
  if (!from_host && !copy(b, kNvme).present) {
    return fail_at(step_, "{}: {} has no copy on the host or NVMe to bring in: {}",
                   step_label(step_), buf_name(b), absence(b, kHost));
  }
  const size_t source = from_host ? kHost : kNvme;
  const uint64_t bytes = bytes_of(b);
  if (!stays_.empty()) {  // Note [Waiting for an address]: the issuing thread waits
    if (const auto at = stay_offset(plan_, b, stays_[b])) {
      const Due room = range_released(*at, bytes, b);
      if (room.time > cursor_) {
        cursor_ = room.time;
        cursor_link_ = room.link;
      }
    }
  }
  Copy& src = copy(b, source);
  const double allocated = cursor_;  // before the thread waits for the source
  Due h2d_ready = later(cursor(), src.due());
  if (source == kNvme) {
    tier_event(kHost, cursor_, static_cast<int64_t>(bytes));  // bounce buffer
    h2d_ready = busy(Resource::kNvmeRead, later(queue(Resource::kNvmeRead), h2d_ready),
                     static_cast<double>(bytes) / hw_.nvme_read_bandwidth);
    moved(Resource::kNvmeRead, bytes);
  }
  thread_waits(h2d_ready);  // the source's copy, or the synchronous NVMe read
  const Due end =
      busy_copy(Resource::kH2D, later(queue(Resource::kH2D), h2d_ready), h2d_time(hw_, bytes));
  moved(Resource::kH2D, bytes);
  if (source == kNvme) tier_event(kHost, end.time, -static_cast<int64_t>(bytes));
  src.read_until(end.time, end.link);
  create(b, kDevice, allocated, end);
  if (!allocate_device(allocated, bytes, b)) return false;
  if (!is_persistent(graph_.buffers[b].kind)) drop(b, source, end.time, Gone::kMovedIn);
  return true;
}

bool Simulator::swap_in_to_host(BufferId b) {
  Copy& host = copy(b, kHost);
  if (host.present) {
    return fail_at(step_, "{}: {} is already on the host", step_label(step_), buf_name(b));
  }
  Copy& src = copy(b, kNvme);
  if (!src.present) {
    return fail_at(step_, "{}: {} has no copy on NVMe to bring to the host: {}", step_label(step_),
                   buf_name(b), absence(b, kNvme));
  }
  const uint64_t bytes = bytes_of(b);
  const Due issue = host_issue();
  const Due start = later(later(queue(Resource::kNvmeRead), issue), src.due());
  const Due end =
      busy(Resource::kNvmeRead, start, static_cast<double>(bytes) / hw_.nvme_read_bandwidth);
  moved(Resource::kNvmeRead, bytes);
  src.read_until(end.time, end.link);
  create(b, kHost, issue.time, end);
  if (!is_persistent(graph_.buffers[b].kind)) drop(b, kNvme, end.time, Gone::kMovedIn);
  thread_waits(end);  // a synchronous read
  return true;
}

bool Simulator::host_to_nvme(BufferId b) {
  if (copy(b, kNvme).present) {
    return fail_at(step_, "{}: {} already has a copy on the nvme", step_label(step_), buf_name(b));
  }
  Copy& host = copy(b, kHost);
  const uint64_t bytes = bytes_of(b);
  const Due issue = host_issue();
  const Due start = later(later(queue(Resource::kNvmeWrite), issue), host.due());
  const Due end =
      busy(Resource::kNvmeWrite, start, static_cast<double>(bytes) / hw_.nvme_write_bandwidth);
  moved(Resource::kNvmeWrite, bytes);
  create(b, kNvme, issue.time, end);
  host.read_until(end.time, end.link);
  drop(b, kHost, end.time, Gone::kSwappedOut);
  thread_waits(end);  // a synchronous write
  // Note [Synchronous write-backs]: the host thread that wrote it waits.
  if (end.time > host_cursor_) {
    host_cursor_ = end.time;
    host_cursor_link_ = end.link;
  }
  return true;
}

bool Simulator::free_buffer(BufferId b) {
  const bool persistent = is_persistent(graph_.buffers[b].kind);
  if (copy(b, kDevice).present) {
    if (persistent && !copy(b, kHost).present && !copy(b, kNvme).present) {
      return fail_at(step_, "{}: frees the only copy of {}, which the next iteration needs",
                     step_label(step_), buf_name(b));
    }
    thread_waits(copy(b, kDevice).due());  // the executor waits for it to arrive
    drop(b, kDevice, cursor_, Gone::kFreed);
    return true;
  }
  if (!copy(b, kHost).present && !copy(b, kNvme).present) {
    // Its memory went to its next version (Note [In-place steps]).
    if (copy(b, kDevice).gone == Gone::kConsumed) return true;
    return fail_at(step_, "{}: frees {}, which has no copy anywhere: {}", step_label(step_),
                   buf_name(b), absence(b, kDevice));
  }
  if (persistent) {
    return fail_at(step_, "{}: frees the only copies of {}, which the next iteration needs",
                   step_label(step_), buf_name(b));
  }
  for (const size_t tier : {kHost, kNvme}) {
    if (copy(b, tier).present) drop(b, tier, cursor_, Gone::kFreed);
  }
  return true;
}

}  // namespace sim_detail

SimResult simulate(const Graph& graph, const Plan& plan, const Hardware& hardware,
                   const SimOptions& options) {
  validate_plan(plan, graph);
  return sim_detail::Simulator(graph, plan, hardware, options).run();
}

}  // namespace memwall
