// The simulator's memory (simulator_impl.h): device allocations and
// releases, the arena of pinned addresses, and the copies of buffers on each
// tier (Note [Simulation model] in simulator.cc).
#include <algorithm>
#include <functional>
#include <iterator>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "simulator_impl.h"

namespace memwall::sim_detail {

// ---- Device memory --------------------------------------------------------------
void Simulator::release_due(double time) {
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

void Simulator::note_device(double time) {
  if (!options_.record_curves) return;
  auto& curve = result_.curves[kDevice];
  if (!curve.empty() && curve.back().time == time) {
    curve.back().bytes = device_bytes_;
  } else {
    curve.push_back({time, device_bytes_});
  }
}

bool Simulator::allocate_device(double time, uint64_t bytes, BufferId b) {
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
    result_.device_peak_step = step_;
  }
  if (device_bytes_ > plan_.budget) {
    const std::string what =
        b >= 0 ? buf_name(b) : fmt::format("the workspace of {}", op_name(current_op()));
    return fail_at(step_,
                   "{}: device memory exceeds the budget by {} bytes ({} > {}) at {:.6f} s, "
                   "allocating {}",
                   where(), device_bytes_ - plan_.budget, device_bytes_, plan_.budget, time, what);
  }
  if (b >= 0 && !stays_.empty()) return place_in_arena(b, bytes);
  // Note [Workspace span]: `bytes` is the op's span.
  if (b < 0 && places_workspace()) {
    return place_workspace(current_op(), bytes);
  }
  return true;
}

void Simulator::release_device(double time, uint64_t bytes, BufferId b, int32_t link,
                               bool outgoing) {
  uint32_t residency = 0;
  if (options_.record_residency) residency = b >= 0 ? open_stay_[b] : open_workspace_;
  uint64_t at = kNoOffset;
  if (b >= 0 && bytes > 0 && !stays_.empty()) at = held_at_[b];
  if (b < 0 && places_workspace()) at = workspace_at_;
  releases_.push_back({time, bytes, b, residency, at});
  if (outgoing && at != kNoOffset) {  // Note [Waiting for an address]
    if (const auto held = arena_.find(at); held != arena_.end()) {
      held->second.leaving = later(held->second.leaving, {time, link});
    }
  }
  std::push_heap(releases_.begin(), releases_.end(), std::greater<>());
}

bool Simulator::place_workspace(OpId op, uint64_t bytes) {
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

bool Simulator::place_in_arena(BufferId b, uint64_t bytes) {
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

bool Simulator::place_range(BufferId key, uint64_t offset, uint64_t bytes) {
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

// Note [Waiting for an address]: with offsets, a step that places a stay
// (or a workspace) over a range whose release is still pending (an
// outgoing copy still reads it) waits for that release, as the executor's
// make_room does, and the thread that issues steps waits with it. A plan
// laid out with one profile's timings then runs under another's, slower
// where a copy takes longer than the layout assumed. A range held by
// anything else is not waited for: the placement reports the overlap.
// O(log + overlapping ranges).
Due Simulator::range_released(uint64_t offset, uint64_t bytes, BufferId self) const {
  Due free{0, -1};
  if (bytes == 0) return free;
  auto it = arena_.lower_bound(offset);
  if (it != arena_.begin() && std::prev(it)->second.end > offset) it = std::prev(it);
  for (; it != arena_.end() && it->first < offset + bytes; ++it) {
    if (it->second.key != self) free = later(free, it->second.leaving);
  }
  return free;
}

Due Simulator::room_for(const Op& op) const {
  Due free{0, -1};
  if (stays_.empty()) return free;
  for (const BufferId b : op.out) {
    if (state_[b].copies[kDevice].present) continue;  // a recompute keeps it
    if (const auto at = stay_offset(plan_, b, stays_[b])) {
      free = later(free, range_released(*at, bytes_of(b)));
    }
  }
  if (contiguous_workspace(op) > 0 && places_workspace()) {
    const uint32_t run = workspace_runs_.empty() ? 0 : workspace_runs_[op.id];
    if (const auto at = workspace_offset(plan_, op.id, run)) {
      free = later(free, range_released(*at, contiguous_workspace(op)));
    }
  }
  return free;
}

// ---- Copies ----------------------------------------------------------------------
void Simulator::create(BufferId b, size_t tier, double alloc_time, Due ready) {
  Copy& c = copy(b, tier);
  c.present = true;
  c.ready = ready.time;
  c.ready_link = ready.link;
  c.read_end = ready.time;
  c.read_end_link = ready.link;
  c.gone = Gone::kNever;
  if (tier != kDevice) tier_event(tier, alloc_time, static_cast<int64_t>(bytes_of(b)));
}

void Simulator::drop(BufferId b, size_t tier, double time, Gone why) {
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

}  // namespace memwall::sim_detail
