// Helpers shared by the remat tests.
#pragma once

#include "memwall/hw/hardware.h"

namespace memwall {

// The GPU the remat tests plan for.
inline const Hardware& gpu() { return find_gpu("a100-80g"); }

}  // namespace memwall
