// The configuration search's pieces (config_work.h): building a
// configuration, the host share of chunked optimizer states, and the device
// chunk search.
#include <algorithm>
#include <cmath>
#include <limits>

#include "config_work.h"
#include "memwall/base/error.h"
#include "memwall/remat/remat.h"

namespace memwall::planner_detail {

Built build(const Graph& graph, const StateConfig& config, int ranks) {
  try {
    return {make_config(graph, config, ranks), {}};
  } catch (const Error& e) {
    return {std::nullopt, e.what()};
  }
}

std::optional<Work> with_most_on_host(const Graph& graph, const ConfigWork& all_nvme,
                                      const Hardware& hw, const PlannerOptions& opts, int ahead,
                                      bool in_order, const Deadline& deadline,
                                      double device_share) {
  if (all_nvme.config.optimizer != Tier::kNvme || !all_nvme.offload) return std::nullopt;
  const SimResult& sim = all_nvme.keep_all(hw).sim;
  if (!sim.valid) return std::nullopt;
  const uint64_t states = optimizer_state_bytes(*all_nvme.offload);
  const double used = static_cast<double>(sim.peak_bytes[static_cast<size_t>(Tier::kHost)]);
  const double left = static_cast<double>(hw.host_memory_bytes) - used;
  if (states == 0 || left <= 0) return std::nullopt;
  double low = 0, high = std::min(1.0 - device_share, left / static_cast<double>(states));
  std::optional<Work> found;
  for (int probe = 0; probe < 6 && high - low > 0.01 && !deadline.passed(); ++probe) {
    StateConfig split = all_nvme.config;
    split.optimizer_host_share = probe == 0 ? high : (low + high) / 2;
    split.nvme_read_ahead = ahead;
    split.chunks_in_order = in_order;
    split.optimizer_device_share = device_share;
    Built b = build(graph, split, opts.ranks);
    if (!b.work) break;
    Unconstrained u = unconstrained_time(*b.work, hw, opts);
    if (std::isfinite(u.seconds)) {
      low = split.optimizer_host_share;
      found = Work{std::move(*b.work), std::move(u)};
      if (probe == 0) break;
    } else {
      high = split.optimizer_host_share;
    }
  }
  if (found && low < 0.02) found.reset();
  return found;
}

// Note [Device chunk search]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A configuration whose optimizer steps run on the CPU can keep a share of
// its parameters whole on the device (Note [Device chunks] in
// swap/offload.cc): less for the CPU to step and less state traffic, less
// device memory for activations. After the configuration search, two bases
// are weighed: the best plan's configuration and, when its parameters are
// on the device, the same with them on the host (which frees their bytes
// for chunks, at the price of bringing them in per use). For each, `most`
// is the largest share the device could hold beside the planning view's
// proven floor; the base whose unconstrained time at 4/5 of its `most` is
// lower is kept, and four fits (keep-all, then memwall's
// rematerialization planner) bisect its share from 4/5 of `most`: up while
// the plan still waits on the host CPU or the drive, down when it does not
// fit or its recomputation made the device the bottleneck. Each share of
// an NVMe configuration gets its largest host share (with_most_on_host).
void DeviceChunkSearch::run(const StateConfig& found) {
  Base bases[2] = {base_of(found), {}};
  if (found.params == Tier::kDevice) {
    StateConfig off = found;
    off.params = Tier::kHost;
    bases[1] = base_of(off);
  }
  const Base* chosen = nullptr;
  double chosen_time = std::numeric_limits<double>::infinity();
  for (const Base& b : bases) {
    if (!b.work || b.most <= 0 || deadline.passed()) continue;
    const std::optional<Work> w = at_share(b, 0.8 * b.most);
    if (w && w->bound.seconds < chosen_time) chosen_time = w->bound.seconds, chosen = &b;
  }
  if (!chosen || !(chosen_time < best_time)) return;
  double low = 0, high = 1, fraction = 0.8;
  for (int probe = 0; probe < 4 && !deadline.passed(); ++probe) {
    (fit_at(*chosen, fraction) == Verdict::kMore ? low : high) = fraction;
    fraction = (low + high) / 2;
  }
}

DeviceChunkSearch::Base DeviceChunkSearch::base_of(StateConfig c) const {
  Base b;
  b.ahead = std::max(c.nvme_read_ahead, 4);
  c.optimizer_device_share = 0;
  c.optimizer_host_share = 0;
  c.chunks_in_order = false;
  c.nvme_read_ahead = 1;
  Built built = build(graph, c, opts.ranks);
  if (!built.work || !built.work->offload) return b;
  const OffloadGraph& og = *built.work->offload;
  const uint64_t floor = remat_lower_bound(built.work->view).bytes;
  // What one share of the states brings onto the device: their bytes and,
  // when the parameters are off it, the parameters' too.
  double weight = static_cast<double>(optimizer_state_bytes(og));
  if (c.params != Tier::kDevice) {
    for (const OffloadedState& o : og.states) {
      weight += static_cast<double>(og.graph.buffers[o.param].bytes);
    }
  }
  if (floor >= budget || weight <= 0) return b;
  b.most = std::min(1.0, static_cast<double>(budget - floor) / weight);
  b.work = std::move(built.work);
  return b;
}

std::optional<Work> DeviceChunkSearch::at_share(const Base& b, double share) const {
  if (share <= 0 || deadline.passed()) return std::nullopt;
  if (b.work->config.optimizer == Tier::kNvme) {
    std::optional<Work> w =
        with_most_on_host(graph, *b.work, hw, opts, b.ahead, /*in_order=*/false, deadline, share);
    if (w) return w;
  }
  StateConfig c = b.work->config;
  c.optimizer_device_share = share;
  Built built = build(graph, c, opts.ranks);
  if (!built.work) return std::nullopt;
  Unconstrained u = unconstrained_time(*built.work, hw, opts);
  return Work{std::move(*built.work), std::move(u)};
}

DeviceChunkSearch::Verdict DeviceChunkSearch::fit_at(const Base& b, double fraction) {
  const std::optional<Work> w = at_share(b, fraction * b.most);
  if (!w || !std::isfinite(w->bound.seconds)) return Verdict::kLess;
  // Every chunk on the device is the all-on-device configuration, which
  // the configuration search had.
  if (w->work.config.optimizer_device_share >= 1) return Verdict::kLess;
  // Even unconstrained no faster: the share's own traffic or steps bind.
  if (!(w->bound.seconds < best_time)) return Verdict::kLess;
  for (const Activations a : {Activations::kKeepAll, Activations::kRemat}) {
    if (deadline.passed()) return Verdict::kLess;
    PlannerOptions left = opts;
    left.time_limit = deadline.left();
    ++fitted;
    Candidate c = fit(w->work, a, hw, budget, left);
    if (!c.fits) continue;
    const auto waited = [&](Resource r) { return c.sim.waiting[static_cast<size_t>(r)]; };
    const double offloaded =
        waited(Resource::kHostCpu) + waited(Resource::kNvmeRead) + waited(Resource::kNvmeWrite);
    const Verdict v = offloaded > 0.02 * c.sim.iteration_time ? Verdict::kMore : Verdict::kLess;
    // A gain within rounding is none: the plan found already is simpler.
    if (c.sim.iteration_time < best_time * (1 - 1e-6)) {
      best_time = c.sim.iteration_time;
      best = std::move(c);
    }
    return v;
  }
  return Verdict::kLess;
}

}  // namespace memwall::planner_detail
