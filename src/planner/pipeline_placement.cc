// Non-contiguous pipeline placement (memwall/planner/pipeline_placement.h).
//
// Note [Non-contiguous placement]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Why: the dynamic programme of Note [Pipeline partitioning] gives each
// device one contiguous run of layers. A device may do better with several
// runs: three layers of 2, 3 and 2 s on two devices split contiguously at
// best 5 s against 2, while the first and last on one device and the middle
// on the other give 4 s against 3 (docs/pipeline.md). Tarnawski et al. 2020
// ("Efficient Algorithms for Device Placement of DNN Graph Operators",
// NeurIPS 2020, Section 5) find such placements with an integer programme;
// this is that programme over memwall's units and costs.
//
// Units: the segments between consecutive cut points (the layers' starts,
// Note [What a layer is]), each with its forward + backward seconds p_u, its
// resident bytes s_u (states, optimizer states sharded as sharded_states
// shards them, engine buffers), its saved bytes a_u per micro-batch in
// flight and its peak h_u above them (forward, backward or optimizer step).
// The segments form a chain; boundary b (between u = b and b + 1) costs c_b:
// latency + bytes / bandwidth of the forward activation and of the backward
// gradient over the in-node link, paid by each of the two devices (the
// sender's and the receiver's load, as the paper charges them) when they
// differ.
//
// The programme, for U segments on D devices with F micro-batches in flight
// a segment (placement_in_flight: min(m, D), GPipe m):
//   x[u][d] binary: segment u on device d;  sum_d x[u][d] = 1;
//   sum_u x[u][d] >= 1 (every device runs something);
//   w[b][d] >= |x[b][d] - x[b+1][d]| (1 where d holds one side of a split);
//   M_d >= h_u x[u][d];  sum_u (s_u + F a_u) x[u][d] + M_d <= budget;
//   T >= sum_u p_u x[u][d] + sum_b c_b w[b][d];  minimize T,
// T being one micro-batch's steady-state time per device (the pipeline's
// time per micro-batch once full). Memory is conservative: every segment's
// F micro-batches at once plus the largest single peak above them, which
// bounds what the simulation finds for the merged chunks. Symmetry (the
// devices are alike on one node's link): segment 0 on device 0, and device
// d holds segment u only if device d-1 holds one before u, which orders the
// devices by their first segment. Times are scaled by the total and bytes
// by the budget; CBC's answer is checked in exact bytes (one past the
// budget by CBC's tolerance, 1e-7 of it, is not taken).
//
// The best contiguous placement under the same model (a dynamic programme
// over the segments) is CBC's warm start and the comparison printed: the
// programme's answer is never worse. CBC runs in a child killed at the
// deadline (Note [Hard deadline], src/remat/cbc_process.cc); killed before
// it answers, the result is the contiguous placement, flagged.
//
// Not modelled: which node a device is on (every boundary pays the in-node
// link), links overlapping compute (the simulation overlaps them, so the
// loads are pessimistic where transfers dominate), the order the devices
// run their passes in (the simulation's list schedule decides, Note
// [Pipeline simulation]), data-parallel gradient all-reduces, and other
// than layer boundaries as cuts (the paper's op-level graphs).
#include "memwall/planner/pipeline_placement.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/remat/cbc_solve.h"

namespace memwall {
namespace {

// Bytes of a segment with its micro-batches in flight, without its peak.
uint64_t held_bytes(const PlacementProblem& p, const SegmentCost& s) {
  return saturating_add(s.states, saturating_mul(s.saved, static_cast<uint64_t>(p.in_flight)));
}

#ifdef MEMWALL_HAVE_CBC

constexpr double kNoPlacement = std::numeric_limits<double>::infinity();
// Of the deadline, CBC's own time limit; the rest is for the child to answer.
constexpr double kPlacementCbcShare = 0.8;
constexpr double kPlacementLeastSolve = 0.05;  // seconds below which CBC is not started

// The best contiguous placement: device k holds a run of segments, in order.
struct Contiguous {
  double load = kNoPlacement;
  std::vector<int> device;
};

Contiguous best_contiguous(const PlacementProblem& p) {
  const int units = static_cast<int>(p.segments.size());
  const int devices = p.devices;
  std::vector<std::vector<double>> best(devices + 1, std::vector<double>(units + 1, kNoPlacement));
  std::vector<std::vector<int>> from(devices + 1, std::vector<int>(units + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= devices; ++k) {
    for (int j = k; j <= units - (devices - k); ++j) {
      // Runs [i, j), grown backwards from j.
      double seconds = 0;
      uint64_t held = 0;
      uint64_t peak = 0;
      for (int i = j - 1; i >= k - 1; --i) {
        const SegmentCost& s = p.segments[i];
        seconds += s.seconds;
        held = saturating_add(held, held_bytes(p, s));
        peak = std::max(peak, s.peak);
        if (saturating_add(held, peak) > p.budget) break;  // longer runs hold more
        if (best[k - 1][i] == kNoPlacement) continue;
        const double load = seconds + (i > 0 ? p.boundary_seconds[i - 1] : 0) +
                            (j < units ? p.boundary_seconds[j - 1] : 0);
        const double value = std::max(best[k - 1][i], load);
        if (value < best[k][j]) {
          best[k][j] = value;
          from[k][j] = i;
        }
      }
    }
  }
  Contiguous c;
  if (best[devices][units] == kNoPlacement) return c;
  c.device.assign(units, 0);
  for (int k = devices, j = units; k > 0; --k) {
    const int i = from[k][j];
    for (int u = i; u < j; ++u) c.device[u] = k - 1;
    j = i;
  }
  c.load = std::ranges::max(placement_loads(p, c.device));
  return c;
}

// The programme's columns: x[u][d], w[b][d], M_d, T.
struct PlacementColumns {
  int units = 0;
  int devices = 0;
  int x(int u, int d) const { return u * devices + d; }
  int w(int b, int d) const { return units * devices + b * devices + d; }
  int m(int d) const { return (2 * units - 1) * devices + d; }
  int t() const { return 2 * units * devices; }
  int count() const { return t() + 1; }
};

struct PlacementRow {
  std::vector<std::pair<int, double>> terms;
  double lo = -DBL_MAX;
  double hi = DBL_MAX;
};

struct PlacementModel {
  PlacementColumns cols;
  std::vector<PlacementRow> rows;
  std::vector<double> lo, hi, obj;
  double time_unit = 1;
};

PlacementModel build_placement_model(const PlacementProblem& p) {
  PlacementModel model;
  const int units = static_cast<int>(p.segments.size());
  const int devices = p.devices;
  const PlacementColumns c{units, devices};
  model.cols = c;
  double total = 0;
  for (const SegmentCost& s : p.segments) total += s.seconds;
  for (const double b : p.boundary_seconds) total += b;
  model.time_unit = total > 0 ? total : 1;
  const double unit = model.time_unit;
  const double bytes = static_cast<double>(std::max<uint64_t>(p.budget, 1));
  uint64_t top_peak = 0;
  for (const SegmentCost& s : p.segments) top_peak = std::max(top_peak, s.peak);
  model.lo.assign(c.count(), 0);
  model.hi.assign(c.count(), 1);
  model.obj.assign(c.count(), 0);
  model.obj[c.t()] = 1;
  model.hi[c.t()] = DBL_MAX;
  // Every segment runs somewhere: T is at least the longest (the LP relaxation spreads it).
  model.lo[c.t()] = std::ranges::max(p.segments, {}, &SegmentCost::seconds).seconds / unit;
  for (int d = 0; d < devices; ++d) model.hi[c.m(d)] = static_cast<double>(top_peak) / bytes;
  // Symmetry: device d's first segment is at d or later; segment 0 on device 0.
  for (int u = 0; u < units; ++u) {
    for (int d = u + 1; d < devices; ++d) model.hi[c.x(u, d)] = 0;
  }
  model.lo[c.x(0, 0)] = 1;
  auto& rows = model.rows;
  for (int u = 0; u < units; ++u) {
    PlacementRow once{.lo = 1, .hi = 1};
    for (int d = 0; d < devices; ++d) once.terms.emplace_back(c.x(u, d), 1);
    rows.push_back(std::move(once));
  }
  for (int d = 0; d < devices; ++d) {
    PlacementRow used{.lo = 1};
    for (int u = 0; u < units; ++u) used.terms.emplace_back(c.x(u, d), 1);
    rows.push_back(std::move(used));
    for (int u = 1; d > 0 && u < units; ++u) {
      PlacementRow order{.hi = 0};
      order.terms.emplace_back(c.x(u, d), 1);
      for (int v = 0; v < u; ++v) order.terms.emplace_back(c.x(v, d - 1), -1);
      rows.push_back(std::move(order));
    }
    for (int b = 0; b + 1 < units; ++b) {
      rows.push_back({.terms = {{c.w(b, d), 1}, {c.x(b, d), -1}, {c.x(b + 1, d), 1}}, .lo = 0});
      rows.push_back({.terms = {{c.w(b, d), 1}, {c.x(b, d), 1}, {c.x(b + 1, d), -1}}, .lo = 0});
    }
    PlacementRow memory{.hi = 1};
    PlacementRow load{.lo = 0};
    load.terms.emplace_back(c.t(), 1);
    memory.terms.emplace_back(c.m(d), 1);
    for (int u = 0; u < units; ++u) {
      const SegmentCost& s = p.segments[u];
      if (s.peak > 0) {
        rows.push_back(
            {.terms = {{c.m(d), 1}, {c.x(u, d), -static_cast<double>(s.peak) / bytes}}, .lo = 0});
      }
      memory.terms.emplace_back(c.x(u, d), static_cast<double>(held_bytes(p, s)) / bytes);
      if (s.seconds > 0) load.terms.emplace_back(c.x(u, d), -s.seconds / unit);
    }
    for (int b = 0; b + 1 < units; ++b) {
      if (p.boundary_seconds[b] > 0) {
        load.terms.emplace_back(c.w(b, d), -p.boundary_seconds[b] / unit);
      }
    }
    rows.push_back(std::move(memory));
    rows.push_back(std::move(load));
  }
  return model;
}

// The model into CBC as compressed columns (each row names a column once).
void load_placement_model(Cbc_Model* cbc, const PlacementModel& m) {
  std::vector<std::vector<std::pair<int, double>>> by_column(m.cols.count());
  std::vector<double> row_lo, row_hi;
  for (size_t r = 0; r < m.rows.size(); ++r) {
    for (const auto& [col, v] : m.rows[r].terms) {
      by_column[col].emplace_back(static_cast<int>(r), v);
    }
    row_lo.push_back(m.rows[r].lo);
    row_hi.push_back(m.rows[r].hi);
  }
  std::vector<CoinBigIndex> start{0};
  std::vector<int> index;
  std::vector<double> value;
  for (const auto& col : by_column) {
    for (const auto& [row, v] : col) {
      index.push_back(row);
      value.push_back(v);
    }
    start.push_back(static_cast<CoinBigIndex>(index.size()));
  }
  Cbc_loadProblem(cbc, m.cols.count(), static_cast<int>(m.rows.size()), start.data(), index.data(),
                  value.data(), m.lo.data(), m.hi.data(), m.obj.data(), row_lo.data(),
                  row_hi.data());
  for (int u = 0; u < m.cols.units; ++u) {
    for (int d = 0; d < m.cols.devices; ++d) Cbc_setInteger(cbc, m.cols.x(u, d));
  }
  Cbc_setLogLevel(cbc, 0);
  // As checkmate (checkmate.cc): CBC 2.10.8's preprocessing can crash when
  // the time limit stops it; the programme is small without it.
  Cbc_setParameter(cbc, "preprocess", "off");
}

// A placement as the programme's columns (CBC's warm start).
std::vector<double> placement_columns(const PlacementProblem& p, const PlacementModel& m,
                                      const std::vector<int>& device) {
  const PlacementColumns& c = m.cols;
  std::vector<double> x(c.count(), 0);
  const double bytes = static_cast<double>(std::max<uint64_t>(p.budget, 1));
  for (int u = 0; u < c.units; ++u) {
    x[c.x(u, device[u])] = 1;
    const double peak = static_cast<double>(p.segments[u].peak) / bytes;
    x[c.m(device[u])] = std::max(x[c.m(device[u])], peak);
  }
  for (int b = 0; b + 1 < c.units; ++b) {
    if (device[b] == device[b + 1]) continue;
    x[c.w(b, device[b])] = 1;
    x[c.w(b, device[b + 1])] = 1;
  }
  x[c.t()] = std::ranges::max(placement_loads(p, device)) / m.time_unit;
  return x;
}

#endif  // MEMWALL_HAVE_CBC

// Checks a problem's shape; one line for what no placement can satisfy.
void check_placement_problem(const PlacementProblem& p) {
  const int units = static_cast<int>(p.segments.size());
  if (p.devices < 1) fail("pipeline: no devices to place on");
  if (p.in_flight < 1) fail("pipeline: a placement holds at least one micro-batch in flight");
  if (p.boundary_seconds.size() + 1 != p.segments.size()) {
    fail("pipeline: {} boundary times for {} segments: give one fewer than the segments",
         p.boundary_seconds.size(), units);
  }
  if (units < p.devices) {
    fail("pipeline: {} segments cannot fill {} devices: every device needs at least one", units,
         p.devices);
  }
  for (const SegmentCost& s : p.segments) {
    if (!(s.seconds >= 0) || !std::isfinite(s.seconds)) {
      fail("pipeline: a segment's time is negative or not finite");
    }
  }
  for (const double b : p.boundary_seconds) {
    if (!(b >= 0) || !std::isfinite(b)) {
      fail("pipeline: a boundary's time is negative or not finite");
    }
  }
  for (int u = 0; u < units; ++u) {
    const SegmentCost& s = p.segments[u];
    const uint64_t alone = saturating_add(held_bytes(p, s), s.peak);
    if (alone > p.budget) {
      fail(
          "pipeline: segment {} alone needs {} bytes with {} micro-batches in flight, over the "
          "budget of {} bytes a device",
          u, alone, p.in_flight, p.budget);
    }
  }
}

}  // namespace

std::vector<double> placement_loads(const PlacementProblem& p, const std::vector<int>& device) {
  std::vector<double> loads(p.devices, 0);
  for (size_t u = 0; u < device.size(); ++u) loads[device[u]] += p.segments[u].seconds;
  for (size_t b = 0; b + 1 < device.size(); ++b) {
    if (device[b] == device[b + 1]) continue;
    loads[device[b]] += p.boundary_seconds[b];
    loads[device[b + 1]] += p.boundary_seconds[b];
  }
  return loads;
}

bool placement_fits(const PlacementProblem& p, const std::vector<int>& device) {
  std::vector<uint64_t> held(p.devices, 0);
  std::vector<uint64_t> peak(p.devices, 0);
  for (size_t u = 0; u < device.size(); ++u) {
    held[device[u]] = saturating_add(held[device[u]], held_bytes(p, p.segments[u]));
    peak[device[u]] = std::max(peak[device[u]], p.segments[u].peak);
  }
  for (int d = 0; d < p.devices; ++d) {
    if (saturating_add(held[d], peak[d]) > p.budget) return false;
  }
  return true;
}

PlacementResult solve_placement_ip(const PlacementProblem& p, Deadline deadline) {
  check_placement_problem(p);
#ifndef MEMWALL_HAVE_CBC
  // Note [Builds without CBC] in src/remat/cbc_process.cc.
  (void)deadline;
  fail(
      "pipeline placement: this memwall was built without CBC, the solver of the integer "
      "programme (apt install coinor-libcbc-dev, then build again)");
#else
  const int units = static_cast<int>(p.segments.size());
  PlacementResult result;
  const Contiguous contiguous = best_contiguous(p);
  result.contiguous_load = contiguous.load;
  result.contiguous_device = contiguous.device;
  const PlacementModel model = build_placement_model(p);
  Cbc_Model* cbc = Cbc_newModel();
  struct Deleter {
    Cbc_Model* m;
    ~Deleter() { Cbc_deleteModel(m); }
  } deleter{cbc};
  load_placement_model(cbc, model);
  if (!contiguous.device.empty()) {
    std::vector<double> start = placement_columns(p, model, contiguous.device);
    std::vector<int> index(start.size());
    std::iota(index.begin(), index.end(), 0);
    Cbc_setMIPStartI(cbc, static_cast<int>(index.size()), index.data(), start.data());
  }
  CbcAnswer answer;
  if (deadline.left() > kPlacementLeastSolve) {
    Cbc_setMaximumSeconds(cbc, kPlacementCbcShare * deadline.left());
    Cbc_setParameter(cbc, "timeMode", "elapsed");
    answer = solve_cbc_in_child(cbc, deadline, "pipeline placement: CBC");
  }
  if (answer.proven_infeasible) {
    fail(
        "pipeline: no placement of the {} segments on {} devices fits {} bytes a device, {} "
        "micro-batch(es) in flight a segment (CBC proved it)",
        units, p.devices, p.budget, p.in_flight);
  }
  if (!answer.x.empty()) {
    result.device.assign(units, 0);
    for (int u = 0; u < units; ++u) {
      for (int d = 0; d < p.devices; ++d) {
        if (answer.x[model.cols.x(u, d)] > 0.5) result.device[u] = d;
      }
    }
    if (!placement_fits(p, result.device)) result.device.clear();  // past CBC's tolerance
  }
  if (result.device.empty() && contiguous.device.empty()) {
    fail(
        "pipeline: CBC found no placement of the {} segments on {} devices within the deadline "
        "({})",
        units, p.devices,
        answer.finished ? "it stopped at its own time limit" : "stopped at the deadline");
  }
  const double trivial =
      std::max(std::accumulate(p.segments.begin(), p.segments.end(), 0.0,
                               [](double sum, const SegmentCost& s) { return sum + s.seconds; }) /
                   p.devices,
               std::ranges::max(p.segments, {}, &SegmentCost::seconds).seconds);
  const bool from_cbc = !result.device.empty();
  if (!from_cbc || std::ranges::max(placement_loads(p, result.device)) > contiguous.load) {
    result.device = contiguous.device;
  }
  result.loads = placement_loads(p, result.device);
  result.max_load = std::ranges::max(result.loads);
  result.timed_out = !answer.finished;
  result.optimal = from_cbc && answer.proven_optimal;
  result.bound = answer.finished ? std::min(answer.bound * model.time_unit, result.max_load)
                                 : std::min(trivial, result.max_load);
  if (result.optimal) result.bound = result.max_load;
  return result;
#endif  // MEMWALL_HAVE_CBC
}

PlacementProblem placement_problem(const ChunkedGraph& chunked, const PipelineShape& shape,
                                   const std::vector<int>& cut_points, uint64_t budget) {
  const int units = static_cast<int>(cut_points.size());
  if (units == 0 || cut_points[0] != 0) fail("pipeline: the cut points must start at 0");
  for (int u = 1; u < units; ++u) {
    if (cut_points[u] <= cut_points[u - 1] || cut_points[u] >= chunked.forward_ops()) {
      fail("pipeline: cut points must ascend within the {} forward positions",
           chunked.forward_ops());
    }
  }
  PlacementProblem p;
  p.devices = shape.devices;
  p.in_flight = placement_in_flight(shape.schedule, shape.devices, shape.micro_batches);
  p.budget = budget;
  const auto position = [&](int u) { return u < units ? cut_points[u] : chunked.forward_ops(); };
  const auto transfer = [&](uint64_t bytes) {
    return bytes > 0 ? shape.in_node.latency + static_cast<double>(bytes) / shape.in_node.bandwidth
                     : 0.0;
  };
  for (int u = 0; u < units; ++u) {
    const ChunkCost c = chunked.cost(position(u), position(u + 1));
    const uint64_t buffers =
        saturating_mul(c.engine_buffers, static_cast<uint64_t>(shape.micro_batches));
    p.segments.push_back(
        {.seconds = c.forward + c.backward,
         .states = saturating_add(
             sharded_states(c, shape.optimizer_shards, shape.expert_optimizer_shards), buffers),
         .saved = c.saved,
         .peak = std::max({c.forward_peak, c.backward_peak, c.optimizer_peak})});
    if (u > 0) {
      const int cut = position(u);
      p.boundary_seconds.push_back(transfer(chunked.forward_crossing(cut)) +
                                   transfer(chunked.backward_crossing(cut)));
    }
  }
  if (shape.devices > 1 && !(shape.in_node.bandwidth > 0)) {
    fail("pipeline: the placement needs a positive in-node bandwidth between devices");
  }
  return p;
}

PlacementResult place_noncontiguous(const ChunkedGraph& chunked, const PipelineShape& shape,
                                    const std::vector<int>& cut_points, uint64_t budget,
                                    Deadline deadline) {
  return solve_placement_ip(placement_problem(chunked, shape, cut_points, budget), deadline);
}

PlacementPlan plan_placement(const Graph& graph, const Hardware& node,
                             const PipelineRequest& request, Deadline deadline) {
  if (request.chunks_per_device != 1) {
    fail(
        "pipeline: the non-contiguous placement chooses how many chunks each device runs: "
        "leave chunks per device at 1");
  }
  if (request.data_parallel != 1) {
    fail(
        "pipeline: the non-contiguous placement plans one pipeline without data-parallel "
        "replicas (their gradient all-reduces are planned per contiguous chunk)");
  }
  if (request.schedule != PipelineSchedule::kOneFOneB &&
      request.schedule != PipelineSchedule::kGPipe) {
    fail(
        "pipeline: a non-contiguous placement runs on the list schedule with 1f1b's or gpipe's "
        "micro-batches in flight, not {}",
        to_string(request.schedule));
  }
  const ChunkedGraph chunked(graph, node, request.recompute, request.engine);
  // The contiguous plan gives the shape (links, budget, counts), checked as
  // every pipeline plan's; its cut is replaced.
  PipelineRequest contiguous = request;
  contiguous.partition = PipelinePartition::kTarnawski;
  contiguous.allow_over_budget = true;
  PlacementPlan out;
  out.plan = plan_pipeline(chunked, node, contiguous);
  PipelinePlan& plan = out.plan;
  // Replicas (context-parallel ranks among them) all-reduce each contiguous
  // chunk's gradients: plan_pipeline's, per chunk of its own cut.
  if (plan.data_parallel * plan.context_parallel > 1) {
    fail(
        "pipeline: the non-contiguous placement plans one pipeline whose gradients no replica "
        "all-reduces (this graph's ranks reduce them per contiguous chunk)");
  }
  const double contiguous_step = plan.sim.step_time;
  out.cut_points = chunked.cut_points(false);
  out.placement = place_noncontiguous(chunked, plan.shape, out.cut_points, plan.budget, deadline);
  // Consecutive segments on one device are one chunk.
  plan.cut.clear();
  for (size_t u = 0; u < out.cut_points.size(); ++u) {
    const int d = out.placement.device[u];
    if (u > 0 && d == out.placement.device[u - 1]) continue;
    plan.cut.push_back(out.cut_points[u]);
    out.chunk_devices.push_back(d);
  }
  plan.chunk_names.clear();
  for (size_t k = 0; k < plan.cut.size(); ++k) {
    plan.chunk_names.push_back(chunk_first_op(chunked, plan.cut, static_cast<int>(k)));
  }
  plan.costs = chunk_costs(chunked, plan.cut);
  PipelineSetup setup = pipeline_setup(plan.shape, plan.costs);
  setup.chunk_devices = out.chunk_devices;
  plan.sim = simulate_pipeline(setup);
  plan.fits = true;
  for (const PipelineDevice& d : plan.sim.devices) {
    plan.fits = plan.fits && d.peak_bytes <= plan.budget;
  }
  // Samples, tokens and MFU go as one over the step time (Note [Throughput]):
  // the contiguous plan's, scaled, with whatever ranks it counted.
  const double speed = contiguous_step / plan.sim.step_time;
  plan.samples_per_s *= speed;
  plan.tokens_per_s *= speed;
  plan.mfu *= speed;
  return out;
}

}  // namespace memwall
