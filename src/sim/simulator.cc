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
// Start and end. A step starts when its resource is free, it has issued, and
// its data is ready: compute waits for every input (`in` and `updates`) on
// its tier, and for in-flight copies of the buffers it updates (a copy must
// not see half-updated data); swap_out waits for the buffer to be produced;
// swap_in waits for its source copy. Durations come from the cost model
// (hw/cost_model): op_time for device compute; h2d_time/d2h_time for copies
// (bandwidth and latency); bytes / NVMe bandwidth for NVMe, which is reached
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
// Ranks. A graph of N data-parallel ranks (graph_ranks) is one rank's
// iteration, and `hardware` its node's profile: the simulator runs the rank
// on rank_share(hardware, N) (Note [Ranks on a node] in hw/ranks.cc), so
// host memory, host<->device and NVMe bandwidth and the CPU are the rank's
// share of the node's.
#include "memwall/sim/simulator.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "critical_path.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/error.h"
#include "memwall/graph/versions.h"
#include "memwall/plan/in_place.h"

namespace memwall {
namespace {

using detail::buffer_label;
using detail::op_label;
using sim_detail::Due;
using sim_detail::later;

constexpr size_t kDevice = static_cast<size_t>(Tier::kDevice);
constexpr size_t kHost = static_cast<size_t>(Tier::kHost);
constexpr size_t kNvme = static_cast<size_t>(Tier::kNvme);

// Why a buffer has no copy on a tier any more, for messages.
enum class Gone : uint8_t { kNever, kFreed, kSwappedOut, kMovedIn, kStale, kConsumed };

// Fields ordered to pack into 32 bytes (three per buffer, on the hot path).
struct Copy {
  double ready = 0;         // when its data is valid
  double read_end = 0;      // end of the latest reader or outgoing copy
  int32_t gone_step = -1;   // the step that removed it
  int32_t ready_link = -1;  // the busy interval that made it ready (Note [Time split])
  int32_t read_end_link = -1;
  bool present = false;
  Gone gone = Gone::kNever;

  Due due() const { return {ready, ready_link}; }
  Due reads_done() const { return {read_end, read_end_link}; }
  void read_until(double end, int32_t link) {
    if (end > read_end) {
      read_end = end;
      read_end_link = link;
    }
  }
};

static_assert(sizeof(Copy) == 32);

struct BufferState {
  std::array<Copy, kNumTiers> copies;
};

constexpr uint64_t kNoOffset = std::numeric_limits<uint64_t>::max();

// A device release waiting for its time (see Note [Simulation model]).
struct Release {
  double time;
  uint64_t bytes;
  BufferId buf;        // -1: workspace
  uint32_t residency;  // index into SimResult::residencies (workspace: ::workspaces), when recorded
  uint64_t at;         // its arena offset; kNoOffset when it holds none
  int32_t link = -1;   // what it waited for (its copy's reads), on the critical path
  bool outgoing = false;  // a swap-out's: its device copy goes when the copy has read it
  bool operator>(const Release& other) const { return time > other.time; }
};

// A host or NVMe allocation (+) or release (-), ordered at the end.
struct TierEvent {
  double time;
  int64_t delta;
  uint32_t step;
};

class Simulator {
 public:
  Simulator(const Graph& graph, const Plan& plan, const Hardware& hw, const SimOptions& options)
      : graph_(graph),
        plan_(plan),
        hw_(rank_share(hw, graph_ranks(graph))),
        node_ranks_(ranks_per_node(hw, graph_ranks(graph))),
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

  SimResult run() {
    if (!place_initial_buffers()) return finish();
    const auto n = static_cast<uint32_t>(plan_.steps.size());
    for (step_ = 0; step_ < n; ++step_) {
      if (!execute(plan_.steps[step_])) return finish();
    }
    result_.steps_executed = plan_.steps.size();
    check_end();
    return finish();
  }

 private:
  static std::array<int32_t, kNumResources> filled_links() {
    std::array<int32_t, kNumResources> links{};
    links.fill(-1);
    return links;
  }

  // ---- Failure ------------------------------------------------------------------
  template <typename... Args>
  bool fail_at(size_t step, fmt::format_string<Args...> format, Args&&... args) {
    if (result_.valid || step < result_.failed_step) {
      result_.valid = false;
      result_.failed_step = step;
      result_.reason = fmt::format(format, std::forward<Args>(args)...);
    }
    return false;
  }
  std::string step_label(size_t step) const {
    if (step >= plan_.steps.size()) return "end of plan";
    const Step& s = plan_.steps[step];
    return fmt::format("step {} ({})", step, to_string(s.kind));
  }
  // The current step, or the initial placement before it.
  std::string where() const {
    return placing_ ? std::string("initial placement") : step_label(step_);
  }
  std::string op_name(OpId op) const { return op_label(graph_, op); }
  std::string buf_name(BufferId b) const { return buffer_label(graph_, b); }

  // Why buffer b has no copy on `tier`.
  std::string absence(BufferId b, size_t tier) const {
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

  // ---- Device memory --------------------------------------------------------------
  // Applies every release due at or before `time`.
  void release_due(double time) {
    while (!releases_.empty() && releases_.front().time <= time) {
      std::pop_heap(releases_.begin(), releases_.end(), std::greater<>());
      const Release r = releases_.back();
      releases_.pop_back();
      device_bytes_ -= r.bytes;
      if (r.at != kNoOffset) {
        const auto held = arena_.find(r.at);
        if (held != arena_.end() && --held->second.holds == 0) arena_.erase(held);
      }
      if (options_.record_residency) {
        Residency& stay =
            r.buf >= 0 ? result_.residencies[r.residency] : result_.workspaces[r.residency];
        stay.release_seq = event_seq_++;
        stay.release_time = r.time;
      }
      note_device(r.time);
    }
  }
  void note_device(double time) {
    if (!options_.record_curves) return;
    auto& curve = result_.curves[kDevice];
    if (!curve.empty() && curve.back().time == time) {
      curve.back().bytes = device_bytes_;
    } else {
      curve.push_back({time, device_bytes_});
    }
  }
  // Workspace has addresses when the plan pins them (Plan::workspace_offsets).
  bool places_workspace() const { return !stays_.empty() && !plan_.workspace_offsets.empty(); }
  // Allocates `bytes` on the device at `time` for buffer b (-1: the current
  // op's workspace).
  bool allocate_device(double time, uint64_t bytes, BufferId b) {
    release_due(time);
    device_bytes_ += bytes;
    note_device(time);
    if (b >= 0 && options_.record_residency) {
      open_stay_[b] = static_cast<uint32_t>(result_.residencies.size());
      result_.residencies.push_back({b, event_seq_++, 0, time, 0});
      if (const auto it = continues_.find(b); it != continues_.end()) {
        result_.residencies.back().continues = it->second;
        continues_.erase(it);
      }
    } else if (b < 0 && options_.record_residency) {
      open_workspace_ = static_cast<uint32_t>(result_.workspaces.size());
      result_.workspaces.push_back({-1, event_seq_++, 0, time, 0, current_op()});
    }
    if (device_bytes_ > result_.peak_bytes[kDevice]) {
      result_.peak_bytes[kDevice] = device_bytes_;
      result_.peak_time[kDevice] = time;
    }
    if (device_bytes_ > plan_.budget) {
      const std::string what =
          b >= 0 ? buf_name(b) : fmt::format("the workspace of {}", op_name(current_op()));
      return fail_at(step_,
                     "{}: device memory exceeds the budget by {} bytes ({} > {}) at {:.6f} s, "
                     "allocating {}",
                     where(), device_bytes_ - plan_.budget, device_bytes_, plan_.budget, time,
                     what);
    }
    if (b >= 0 && !stays_.empty()) return place_in_arena(b, bytes);
    // Note [Workspace span]: the live total counts the workspace, the arena its span.
    if (b < 0 && places_workspace()) {
      return place_workspace(current_op(), contiguous_workspace(graph_.ops[current_op()]));
    }
    return true;
  }
  void release_device(double time, uint64_t bytes, BufferId b, int32_t link = -1,
                      bool outgoing = false) {
    uint32_t residency = 0;
    if (options_.record_residency) residency = b >= 0 ? open_stay_[b] : open_workspace_;
    uint64_t at = kNoOffset;
    if (b >= 0 && bytes > 0 && !stays_.empty()) at = held_at_[b];
    if (b < 0 && places_workspace()) at = workspace_at_;
    releases_.push_back({time, bytes, b, residency, at, link, outgoing});
    std::push_heap(releases_.begin(), releases_.end(), std::greater<>());
  }
  // Arena entries name a buffer, or an op's workspace as -2 - op.
  static BufferId workspace_key(OpId op) { return -2 - op; }
  std::string arena_name(BufferId key) const {
    return key >= 0 ? buf_name(key) : fmt::format("the workspace of {}", op_name(-2 - key));
  }
  bool place_workspace(OpId op, uint64_t bytes) {
    if (workspace_runs_.empty()) workspace_runs_.assign(graph_.ops.size(), 0);
    const uint32_t run = workspace_runs_[op]++;
    const std::optional<uint64_t> offset = workspace_offset(plan_, op, run);
    if (!offset) {
      return fail_at(step_,
                     "{}: the workspace of {} has no offset for its device run {}, but the plan "
                     "pins workspace",
                     where(), op_name(op), run);
    }
    workspace_at_ = *offset;
    return place_range(workspace_key(op), *offset, bytes);
  }
  // Note [Offsets per stay]: the stay this allocation begins sits at its own
  // offset.
  bool place_in_arena(BufferId b, uint64_t bytes) {
    const uint32_t stay = stays_[b]++;
    const std::optional<uint64_t> offset = stay_offset(plan_, b, stay);
    if (!offset) {
      return fail_at(step_,
                     "{}: {} has no offset for its device stay {}, but the plan pins "
                     "addresses",
                     where(), buf_name(b), stay);
    }
    held_at_[b] = *offset;
    if (bytes == 0) return true;  // occupies no address
    // A buffer swapped back in to the same address while its swap-out is
    // still in flight has two device stays there at once. That is sound:
    // the incoming copy starts only once the host copy is complete, so after
    // the outgoing one has read the region (swap_in waits for src.ready).
    if (const auto same = arena_.find(*offset);
        same != arena_.end() && same->second.key == b && same->second.end == *offset + bytes) {
      ++same->second.holds;
      return true;
    }
    return place_range(b, *offset, bytes);
  }
  // [offset, offset + bytes) for `key` (a buffer, or workspace_key), clear of
  // everything allocated.
  bool place_range(BufferId key, uint64_t offset, uint64_t bytes) {
    const uint64_t end = offset + bytes;  // validate_plan checked it fits the budget
    auto next = arena_.lower_bound(offset);
    if (next != arena_.end() && next->first < end) return overlap(key, offset, next);
    if (next != arena_.begin()) {
      const auto prev = std::prev(next);
      if (prev->second.end > offset) return overlap(key, offset, prev);
    }
    arena_.emplace(offset, Held{end, key, 1});
    return true;
  }
  struct Held {
    uint64_t end;
    BufferId key;    // a buffer, or workspace_key(op)
    uint32_t holds;  // device stays holding the range
  };
  bool overlap(BufferId key, uint64_t offset, std::map<uint64_t, Held>::const_iterator other) {
    return fail_at(step_, "{}: {} at offset {} overlaps {} at offset {}, which is still allocated",
                   where(), arena_name(key), offset, arena_name(other->second.key), other->first);
  }

  // Note [Waiting for an address]: with offsets, a step that places a stay
  // (or a workspace) over a range whose release is still pending (an
  // outgoing copy still reads it) waits for that release, as the executor's
  // make_room does, and the thread that issues steps waits with it. A plan
  // laid out with one profile's timings then runs under another's, slower
  // where a copy takes longer than the layout assumed. A range held by
  // anything else is not waited for: the placement reports the overlap.
  // O(overlapping ranges x pending releases).
  // `self`: a buffer whose own outgoing copy shares the range (a swap-in
  // behind its swap-out; its copy starts after the host copy exists anyway).
  Due range_released(uint64_t offset, uint64_t bytes, BufferId self = -1) const {
    Due free{0, -1};
    if (bytes == 0) return free;
    auto it = arena_.lower_bound(offset);
    if (it != arena_.begin() && std::prev(it)->second.end > offset) it = std::prev(it);
    for (; it != arena_.end() && it->first < offset + bytes; ++it) {
      for (const Release& r : releases_) {
        if (r.outgoing && r.at == it->first && r.buf != self) {
          free = later(free, {r.time, r.link});
        }
      }
    }
    return free;
  }
  // When the ranges of what `op` allocates next on the device (its outputs'
  // next stays, its workspace's next run) are free.
  Due room_for(const Op& op) const {
    Due free{0, -1};
    if (stays_.empty()) return free;
    for (const BufferId b : op.out) {
      if (state_[b].copies[kDevice].present) continue;  // a recompute keeps it
      if (const auto at = stay_offset(plan_, b, stays_[b])) {
        free = later(free, range_released(*at, bytes_of(b)));
      }
    }
    if (op.workspace > 0 && places_workspace()) {
      const uint32_t run = workspace_runs_.empty() ? 0 : workspace_runs_[op.id];
      if (const auto at = workspace_offset(plan_, op.id, run)) {
        free = later(free, range_released(*at, contiguous_workspace(op)));
      }
    }
    return free;
  }

  // ---- Host and NVMe memory ---------------------------------------------------------
  void tier_event(size_t tier, double time, int64_t delta) {
    tier_events_[tier].push_back({time, delta, step_});
  }

  // ---- Copies ----------------------------------------------------------------------
  Copy& copy(BufferId b, size_t tier) { return state_[b].copies[tier]; }
  uint64_t bytes_of(BufferId b) const { return graph_.buffers[b].bytes; }

  void create(BufferId b, size_t tier, double alloc_time, Due ready) {
    Copy& c = copy(b, tier);
    c.present = true;
    c.ready = ready.time;
    c.ready_link = ready.link;
    c.read_end = ready.time;
    c.read_end_link = ready.link;
    c.gone = Gone::kNever;
    if (tier != kDevice) tier_event(tier, alloc_time, static_cast<int64_t>(bytes_of(b)));
  }
  // Removes the copy on `tier`, released at `time` (or later, after its
  // pending readers and outgoing copies).
  void drop(BufferId b, size_t tier, double time, Gone why) {
    Copy& c = copy(b, tier);
    const Due released = later(later({time, -1}, c.due()), c.reads_done());
    const double at = released.time;
    if (tier == kDevice) {
      release_device(at, bytes_of(b), b, released.link, why == Gone::kSwappedOut);
    } else {
      tier_event(tier, at, -static_cast<int64_t>(bytes_of(b)));
    }
    c.present = false;
    c.gone = why;
    c.gone_step = static_cast<int32_t>(step_);
    last_release_ = std::max(last_release_, at);
  }

  // ---- Resources -----------------------------------------------------------------
  // Runs a step on `r` from `start.time` (when `start.link` let it) for
  // `duration`; returns its end, and the link that ends there.
  Due busy(Resource r, Due start, double duration) {
    const double end = start.time + duration;
    const int32_t link = r == Resource::kCompute ? -1 : path_.add(r, start.time, end, start.link);
    free_at_[static_cast<size_t>(r)] = end;
    last_link_[static_cast<size_t>(r)] = link;
    if (options_.record_timeline) result_.timeline.push_back({r, step_, start.time, end});
    return {end, link};
  }
  double free_at(Resource r) const { return free_at_[static_cast<size_t>(r)]; }
  // When `r` is next free, as a Due.
  Due queue(Resource r) const {
    return {free_at_[static_cast<size_t>(r)], last_link_[static_cast<size_t>(r)]};
  }
  // The device thread's issue time; the host thread's (see Note [Simulation model]).
  Due cursor() const { return {cursor_, cursor_link_}; }
  Due host_issue() const { return later(cursor(), {host_cursor_, host_cursor_link_}); }
  void moved(Resource r, uint64_t bytes) { result_.bytes_moved[static_cast<size_t>(r)] += bytes; }

  OpId current_op() const { return plan_.steps[step_].op; }

  // ---- Steps ---------------------------------------------------------------------
  bool place_initial_buffers() {
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
    placing_ = false;
    return true;
  }

  bool execute(const Step& s) {
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

  // The previous versions an in-place step takes over (Note [In-place
  // steps]): those still on the device whose next version it creates anew.
  BufferIds taken_over(const Step& s, const Op& op) {
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

  // The version of `prev` that `op` creates in place continues prev's
  // device stay (Residency::continues).
  void note_continued(const Op& op, BufferId prev) {
    for (const BufferId v : op.out) {
      if (graph_.buffers[v].version_of == prev) continues_[v] = open_stay_[prev];
    }
  }

  // Checks compute-once and recompute rules; true when the step may run.
  bool check_compute_order(const Step& s) {
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
      return fail_at(step_, "{}: {} updates {} in place and cannot be recomputed",
                     step_label(step_), op_name(s.op), buf_name(op.updates[0]));
    }
    return true;
  }

  // Latest ready time of the op's inputs on `tier`, or nullopt after a failure.
  // A replay (recompute) leaves the op's updates of persistent state alone
  // (Note [Replaying side effects]): it neither needs nor changes them.
  std::optional<Due> inputs_ready(const Op& op, size_t tier, bool replay) {
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

  // Marks the op's reads and in-place updates done at `end` on `tier` and
  // drops copies its updates make stale.
  void finish_uses(const Op& op, size_t tier, double start, Due end, bool replay) {
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

  bool compute_on_device(const Step& s) {
    if (!check_compute_order(s)) return false;
    const Op& op = graph_.ops[s.op];
    const bool replay = s.kind == StepKind::kRecompute;
    std::optional<Due> ready = inputs_ready(op, kDevice, replay);
    if (!ready) return false;
    if (op.phase == Phase::kComm) return collective(s, op, *ready);
    const BufferIds taken = taken_over(s, op);
    // Writing over a buffer waits for its outgoing copies.
    for (const BufferId prev : taken) ready = later(*ready, copy(prev, kDevice).reads_done());
    ready = later(*ready, room_for(op));  // Note [Waiting for an address]
    const Due natural = queue(Resource::kCompute);
    const Due start = later(natural, *ready);
    if (ready->time > natural.time) {
      result_.transfer_stall_time += ready->time - natural.time;
      path_.charge(natural.time, ready->time, ready->link, result_.waiting);
    }
    const Due end = busy(Resource::kCompute, start, op_time_[s.op]);
    cursor_ = start.time;
    cursor_link_ = end.link;  // its start is the cursor
    result_.compute_time += op_time_[s.op];

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

  // Creates the op's outputs and workspace on the device, allocated at
  // `alloc_time` and ready at `end`; the workspace goes back at `end`.
  bool allocate_outputs(const Step& s, const Op& op, double alloc_time, Due end) {
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
    if (op.workspace > 0) {
      if (!allocate_device(alloc_time, op.workspace, -1)) return false;
      release_device(end.time, op.workspace, -1);
    }
    return true;
  }

  // A collective on its own stream: issued at the cursor without holding it
  // back (the host thread does not wait for it), its outputs allocated at
  // issue like a swap_in's (allocation times stay ordered), ready at its end.
  bool collective(const Step& s, const Op& op, Due ready) {
    const Due start = later(later(queue(Resource::kComm), cursor()), ready);
    const Due end = busy(Resource::kComm, start, op_time_[s.op]);
    result_.comm_time += op_time_[s.op];
    moved(Resource::kComm, static_cast<uint64_t>(op.bytes));
    if (!allocate_outputs(s, op, cursor_, end)) return false;
    finish_uses(op, kDevice, start.time, end, s.kind == StepKind::kRecompute);
    computed_[s.op] = 1;
    return true;
  }

  bool has_any_copy(BufferId b) const {
    const auto& copies = state_[b].copies;
    return copies[kDevice].present || copies[kHost].present || copies[kNvme].present;
  }

  // Host-side optimizer step: parameters updated / CPU Adam throughput.
  double host_op_time(const Op& op) const {
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

  bool compute_on_host(const Step& s) {
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
    const Due end = busy(cpu, start, duration);
    host_cursor_ = start.time;
    host_cursor_link_ = end.link;  // its start is the host thread's cursor
    result_.host_compute_time += duration;
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

  bool swap_out(BufferId b, size_t to) {
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
    const Due start = later(later(queue(Resource::kD2H), cursor()), device.due());
    const Due copied = busy(Resource::kD2H, start, d2h_time(hw_, bytes));
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
    device.read_until(copied.time, copied.link);
    drop(b, kDevice, copied.time, Gone::kSwappedOut);
    return true;
  }

  bool swap_in(BufferId b) {
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
    Due h2d_ready = later(cursor(), src.due());
    if (source == kNvme) {
      tier_event(kHost, cursor_, static_cast<int64_t>(bytes));  // bounce buffer
      h2d_ready = busy(Resource::kNvmeRead, later(queue(Resource::kNvmeRead), h2d_ready),
                       static_cast<double>(bytes) / hw_.nvme_read_bandwidth);
      moved(Resource::kNvmeRead, bytes);
    }
    const Due end =
        busy(Resource::kH2D, later(queue(Resource::kH2D), h2d_ready), h2d_time(hw_, bytes));
    moved(Resource::kH2D, bytes);
    if (source == kNvme) tier_event(kHost, end.time, -static_cast<int64_t>(bytes));
    src.read_until(end.time, end.link);
    create(b, kDevice, cursor_, end);
    if (!allocate_device(cursor_, bytes, b)) return false;
    if (!is_persistent(graph_.buffers[b].kind)) drop(b, source, end.time, Gone::kMovedIn);
    return true;
  }

  // NVMe -> host (swap_in "to": "host"): for host compute, e.g. optimizer
  // states kept on NVMe and stepped on the CPU (ZeRO-Infinity).
  bool swap_in_to_host(BufferId b) {
    Copy& host = copy(b, kHost);
    if (host.present) {
      return fail_at(step_, "{}: {} is already on the host", step_label(step_), buf_name(b));
    }
    Copy& src = copy(b, kNvme);
    if (!src.present) {
      return fail_at(step_, "{}: {} has no copy on NVMe to bring to the host: {}",
                     step_label(step_), buf_name(b), absence(b, kNvme));
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
    return true;
  }

  // Host -> NVMe (swap_out "to": "nvme" of a buffer with no device copy):
  // writes back what the host changed; the host copy is released when the
  // write ends.
  bool host_to_nvme(BufferId b) {
    if (copy(b, kNvme).present) {
      return fail_at(step_, "{}: {} already has a copy on the nvme", step_label(step_),
                     buf_name(b));
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
    return true;
  }

  bool free_buffer(BufferId b) {
    const bool persistent = is_persistent(graph_.buffers[b].kind);
    if (copy(b, kDevice).present) {
      if (persistent && !copy(b, kHost).present && !copy(b, kNvme).present) {
        return fail_at(step_, "{}: frees the only copy of {}, which the next iteration needs",
                       step_label(step_), buf_name(b));
      }
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

  // ---- End of the iteration ------------------------------------------------------------
  void check_end() {
    const size_t end_step = plan_.steps.size();
    for (size_t i = 0; i < computed_.size(); ++i) {
      if (!computed_[i]) {
        fail_at(end_step, "end of plan: {} is never computed", op_name(static_cast<OpId>(i)));
        return;
      }
    }
    for (const Buffer& b : graph_.buffers) {
      if (!is_persistent(b.kind)) continue;
      const auto it = plan_.placement.find(b.id);
      const Tier start = it == plan_.placement.end() ? Tier::kDevice : it->second;
      if (!copy(b.id, static_cast<size_t>(start)).present) {
        fail_at(end_step,
                "end of plan: {} started on the {} but has no copy there at the end ({}); the "
                "next iteration needs it where it started",
                buf_name(b.id), to_string(start), absence(b.id, static_cast<size_t>(start)));
        return;
      }
      // Note [Offsets per stay]: and at the address it started at.
      if (start == Tier::kDevice && !stays_.empty() && b.bytes > 0) {
        const std::optional<uint64_t> first = stay_offset(plan_, b.id, 0);
        if (first && held_at_[b.id] != *first) {
          fail_at(end_step,
                  "end of plan: {} ends at offset {} but started at offset {}; the next "
                  "iteration needs it where it started",
                  buf_name(b.id), held_at_[b.id], *first);
          return;
        }
      }
    }
  }

  // Builds host and NVMe curves and peaks; checks host memory.
  void settle_tiers() {
    for (const size_t tier : {kHost, kNvme}) {
      auto& events = tier_events_[tier];
      std::stable_sort(events.begin(), events.end(),
                       [](const TierEvent& a, const TierEvent& b) { return a.time < b.time; });
      int64_t bytes = 0;
      auto& curve = result_.curves[tier];
      for (const TierEvent& e : events) {
        bytes += e.delta;
        const auto now = static_cast<uint64_t>(std::max<int64_t>(bytes, 0));
        if (now > result_.peak_bytes[tier]) {
          result_.peak_bytes[tier] = now;
          result_.peak_time[tier] = e.time;
          if (tier == kHost && hw_.host_memory_bytes > 0 && now > hw_.host_memory_bytes) {
            if (node_ranks_ > 1) {
              fail_at(e.step,
                      "{}: host memory exceeds this rank's 1/{} share of the node's, {} bytes, "
                      "by {} bytes at {:.6f} s",
                      step_label(e.step), node_ranks_, hw_.host_memory_bytes,
                      now - hw_.host_memory_bytes, e.time);
            } else {
              fail_at(e.step, "{}: host memory exceeds the host's {} bytes by {} bytes at {:.6f} s",
                      step_label(e.step), hw_.host_memory_bytes, now - hw_.host_memory_bytes,
                      e.time);
            }
          }
        }
        if (!options_.record_curves) continue;
        if (!curve.empty() && curve.back().time == e.time) {
          curve.back().bytes = now;
        } else {
          curve.push_back({e.time, now});
        }
      }
    }
  }

  SimResult finish() {
    release_due(std::numeric_limits<double>::infinity());
    settle_tiers();
    double end = std::max(last_release_, 0.0);
    Due last;  // the busy interval that ends the iteration
    for (size_t r = 0; r < kNumResources; ++r) last = later(last, {free_at_[r], last_link_[r]});
    end = std::max(end, last.time);
    result_.iteration_time = end;
    // The tail after the compute stream's last step (Note [Time split]).
    path_.charge(free_at(Resource::kCompute), end, last.link, result_.waiting);
    // Stays still open (buffers the next iteration keeps) end after every release.
    for (Residency& stay : result_.residencies) {
      if (stay.release_seq == 0) {
        stay.release_seq = event_seq_;
        stay.release_time = end;
      }
    }
    for (Residency& stay : result_.workspaces) {
      if (stay.release_seq == 0) {  // after an invalid step
        stay.release_seq = event_seq_;
        stay.release_time = end;
      }
    }
    result_.compute_busy_fraction = end > 0 ? result_.compute_time / end : 0;
    if (result_.steps_executed == 0 && !result_.valid) result_.steps_executed = result_.failed_step;
    return std::move(result_);
  }

  const Graph& graph_;
  const Plan& plan_;
  const Hardware hw_;     // the rank's share of the node (Note [Ranks on a node])
  const int node_ranks_;  // ranks sharing the node
  const SimOptions& options_;
  SimResult result_;
  std::vector<BufferState> state_;
  std::vector<uint8_t> computed_;
  std::vector<uint8_t> ever_created_;
  std::vector<double> op_time_;
  std::vector<uint8_t> in_place_;  // per step: Note [In-place steps]
  // With offsets: device stays begun per buffer (Note [Offsets per stay]),
  // the offset of each one's latest, and what the arena holds by offset.
  std::vector<uint32_t> stays_;  // empty: the plan pins no addresses
  std::vector<uint64_t> held_at_;
  std::vector<uint32_t> workspace_runs_;  // device runs per op with a workspace
  uint64_t workspace_at_ = kNoOffset;     // the latest workspace's offset
  std::map<uint64_t, Held> arena_;
  // In-place steps: the residency each new version continues (recorded).
  std::unordered_map<BufferId, int64_t> continues_;
  std::vector<Release> releases_;  // min-heap on time
  std::array<std::vector<TierEvent>, kNumTiers> tier_events_;
  std::array<double, kNumResources> free_at_{};
  std::array<int32_t, kNumResources> last_link_ =
      filled_links();  // the interval ending at free_at_
  sim_detail::CriticalPath path_;
  std::vector<uint32_t> open_stay_;  // residency index of each buffer's device copy
  uint32_t open_workspace_ = 0;      // index into workspaces of the latest one allocated
  uint64_t event_seq_ = 0;
  uint64_t device_bytes_ = 0;
  double cursor_ = 0;
  int32_t cursor_link_ = -1;  // the compute step that started at cursor_
  double host_cursor_ = 0;    // start of the latest host compute step
  int32_t host_cursor_link_ = -1;
  double last_release_ = 0;
  uint32_t step_ = 0;
  bool placing_ = true;  // placing the buffers that exist before the first op
};

}  // namespace

SimResult simulate(const Graph& graph, const Plan& plan, const Hardware& hardware,
                   const SimOptions& options) {
  validate_plan(plan, graph);
  return Simulator(graph, plan, hardware, options).run();
}

}  // namespace memwall
