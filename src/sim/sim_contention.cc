// Compute and copies that slow each other down (Hardware::copy_contention).
//
// Note [Copy contention]
// ~~~~~~~~~~~~~~~~~~~~~~
// A GPU copies over PCIe with DMA engines: a swap costs its kernels almost
// nothing, which is why the simulator runs copies on streams of their own.
// memwall's emulated device (a machine without a GPU) copies with memcpy
// threads on the same cores and memory bus as the kernels: on this 2-vCPU
// machine a 2-thread matmul loop ran 2.1-3.0x slower while one thread
// copied, and the copies 1.3-1.8x slower than alone. Without a model of it
// the simulator hid vDNN's copies behind kernels that in fact slowed down
// (measured overlap 0.41-0.82 against 0.91-0.95 predicted; steps 1.13-1.23x
// the prediction). A profile's copy_contention {compute, copy} (measured by
// `memwall calibrate --graph`, Note [Measuring copy contention]) says how
// much:
// - a host<->device copy takes `copy` times its uncontended time, as if a
//   kernel ran beside it throughout (the device thread keeps compute busy
//   except where it waits, which the measurement also includes);
// - a compute step (device op, or a host step on the emulated device's
//   cores) does 1/`compute` of its work per second while any copy runs
//   (two at once slow it no further: the kernels' threads already share
//   the cores), full work otherwise.
// On the emulated device copies issue when the latest compute step has
// ended (Note [The emulated device's thread]), so they slow the steps after
// them. On a device with a stream (a profile may give any device a
// contention) copies issue at the start of the latest compute step, which
// the simulator has already timed: a prefetch placed after op k runs beside
// op k. So there a copy that starts while the latest compute step runs
// stretches that step: its end, the compute stream's free time, its
// outputs' ready time and its busy time (compute_time, or
// host_compute_time) move out. Copies that other steps started from the
// step's old end stay where they are, and releases at that end stay too:
// both differ from the stretched end by at most the stretch, and only on
// contended profiles. With {1, 1}, the default and every built-in GPU's,
// nothing here runs.
#include <algorithm>
#include <limits>

#include "simulator_impl.h"

namespace memwall::sim_detail {

Due Simulator::busy_compute(Due start, double work, OpId op, size_t tier,
                            double SimResult::*counter) {
  if (!contended()) {
    result_.*counter += work;
    return busy(Resource::kCompute, start, work);
  }
  // Compute starts in order: copies over by now cannot touch later steps.
  std::erase_if(copy_busy_, [&](const Interval& i) { return i.end <= start.time; });
  const double end = contended_end(start.time, work);
  const Due due = busy(Resource::kCompute, start, end - start.time);
  result_.*counter += end - start.time;
  last_compute_ = {start.time, work, end, op, tier, std::numeric_limits<size_t>::max(), counter};
  if (options_.record_timeline) last_compute_.span = result_.timeline.size() - 1;
  return due;
}

Due Simulator::busy_copy(Resource r, Due start, double duration) {
  // Note [Copy latency] (src/runtime/probes.cc): the emulated engine's
  // worker thread pays its wake-up (the profile's pcie_latency, in
  // `duration`) only when it was idle; a copy queued behind another starts
  // as soon as that one ends.
  if (thread_runs_kernels() && free_at(r) > 0 && start.time <= free_at(r)) {
    duration = std::max(0.0, duration - hw_.pcie_latency);
  }
  if (!contended()) return busy(r, start, duration);
  const Due end = busy(r, start, duration * hw_.copy_contention.copy);
  const Interval span{start.time, end.time};
  const auto at =
      std::upper_bound(copy_busy_.begin(), copy_busy_.end(), span,
                       [](const Interval& a, const Interval& b) { return a.start < b.start; });
  copy_busy_.insert(at, span);
  if (last_compute_.op != kNoOp && span.start < last_compute_.end) stretch_last_compute();
  return end;
}

double Simulator::contended_end(double start, double work) const {
  const double slow = hw_.copy_contention.compute;
  double t = start;
  double left = work;
  for (const Interval& span : copy_busy_) {  // by start; overlapping copies merge
    if (span.end <= t) continue;
    if (span.start > t) {
      if (left <= span.start - t) return t + left;
      left -= span.start - t;
      t = span.start;
    }
    const double done = (span.end - t) / slow;  // work done while the copy runs
    if (left <= done) return t + left * slow;
    left -= done;
    t = span.end;
  }
  return t + left;
}

void Simulator::stretch_last_compute() {
  RunningCompute& c = last_compute_;
  const double end = contended_end(c.start, c.work);
  if (end <= c.end) return;
  result_.*c.counter += end - c.end;
  double& free = free_at_[static_cast<size_t>(Resource::kCompute)];
  free = std::max(free, end);
  if (c.span < result_.timeline.size()) result_.timeline[c.span].end = end;
  const Op& op = graph_.ops[c.op];
  for (const BufferIds* made : {&op.out, &op.updates}) {
    for (const BufferId b : *made) {
      Copy& k = copy(b, c.tier);
      if (k.present && k.ready == c.end) k.ready = end;
    }
  }
  for (const BufferId b : op.in) {
    if (copy(b, c.tier).present) copy(b, c.tier).read_until(end, -1);
  }
  c.end = end;
}

}  // namespace memwall::sim_detail
