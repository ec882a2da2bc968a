// Whether a plan runs within its budget as `memwall run` runs it: in the
// arena its layout gives, or on the runtime allocator, whose chunks the
// simulator's byte count does not see (Note [Plans that run] in
// src/planner/runnable_plan.cc). The planner reaches the allocator (the
// alloc module) for this: the replay is the allocator's own code.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "memwall/alloc/host_block.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/plan_layout.h"

namespace memwall {

// The host memory blocks `memwall run` allocates buffers in: the pinned
// host pool's alignment (runtime::kHostPoolAlignment, whole 4 KiB pages
// for O_DIRECT; both are alloc::kHostBlockBytes), which the simulator
// counts host bytes in when it judges whether a plan runs.
inline constexpr uint64_t kRunHostBlockBytes = alloc::kHostBlockBytes;

// A plan without offsets replayed through an allocator policy on a device
// of the plan's budget (2 MiB chunks, as the emulated device and a GPU's
// virtual memory map them): every device stay the simulator records and
// each op's workspace while it runs (SimOptions::live_scratch).
struct AllocatorFit {
  std::string policy;
  bool fits = true;
  uint64_t usable = 0;         // whole chunks of it: what the device can map
  uint64_t peak_live = 0;      // most bytes the replay had live at once
  uint64_t peak_reserved = 0;  // what the policy reserved (with no limit when it ran out)
  std::string text() const;    // one clause, for rows and errors
};
AllocatorFit allocator_fit(const Graph& graph, const Plan& plan, const Hardware& hw,
                           std::string_view policy = "stitching");

// What `memwall plan --out` writes: the plan laid out in its budget, or
// (with --no-layout, or when no layout fits) the plan without offsets when
// the stitching allocator holds it. `runs` false: neither; `overshoot` is
// how many bytes the arena or the reserve passed what the budget holds.
struct RunnablePlan {
  Plan plan;  // with offsets when laid out
  bool runs = false;
  std::optional<PlanLayout> laid;   // when a layout was tried
  std::optional<AllocatorFit> fit;  // when the allocator was tried
  uint64_t overshoot = 0;
  uint64_t target = 0;  // the budget to plan for next, from the excess (0: none)
  // Nothing better to look for: laid out, or (no layout asked) it runs.
  bool settled() const;
  std::string row_text() const;  // the "laid out" row
  std::string why_not() const;   // when !runs: one clause
  nlohmann::json json() const;   // layout_json, with "allocator" when tried
};
RunnablePlan runnable_plan(const Plan& plan, const Graph& graph, const Hardware& hw, bool lay_out);

// Note [Plans that run]: `first`, the plan for the whole `budget`, or a
// plan for less that settles. `plan_for(b)` plans for the lower budget b
// (its plan's budget the whole one) and says how it runs, or nullopt when
// nothing fits b; `adopt()` makes that last plan the caller's. Throws
// Error, naming `strategy`, when no plan runs. `planned_for` is set to the
// lowered budget of the plan written, 0 for the first.
using PlanFor = std::function<std::optional<RunnablePlan>(uint64_t)>;
RunnablePlan plan_until_it_runs(RunnablePlan first, uint64_t budget, std::string_view strategy,
                                const PlanFor& plan_for, const std::function<void()>& adopt,
                                uint64_t& planned_for);

// The "planned for" row of a plan made for less than its budget.
std::string planned_for_text(uint64_t planned_for);

}  // namespace memwall
