#include "memwall/runtime/offload_step.h"

#include <algorithm>
#include <chrono>

namespace memwall::runtime {

// Note [Overlapped offload step].
OverlappedStepStats adamw_step_to_device(const AdamWConfig& config, int64_t step,
                                         const AdamWState& state, HalfType type, void* device_half,
                                         CopyEngine& engine, HostPool& pool, size_t tile_elements,
                                         const StepOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const size_t n = state.param.size();
  if (type == HalfType::none)
    throw OptimizerError("offload step: the device copy needs bf16 or fp16");
  if (tile_elements == 0) throw OptimizerError("offload step: tile_elements must be > 0");
  if (n > 0 && device_half == nullptr) throw OptimizerError("offload step: null device pointer");
  if (state.grad.size() != n || state.exp_avg.size() != n || state.exp_avg_sq.size() != n) {
    throw OptimizerError("offload step: param, grad, exp_avg and exp_avg_sq sizes differ");
  }
  OverlappedStepStats stats;
  if (n == 0) return stats;
  const size_t tile = std::min(tile_elements, n);
  HostBuffer staging[2] = {pool.allocate(tile * sizeof(uint16_t)),
                           pool.allocate(tile * sizeof(uint16_t))};
  CopyEvent in_flight[2];
  // Should a tile's step throw, the copies still reading the staging
  // buffers finish before the buffers go back to the pool.
  struct WaitForCopies {
    CopyEvent* events;
    ~WaitForCopies() {
      events[0].wait();
      events[1].wait();
    }
  } wait_for_copies{in_flight};
  auto* device = static_cast<uint16_t*>(device_half);
  for (size_t begin = 0, k = 0; begin < n; begin += tile, k ^= 1) {
    const size_t count = std::min(tile, n - begin);
    const auto wait_start = Clock::now();
    in_flight[k].wait();  // the copy that last read this staging buffer
    stats.copy_wait_seconds += std::chrono::duration<double>(Clock::now() - wait_start).count();
    auto* half = static_cast<uint16_t*>(staging[k].data());
    const AdamWState part{state.param.subspan(begin, count), state.grad.subspan(begin, count),
                          state.exp_avg.subspan(begin, count),
                          state.exp_avg_sq.subspan(begin, count)};
    adamw_step(config, step, part, HalfCopy{type, std::span<uint16_t>(half, count)}, options);
    in_flight[k] = engine.copy_async(device + begin, half, count * sizeof(uint16_t),
                                     CopyDirection::kHostToDevice);
    ++stats.tiles;
  }
  const auto wait_start = Clock::now();
  for (const CopyEvent& e : in_flight) e.wait();
  stats.copy_wait_seconds += std::chrono::duration<double>(Clock::now() - wait_start).count();
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace memwall::runtime
