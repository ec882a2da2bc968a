// The block host memory is handed out in when memwall runs a plan.
#pragma once

#include <cstdint>

namespace memwall::alloc {

// Whole 4 KiB pages: O_DIRECT needs buffers aligned to and sized in them.
// The runtime's pinned host pool gives every buffer whole blocks
// (runtime::kHostPoolAlignment) and the planner counts host bytes in them
// when it judges whether a plan runs (kRunHostBlockBytes in
// memwall/planner/runnable_plan.h; Note [Host pool blocks] in
// memwall/sim/simulator.h). Here because alloc is the one module both may
// include (DESIGN.md: runtime depends on alloc only, so not base).
inline constexpr uint64_t kHostBlockBytes = 4096;

}  // namespace memwall::alloc
