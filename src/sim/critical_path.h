// Internal to the simulator: which resource the device compute stream waits
// for, so that SimResult::waiting splits the iteration time by cause.
//
// Note [Time split]
// ~~~~~~~~~~~~~~~~~
// The device compute stream runs its steps back to back unless one waits
// for an input (a swap_in, a collective, a host optimizer step's update
// brought back); after its last step the iteration runs on until every
// resource is idle (write-backs, host steps, collectives). So the
// iteration time is exactly compute busy time + the stream's idle gaps +
// the tail, and every gap and the tail is charged to a resource:
//
// Every busy interval of a resource is a link that remembers the interval
// that let it start: the input whose readiness it waited for, the previous
// interval of its own resource when it queued behind it, or the host step
// whose start issued it. A gap [from, to] ends at the end of the link that
// made the input late; that link is charged for the part of the gap it was
// running, and the rest of the gap goes back along its chain, each link
// charged for the part it covers. The tail is charged the same way from
// the interval that ends the iteration. Waits that overlap (two inputs
// late at once, a copy queued while another runs) are charged to the
// critical path only: the input that arrived last, and what delayed it,
// since shortening any other would not end the gap sooner. Device compute
// intervals are not recorded: each ends before any idle time of the
// compute stream it could explain begins, so a chain that reaches one
// ends there (the simulator's default plans record no link at all).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "memwall/sim/simulator.h"

namespace memwall::sim_detail {

// A time something becomes possible, and the link whose end (or, for an
// issue by the host thread, start) it is; -1 for time 0 and the initial
// placement.
struct Due {
  double time = 0;
  int32_t link = -1;
};
// The later of two; on a tie the first.
inline Due later(Due a, Due b) { return b.time > a.time ? b : a; }

class CriticalPath {
 public:
  // Records a busy interval of `resource` that started when `after` let it.
  int32_t add(Resource resource, double start, double end, int32_t after) {
    links_.push_back({start, end, after, resource});
    return static_cast<int32_t>(links_.size() - 1);
  }

  // Charges [from, to] to the links of the chain ending at `link`
  // (Note [Time split]); the parts add up to to - from.
  void charge(double from, double to, int32_t link,
              std::array<double, kNumResources>& waiting) const {
    double hi = to;
    auto last = Resource::kCompute;
    bool seen = false;
    while (hi > from && link >= 0) {
      const Link& l = links_[static_cast<size_t>(link)];
      const double top = std::min(hi, l.end);
      // A link ends where the one it enabled starts; a gap between them
      // (none in the simulator's arithmetic) stays with the later link.
      if (top < hi) waiting[static_cast<size_t>(seen ? last : l.resource)] += hi - top;
      const double bottom = std::max(from, std::min(top, l.start));
      waiting[static_cast<size_t>(l.resource)] += top - bottom;
      hi = bottom;
      last = l.resource;
      seen = true;
      link = l.after;
    }
    if (hi > from) waiting[static_cast<size_t>(last)] += hi - from;
  }

 private:
  struct Link {
    double start;
    double end;
    int32_t after;
    Resource resource;
  };
  std::vector<Link> links_;
};

}  // namespace memwall::sim_detail
