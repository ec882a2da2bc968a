// Internal to the simulator (simulator.cc, sim_memory.cc, sim_end.cc): the
// state of one simulation and the steps that change it. The rules it follows
// are Note [Simulation model] in simulator.cc.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "critical_path.h"
#include "memwall/graph/describe.h"
#include "memwall/sim/simulator.h"

namespace memwall::sim_detail {

using detail::buffer_label;
using detail::op_label;

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
  bool operator>(const Release& other) const { return time > other.time; }
};

// A host or NVMe allocation (+) or release (-), ordered at the end.
struct TierEvent {
  double time;
  int64_t delta;
  uint32_t step;
  bool placing;  // made while placing the buffers that exist before the first op
};

class Simulator {
 public:
  Simulator(const Graph& graph, const Plan& plan, const Hardware& hw, const SimOptions& options);

  SimResult run();

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
  std::string absence(BufferId b, size_t tier) const;

  // ---- Device memory --------------------------------------------------------------
  // Applies every release due at or before `time`.
  void release_due(double time);
  void note_device(double time);
  // Workspace has addresses when the plan pins them (Plan::workspace_offsets).
  bool places_workspace() const { return !stays_.empty() && !plan_.workspace_offsets.empty(); }
  // Allocates `bytes` on the device at `time` for buffer b (-1: the current
  // op's workspace).
  bool allocate_device(double time, uint64_t bytes, BufferId b);
  void release_device(double time, uint64_t bytes, BufferId b, int32_t link = -1,
                      bool outgoing = false);
  // Arena entries name a buffer, or an op's workspace as -2 - op.
  static BufferId workspace_key(OpId op) { return -2 - op; }
  std::string arena_name(BufferId key) const {
    return key >= 0 ? buf_name(key) : fmt::format("the workspace of {}", op_name(-2 - key));
  }
  bool place_workspace(OpId op, uint64_t bytes);
  // Note [Offsets per stay]: the stay this allocation begins sits at its own
  // offset.
  bool place_in_arena(BufferId b, uint64_t bytes);
  // [offset, offset + bytes) for `key` (a buffer, or workspace_key), clear of
  // everything allocated.
  bool place_range(BufferId key, uint64_t offset, uint64_t bytes);
  struct Held {
    uint64_t end;
    BufferId key;    // a buffer, or workspace_key(op)
    uint32_t holds;  // device stays holding the range
    // When a swap-out copy that reads the range releases it (time < 0:
    // none), and the copy's link (Note [Waiting for an address]).
    Due leaving{-1, -1};
  };
  bool overlap(BufferId key, uint64_t offset, std::map<uint64_t, Held>::const_iterator other) {
    return fail_at(step_, "{}: {} at offset {} overlaps {} at offset {}, which is still allocated",
                   where(), arena_name(key), offset, arena_name(other->second.key), other->first);
  }

  // Note [Waiting for an address] (sim_memory.cc).
  // `self`: a buffer whose own outgoing copy shares the range (a swap-in
  // behind its swap-out; its copy starts after the host copy exists anyway).
  Due range_released(uint64_t offset, uint64_t bytes, BufferId self = -1) const;
  // When the ranges of what `op` allocates next on the device (its outputs'
  // next stays, its workspace's next run) are free.
  Due room_for(const Op& op) const;

  // ---- Host and NVMe memory ---------------------------------------------------------
  void tier_event(size_t tier, double time, int64_t delta) {
    // Note [Host pool blocks] (SimOptions::host_block_bytes): each host
    // buffer counts as the pool's whole blocks.
    if (const auto block = static_cast<int64_t>(options_.host_block_bytes);
        tier == kHost && block > 1) {
      const int64_t bytes = delta < 0 ? -delta : delta;
      if (bytes <= INT64_MAX - block) {
        const int64_t rounded = (bytes + block - 1) / block * block;
        delta = delta < 0 ? -rounded : rounded;
      }
    }
    tier_events_[tier].push_back({time, delta, step_, placing_});
  }

  // ---- Copies ----------------------------------------------------------------------
  Copy& copy(BufferId b, size_t tier) { return state_[b].copies[tier]; }
  uint64_t bytes_of(BufferId b) const { return graph_.buffers[b].bytes; }

  void create(BufferId b, size_t tier, double alloc_time, Due ready);
  // Removes the copy on `tier`, released at `time` (or later, after its
  // pending readers and outgoing copies).
  void drop(BufferId b, size_t tier, double time, Gone why);

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

  // ---- Copy contention (Note [Copy contention] in sim_contention.cc) -------------
  bool contended() const { return hw_.copy_contention != Hardware::CopyContention{}; }
  // A compute step (a device op, or a host step on the emulated device's
  // cores) of `work` seconds uncontended, on kCompute; its busy time is
  // added to `counter` (compute_time or host_compute_time).
  Due busy_compute(Due start, double work, OpId op, size_t tier, double SimResult::*counter);
  // A host<->device copy on `r` (kH2D, kD2H).
  Due busy_copy(Resource r, Due start, double duration);
  // When `work` seconds of compute that start at `start` end, given the
  // copies known so far.
  double contended_end(double start, double work) const;
  // Extends the latest compute step over a copy issued while it runs.
  void stretch_last_compute();

  struct Interval {
    double start, end;
  };
  struct RunningCompute {
    double start = 0, work = 0, end = 0;
    OpId op = kNoOp;
    size_t tier = kDevice;
    size_t span = std::numeric_limits<size_t>::max();  // its timeline entry, when recorded
    double SimResult::*counter = nullptr;
  };
  // When `r` is next free, as a Due.
  Due queue(Resource r) const {
    return {free_at_[static_cast<size_t>(r)], last_link_[static_cast<size_t>(r)]};
  }
  // The device thread's issue time; the host thread's (see Note [Simulation model]).
  Due cursor() const { return {cursor_, cursor_link_}; }
  Due host_issue() const { return later(cursor(), {host_cursor_, host_cursor_link_}); }
  // Note [The emulated device's thread] (simulator.cc): whether the issuing
  // thread runs the kernels itself and blocks where the executor does.
  bool thread_runs_kernels() const { return hw_.device_is_host_cpu; }
  // The issuing thread blocks until `until` (only on such a device).
  void thread_waits(Due until) {
    if (!thread_runs_kernels() || until.time <= cursor_) return;
    cursor_ = until.time;
    cursor_link_ = until.link;
  }
  void moved(Resource r, uint64_t bytes) { result_.bytes_moved[static_cast<size_t>(r)] += bytes; }

  OpId current_op() const { return plan_.steps[step_].op; }

  // ---- Steps ---------------------------------------------------------------------
  bool place_initial_buffers();

  bool execute(const Step& s);

  // The previous versions an in-place step takes over (Note [In-place
  // steps]): those still on the device whose next version it creates anew.
  BufferIds taken_over(const Step& s, const Op& op);

  // The version of `prev` that `op` creates in place continues prev's
  // device stay (Residency::continues).
  void note_continued(const Op& op, BufferId prev) {
    for (const BufferId v : op.out) {
      if (graph_.buffers[v].version_of == prev) continues_[v] = open_stay_[prev];
    }
  }

  // Checks compute-once and recompute rules; true when the step may run.
  bool check_compute_order(const Step& s);

  // Latest ready time of the op's inputs on `tier`, or nullopt after a failure.
  // A replay (recompute) leaves the op's updates of persistent state alone
  // (Note [Replaying side effects]): it neither needs nor changes them.
  std::optional<Due> inputs_ready(const Op& op, size_t tier, bool replay);

  // Marks the op's reads and in-place updates done at `end` on `tier` and
  // drops copies its updates make stale.
  void finish_uses(const Op& op, size_t tier, double start, Due end, bool replay);

  bool compute_on_device(const Step& s);

  // Creates the op's outputs and workspace on the device, allocated at
  // `alloc_time` and ready at `end`; the workspace goes back at `end`.
  bool allocate_outputs(const Step& s, const Op& op, double alloc_time, Due end);

  // A collective on its own stream: issued at the cursor without holding it
  // back (the host thread does not wait for it), its outputs allocated at
  // issue like a swap_in's (allocation times stay ordered), ready at its end.
  bool collective(const Step& s, const Op& op, Due ready);

  bool has_any_copy(BufferId b) const {
    const auto& copies = state_[b].copies;
    return copies[kDevice].present || copies[kHost].present || copies[kNvme].present;
  }

  // Host-side optimizer step: parameters updated / CPU Adam throughput.
  double host_op_time(const Op& op) const;

  bool compute_on_host(const Step& s);

  bool swap_out(BufferId b, size_t to);

  bool swap_in(BufferId b);

  // NVMe -> host (swap_in "to": "host"): for host compute, e.g. optimizer
  // states kept on NVMe and stepped on the CPU (ZeRO-Infinity).
  bool swap_in_to_host(BufferId b);

  // Host -> NVMe (swap_out "to": "nvme" of a buffer with no device copy):
  // writes back what the host changed; the host copy is released when the
  // write ends.
  bool host_to_nvme(BufferId b);

  bool free_buffer(BufferId b);

  // ---- End of the iteration ------------------------------------------------------------
  void check_end();

  // Builds host and NVMe curves and peaks; checks host memory.
  void settle_tiers();

  SimResult finish();

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
  int32_t cursor_link_ = -1;  // what let the issuing thread reach cursor_
  double host_cursor_ = 0;    // start of the latest host compute step
  int32_t host_cursor_link_ = -1;
  double last_release_ = 0;
  // Note [Copy contention]: host<->device copies that may still overlap a
  // compute step, by start; the latest compute step.
  std::vector<Interval> copy_busy_;
  RunningCompute last_compute_;
  uint32_t step_ = 0;
  bool placing_ = true;  // placing the buffers that exist before the first op
};

}  // namespace memwall::sim_detail
