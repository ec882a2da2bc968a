// ZeRO-Offload's CPU step with the copy back overlapped.
//
// Note [Overlapped offload step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The device needs the updated weights in bf16/fp16 after the CPU step. Done
// one after the other, the step costs update time + copy time; done by
// tiles, the copy of tile i (from a pinned staging buffer, on the copy
// engine's host-to-device stream) runs while tile i+1 is updated, so the
// step costs about max(update, copy) plus one tile. Two staging buffers
// from the pinned pool alternate: before a buffer is refilled, the copy
// that read it must have finished (its event). The results are bitwise
// those of adamw_step over the whole tensor with a HalfCopy, since the
// update is elementwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/cpu_optimizer.h"
#include "memwall/runtime/host_pool.h"

namespace memwall::runtime {

struct OverlappedStepStats {
  uint64_t tiles = 0;
  double seconds = 0;            // the whole call
  double copy_wait_seconds = 0;  // time the CPU waited for a staging buffer's copy
};

// AdamW over `state` (as adamw_step), writing the `type` (bf16 or fp16)
// copy of the updated weights to `device_half` (param.size() 2-byte
// elements of device memory) through `engine`, `tile_elements` at a time;
// returns when every copy has landed. Throws OptimizerError for bad
// arguments (a null device pointer, HalfType::none, a zero tile) and the
// pool's error when it cannot hold two staging tiles.
OverlappedStepStats adamw_step_to_device(const AdamWConfig& config, int64_t step,
                                         const AdamWState& state, HalfType type, void* device_half,
                                         CopyEngine& engine, HostPool& pool,
                                         size_t tile_elements = size_t{1} << 20,
                                         const StepOptions& options = {});

}  // namespace memwall::runtime
