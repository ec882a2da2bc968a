// The NVMe swap space a plan needs (nvme_reservation.h).
//
// Note [NVMe reservation]
// ~~~~~~~~~~~~~~~~~~~~~~~
// `memwall run` gives every buffer the plan ever places or swaps out to
// NVMe one extent of whole blocks of its own, allocated at the buffer's
// first write and kept until the run ends: a later write of the buffer (a
// model state written back after its CPU step, an activation swapped out
// again next iteration) goes to the same extent (Executor::store_on_nvme
// in src/exec/executor.cc). The swap space is then exactly the sum of
// those extents, and it is provably enough: the engine's first-fit extent
// allocator (src/runtime/extent_allocator.cc) never sees a free, so its
// free space stays one run at the end and every allocation takes its front.
// Freeing extents as buffers leave NVMe would let the reservation shrink to
// the peak at once, but first fit can then fragment it (a 2-block buffer
// leaves, a 1-block one is rewritten into its front: 2 blocks free, none 2
// long: ExtentAllocator.FreedExtentsFragmentTheSumOfTheBuffers in
// tests/runtime/nvme_faults_test.cc).
// For model states, all that ZeRO-Infinity puts there, the sum is the
// planned peak; for activations swapped to NVMe it can exceed it.
// The block: each buffer costs up to one block more than its bytes, which
// at the engine's 1 MiB made a tiny Qwen2's 1.43 MiB of model states (135
// buffers) 135 MiB. The run takes the largest block, halving from 1 MiB
// down to the 4 KiB of O_DIRECT, whose rounding adds at most 1/16 to the
// bytes: 1 MiB for large tensors, where block size matters to I/O speed,
// small blocks only where the buffers are small.
// The engine rounds the space up to whole blocks in each of its files (one
// per --nvme-dir): at most one block per directory more.
#include "memwall/plan/nvme_reservation.h"

#include "memwall/base/error.h"

namespace memwall {

std::vector<uint8_t> nvme_buffers(const Graph& graph, const Plan& plan) {
  std::vector<uint8_t> on_nvme(graph.buffers.size(), 0);
  for (const auto& [b, tier] : plan.placement) {
    if (tier == Tier::kNvme) on_nvme[b] = 1;
  }
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::kSwapOut && s.to == Tier::kNvme) on_nvme[s.buf] = 1;
  }
  return on_nvme;
}

namespace {

NvmeReservation reserve(const Graph& graph, const std::vector<uint8_t>& on_nvme,
                        uint64_t block_bytes) {
  NvmeReservation r;
  r.block_bytes = block_bytes;
  for (const Buffer& b : graph.buffers) {
    if (!on_nvme[b.id]) continue;
    ++r.buffers;
    r.bytes = checked_add(r.bytes, b.bytes, "NVMe bytes");
    r.blocks += b.bytes / block_bytes + (b.bytes % block_bytes != 0 ? 1 : 0);
  }
  (void)checked_mul(r.blocks, block_bytes, "NVMe bytes");
  return r;
}

}  // namespace

NvmeReservation nvme_reservation(const Graph& graph, const Plan& plan, uint64_t smallest,
                                 uint64_t largest) {
  if (smallest == 0 || largest % smallest != 0) {
    fail("nvme: blocks from {} to {} bytes", smallest, largest);
  }
  const std::vector<uint8_t> on_nvme = nvme_buffers(graph, plan);
  NvmeReservation r = reserve(graph, on_nvme, largest);
  // Note [NVMe reservation]: halve while rounding adds more than 1/16.
  while (r.block_bytes > smallest && (r.reserved_bytes() - r.bytes) > r.bytes / 16 &&
         (r.block_bytes / 2) % smallest == 0) {
    r = reserve(graph, on_nvme, r.block_bytes / 2);
  }
  return r;
}

}  // namespace memwall
