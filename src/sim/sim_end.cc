// The end of a simulated iteration (simulator_impl.h): the checks on what the
// next iteration needs, the host and NVMe curves, and the result.
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "simulator_impl.h"

namespace memwall::sim_detail {

// ---- End of the iteration ------------------------------------------------------------
void Simulator::check_end() {
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

void Simulator::settle_tiers() {
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
          // Before the first op: what the plan places on the host, and its
          // host buffers (Plan::host_reserved), overfill it already.
          const uint64_t reserved = host_reserved_bytes(plan_);
          const std::string when =
              e.placing ? fmt::format("before the first op, the buffers placed on the host{}",
                                      reserved > 0 ? fmt::format(" and {} bytes of host buffers "
                                                                 "(host_reserved)",
                                                                 reserved)
                                                   : std::string())
                        : step_label(e.step);
          if (node_ranks_ > 1) {
            fail_at(e.step,
                    "{}: host memory exceeds this rank's 1/{} share of the node's, {} bytes, "
                    "by {} bytes at {:.6f} s",
                    when, node_ranks_, hw_.host_memory_bytes, now - hw_.host_memory_bytes, e.time);
          } else {
            fail_at(e.step, "{}: host memory exceeds the host's {} bytes by {} bytes at {:.6f} s",
                    when, hw_.host_memory_bytes, now - hw_.host_memory_bytes, e.time);
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

SimResult Simulator::finish() {
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

}  // namespace memwall::sim_detail
