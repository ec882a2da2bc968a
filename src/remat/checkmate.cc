// Checkmate (remat.h): Jain, Jain, Zheng, Jordan, Abbeel, Keutzer, Stoica,
// Gonzalez, "Checkmate: Breaking the Memory Wall with Optimal Tensor
// Rematerialization", MLSys 2020, section 4; docs/remat-checkmate.md.
//
// Note [Checkmate's MILP]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Nodes 0..n-1 in topological order; stage t computes node t (frontier
// advancing, section 4.3), so only i <= t has variables:
//   R[t][i]      node i is computed in stage t (R[t][t] = 1);
//   S[t][b]      value b is kept from stage t-1 into stage t (producer < t);
//   FREE[t][b][k] b is freed after node k in stage t (k its producer or user);
//   U[t][k]      bytes in use after node k in stage t (continuous).
// min sum_t sum_i C_i R[t][i] subject to
//   R[t][j] <= R[t][p] + S[t][b]         for b read by j, created by p (1b)
//   S[t][b] <= R[t-1][p] + S[t-1][b]                                  (1c)
//   U[t][0] = M_static + sum_b M_b S[t][b] + M_out(0) R[t][0]
//   U[t][k] = U[t][k-1] - sum_{b of k-1} M_b FREE[t][b][k-1] + M_out(k) R[t][k]
//   U[t][k] + W_k R[t][k] <= budget
//   FREE[t][b][k] = R[t][k] (1 - S[t+1][b]) prod_{j user, k<j<=t} (1 - R[t][j]),
// linearized with h = (1 - R[t][k]) + S[t+1][b] + sum_j R[t][j] as
//   1 - FREE <= h <= kappa (1 - FREE).
// Values are per buffer (an op may create several) rather than one per
// node, and W_k (workspace) is the deviation that keeps the simulator's
// accounting: an op's workspace is held while it runs.
//
// Forward-only programs above kMaxOpNodes ops are grouped into runs of
// consecutive ops (Note [Forward-only groups] in checkmate_groups.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "Cbc_C_Interface.h"
#include "cbc_process.h"
#include "checkmate_graph.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "memwall/remat/rotor.h"
#include "planner_common.h"

namespace memwall {
namespace {

using remat_detail::chain_graph;
using remat_detail::group_graph;
using remat_detail::MilpGraph;
using remat_detail::op_graph;

// Graphs up to this many ops are solved op by op; larger ones on the Rotor
// chain, merged down to kMaxStages stages (2 nodes each): the MILP has
// O(n^2) binaries and CBC stops being useful within seconds beyond ~100.
constexpr size_t kMaxOpNodes = 100;
constexpr size_t kMaxStages = 24;
// Forward-only programs above kMaxOpNodes: as many nodes as the stage chain.
constexpr int kMaxGroups = 2 * static_cast<int>(kMaxStages);

// Note [Hard deadline] (cbc_process.cc): CBC gets kCbcShare of the wall time
// left for its own limit, and its process is killed at the work deadline
// (planner_common.h). Below kLeastSolve seconds left CBC is not started.
constexpr double kCbcShare = 0.75;
constexpr double kLeastSolve = 0.02;

// Column indices of the MILP.
class Columns {
 public:
  explicit Columns(const MilpGraph& g) : g_(g), n_(g.n) {
    const size_t tri = static_cast<size_t>(n_) * (n_ + 1) / 2;
    r0_ = 0;
    u0_ = tri;
    s0_ = 2 * tri;
    size_t next = s0_;
    s_base_.resize(g.bytes.size());
    for (size_t b = 0; b < g.bytes.size(); ++b) {
      s_base_[b] = next;  // stages producer+1 .. n-1
      next += static_cast<size_t>(n_ - 1 - g.producer[b]);
    }
    free_base_.resize(g.bytes.size());
    for (size_t b = 0; b < g.bytes.size(); ++b) {
      // Candidates: the producer, then the users; stages k .. n-1.
      free_base_[b].push_back(next);
      next += static_cast<size_t>(n_ - g.producer[b]);
      for (const int k : g.users[b]) {
        free_base_[b].push_back(next);
        next += static_cast<size_t>(n_ - k);
      }
    }
    count_ = next;
  }
  size_t count() const { return count_; }
  int R(int t, int i) const { return static_cast<int>(r0_ + tri(t) + i); }
  int U(int t, int k) const { return static_cast<int>(u0_ + tri(t) + k); }
  int S(int t, int b) const { return static_cast<int>(s_base_[b] + (t - g_.producer[b] - 1)); }
  // FREE for value b after node k (its producer or a user) in stage t >= k.
  int FREE(int t, int b, int k) const {
    if (k == g_.producer[b]) return static_cast<int>(free_base_[b][0] + (t - k));
    const auto& u = g_.users[b];
    const size_t at = static_cast<size_t>(std::lower_bound(u.begin(), u.end(), k) - u.begin());
    return static_cast<int>(free_base_[b][at + 1] + (t - k));
  }

 private:
  static size_t tri(int t) { return static_cast<size_t>(t) * (t + 1) / 2; }
  const MilpGraph& g_;
  int n_;
  size_t r0_ = 0, u0_ = 0, s0_ = 0, count_ = 0;
  std::vector<size_t> s_base_;
  std::vector<std::vector<size_t>> free_base_;
};

struct Row {
  std::vector<std::pair<int, double>> terms;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
};

// The hazards of freeing b after k in stage t, as terms: h = const + terms.
void hazard_terms(const MilpGraph& g, const Columns& c, int t, int b, int k, Row& row,
                  double sign) {
  row.terms.emplace_back(c.R(t, k), -sign);  // (1 - R[t][k])
  if (t + 1 < g.n) row.terms.emplace_back(c.S(t + 1, b), sign);
  for (const int j : g.users[b]) {
    if (j > k && j <= t) row.terms.emplace_back(c.R(t, j), sign);
  }
}

int kappa(const MilpGraph& g, int t, int b, int k) {
  int count = 1 + (t + 1 < g.n);
  for (const int j : g.users[b]) count += j > k && j <= t;
  return count;
}

// A full assignment from R alone: the least retention S that R needs, the
// FREE it implies and the memory U (Note [Checkmate's MILP]). Empty when it
// does not fit is for the caller to check.
std::vector<double> complete_from_r(const MilpGraph& g, const Columns& c,
                                    const std::vector<std::vector<uint8_t>>& r,
                                    const std::vector<double>& mem, double static_mem) {
  const int n = g.n;
  std::vector<double> x(c.count(), 0);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i <= t; ++i) x[c.R(t, i)] = r[t][i];
  }
  std::vector<std::vector<uint8_t>> s(g.bytes.size(), std::vector<uint8_t>(n + 1, 0));
  for (size_t b = 0; b < g.bytes.size(); ++b) {
    const int p = g.producer[b];
    for (int t = n - 1; t > p; --t) {
      bool need = false;
      if (!r[t][p]) {
        for (const int j : g.users[b]) need |= j <= t && r[t][j];
        need |= s[b][t + 1] != 0;
      }
      s[b][t] = need;
      x[c.S(t, static_cast<int>(b))] = need;
    }
  }
  for (int t = 0; t < n; ++t) {
    double u = static_mem;
    for (size_t b = 0; b < g.bytes.size(); ++b) {
      if (g.producer[b] < t && s[b][t]) u += mem[b];
    }
    for (int k = 0; k <= t; ++k) {
      if (k > 0) {
        const auto freed = [&](int b) {
          bool later = false;
          for (const int j : g.users[b]) later |= j > k - 1 && j <= t && r[t][j];
          const bool f = r[t][k - 1] && !s[b][t + 1] && !later;
          x[c.FREE(t, b, k - 1)] = f;
          if (f) u -= mem[b];
        };
        for (const int b : g.in[k - 1]) freed(b);
        for (const int b : g.out[k - 1]) freed(b);
      }
      if (r[t][k]) {
        for (const int b : g.out[k]) u += mem[b];
      }
      x[c.U(t, k)] = std::max(0.0, u);
    }
    // The last node's frees: no user runs after it in the stage.
    const auto freed_last = [&](int b) { x[c.FREE(t, b, t)] = r[t][t] && !s[b][t + 1]; };
    for (const int b : g.in[t]) freed_last(b);
    for (const int b : g.out[t]) freed_last(b);
  }
  return x;
}

}  // namespace

RematResult plan_checkmate(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options) {
  remat_detail::Stopwatch clock;
  const Deadline hard = remat_detail::work_deadline(options);
  MilpGraph g;
  rotor::Chain chain;
  if (graph.ops.size() <= kMaxOpNodes) {
    g = op_graph(graph, hardware);
  } else if (!has_backward(graph)) {
    g = group_graph(graph, hardware, kMaxGroups);
  } else {
    try {
      chain = rotor::linearize(graph, hardware, kMaxStages);
    } catch (const Error& e) {
      fail(
          "checkmate: {} has {} ops, above the MILP's limit of {} op nodes, and cannot be "
          "linearized into stages: {}",
          graph.name, graph.ops.size(), kMaxOpNodes, e.what());
    }
    g = chain_graph(chain);
  }
  // After the model is built: a graph Checkmate cannot model is refused at
  // any budget.
  if (auto fits = remat_detail::keep_all_if_it_fits(graph, hardware, budget, "checkmate", clock)) {
    return *std::move(fits);
  }
  if (budget <= g.static_bytes) {
    fail(
        "checkmate: budget {} bytes does not hold the {} bytes resident throughout (params, "
        "optimizer states, inputs{})",
        budget, g.static_bytes, g.coarse ? ", grads" : "");
  }
  const int n = g.n;
  const Columns c(g);

  // Scale: the budget is 1e6 units; costs average 1.
  const double unit = static_cast<double>(budget) / 1e6;
  // Memory is whole bytes: up to half a byte over the budget is within it,
  // which keeps an exact fit feasible despite rounding in the scaling.
  const double limit = 1e6 + 0.5 / unit;
  std::vector<double> mem(g.bytes.size());
  for (size_t b = 0; b < mem.size(); ++b) mem[b] = static_cast<double>(g.bytes[b]) / unit;
  const double static_mem = static_cast<double>(g.static_bytes) / unit;
  const double total_cost = std::accumulate(g.cost.begin(), g.cost.end(), 0.0);
  const double cost_unit = total_cost > 0 ? total_cost / n : 1;

  std::vector<double> col_lo(c.count(), 0), col_hi(c.count(), 1), obj(c.count(), 0);
  std::vector<uint8_t> integer(c.count(), 1);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i <= t; ++i) {
      obj[c.R(t, i)] = g.cost[i] / cost_unit;
      if (i == t) col_lo[c.R(t, i)] = 1;
      if (i < t && g.once[i]) col_hi[c.R(t, i)] = 0;
    }
    for (int k = 0; k <= t; ++k) {
      col_hi[c.U(t, k)] = 2e6;
      integer[c.U(t, k)] = 0;
    }
  }
  std::vector<Row> rows;
  for (int t = 0; t < n; ++t) {
    // (1b) dependencies.
    for (int j = 0; j <= t; ++j) {
      for (const int b : g.in[j]) {
        Row row;
        row.terms = {{c.R(t, j), 1}, {c.R(t, g.producer[b]), -1}, {c.S(t, b), -1}};
        row.hi = 0;
        rows.push_back(std::move(row));
      }
    }
  }
  for (size_t b = 0; b < g.bytes.size(); ++b) {
    // (1c) retention only of what the previous stage had.
    const int p = g.producer[b];
    const auto bi = static_cast<int>(b);
    for (int t = p + 1; t < n; ++t) {
      Row row;
      row.terms = {{c.S(t, bi), 1}, {c.R(t - 1, p), -1}};
      if (t - 1 > p) row.terms.emplace_back(c.S(t - 1, bi), -1);
      row.hi = 0;
      rows.push_back(std::move(row));
    }
  }
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k <= t; ++k) {
      Row row;  // memory recurrence, as an equality
      row.terms.emplace_back(c.U(t, k), 1);
      double out_mem = 0;
      for (const int b : g.out[k]) out_mem += mem[b];
      if (out_mem != 0) row.terms.emplace_back(c.R(t, k), -out_mem);
      if (k == 0) {
        for (size_t b = 0; b < g.bytes.size(); ++b) {
          if (g.producer[b] < t && mem[b] != 0) {
            row.terms.emplace_back(c.S(t, static_cast<int>(b)), -mem[b]);
          }
        }
        row.lo = row.hi = static_mem;
      } else {
        row.terms.emplace_back(c.U(t, k - 1), -1);
        for (const int b : g.in[k - 1]) {
          if (mem[b] != 0) row.terms.emplace_back(c.FREE(t, b, k - 1), mem[b]);
        }
        for (const int b : g.out[k - 1]) {
          if (mem[b] != 0) row.terms.emplace_back(c.FREE(t, b, k - 1), mem[b]);
        }
        row.lo = row.hi = 0;
      }
      rows.push_back(std::move(row));
      Row cap;  // the budget while node k runs
      cap.terms = {{c.U(t, k), 1}};
      const double ws = static_cast<double>(g.workspace[k]) / unit;
      if (ws != 0) cap.terms.emplace_back(c.R(t, k), ws);
      cap.hi = limit;
      rows.push_back(std::move(cap));
      // FREE linearization for every value node k creates or reads.
      const auto free_rows = [&](int b) {
        Row lower;  // 1 - FREE <= h
        lower.terms.emplace_back(c.FREE(t, b, k), -1);
        hazard_terms(g, c, t, b, k, lower, -1);  // -FREE + R - S - sum R <= 0
        lower.hi = 0;
        rows.push_back(std::move(lower));
        Row upper;  // h <= kappa (1 - FREE)
        const int kap = kappa(g, t, b, k);
        upper.terms.emplace_back(c.FREE(t, b, k), static_cast<double>(kap));
        hazard_terms(g, c, t, b, k, upper, 1);
        upper.hi = kap - 1;  // h's constant 1 moved right
        rows.push_back(std::move(upper));
      };
      for (const int b : g.in[k]) free_rows(b);
      for (const int b : g.out[k]) free_rows(b);
    }
  }

  // Compressed columns for CBC.
  std::vector<std::vector<std::pair<int, double>>> cols(c.count());
  std::vector<double> row_lo, row_hi;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [col, v] : rows[r].terms) cols[col].emplace_back(static_cast<int>(r), v);
    row_lo.push_back(rows[r].lo);
    row_hi.push_back(rows[r].hi);
  }
  std::vector<CoinBigIndex> start{0};
  std::vector<int> index;
  std::vector<double> value;
  for (auto& col : cols) {
    std::sort(col.begin(), col.end());
    // Merge duplicates (a term can appear twice when indices coincide).
    for (size_t k = 0; k < col.size(); ++k) {
      if (!index.empty() && static_cast<CoinBigIndex>(index.size()) > start.back() &&
          index.back() == col[k].first) {
        value.back() += col[k].second;
      } else {
        index.push_back(col[k].first);
        value.push_back(col[k].second);
      }
    }
    start.push_back(static_cast<CoinBigIndex>(index.size()));
  }
  for (double& v : row_lo) v = std::isinf(v) ? -std::numeric_limits<double>::max() : v;
  for (double& v : row_hi) v = std::isinf(v) ? std::numeric_limits<double>::max() : v;

  Cbc_Model* model = Cbc_newModel();
  struct Deleter {
    Cbc_Model* m;
    ~Deleter() { Cbc_deleteModel(m); }
  } deleter{model};
  Cbc_loadProblem(model, static_cast<int>(c.count()), static_cast<int>(rows.size()), start.data(),
                  index.data(), value.data(), col_lo.data(), col_hi.data(), obj.data(),
                  row_lo.data(), row_hi.data());
  for (size_t k = 0; k < c.count(); ++k) {
    if (integer[k]) Cbc_setInteger(model, static_cast<int>(k));
  }
  Cbc_setLogLevel(model, 0);
  // CBC 2.10.8 crashes in CglPreProcess::postProcess when the time limit
  // stops it mid-search on these models; the MILP is small enough without.
  Cbc_setParameter(model, "preprocess", "off");

  // Warm starts (the paper has none; CBC then always holds a schedule):
  // compute everything once, on a chain Rotor's schedule, and on the op
  // graph the caller's plan (options.warm_start) when it has one.
  const auto fits = [&](const std::vector<double>& x) {
    for (int t = 0; t < n; ++t) {
      for (int k = 0; k <= t; ++k) {
        const double ws = x[c.R(t, k)] > 0.5 ? static_cast<double>(g.workspace[k]) / unit : 0;
        if (x[c.U(t, k)] + ws > limit) return false;
      }
    }
    return true;
  };
  std::vector<double> start_x;
  {
    std::vector<std::vector<uint8_t>> r(n, std::vector<uint8_t>(n, 0));
    for (int t = 0; t < n; ++t) r[t][t] = 1;
    std::vector<double> x = complete_from_r(g, c, r, mem, static_mem);
    if (fits(x)) start_x = std::move(x);
  }
  if (g.coarse && start_x.empty()) {
    const rotor::DpResult dp = rotor::solve_chain(chain, budget - chain.baseline, 500);
    if (dp.feasible) {
      // Stage t of the frontier: the moves up to the first run of node t.
      const int L = static_cast<int>(chain.stages.size());
      std::vector<std::vector<uint8_t>> r(n, std::vector<uint8_t>(n, 0));
      std::vector<uint8_t> seen(n, 0);
      std::vector<int> pending;
      bool ordered = true;
      for (const rotor::Move& m : dp.moves) {
        const int node = m.kind == rotor::Move::Kind::kBackward ? 2 * L - 1 - m.stage : m.stage;
        if (seen[node]) {
          pending.push_back(node);
          continue;
        }
        seen[node] = 1;
        // A stage runs its nodes in index order, each once.
        for (size_t k = 0; k < pending.size(); ++k) {
          ordered &= pending[k] < node && (k == 0 || pending[k - 1] < pending[k]);
          r[node][pending[k]] = 1;
        }
        pending.clear();
        r[node][node] = 1;
      }
      if (ordered && pending.empty()) {
        std::vector<double> x = complete_from_r(g, c, r, mem, static_mem);
        if (fits(x)) start_x = std::move(x);
      }
    }
  }
  if (!g.coarse && !g.grouped && start_x.empty() && options.warm_start != nullptr) {
    // Stage t of the frontier runs the recomputes issued since the previous
    // stage, then node t (op t); each stage's nodes run in index order, so
    // the caller's order is normalized and the result checked.
    std::vector<std::vector<uint8_t>> r(n, std::vector<uint8_t>(n, 0));
    std::vector<uint8_t> seen(n, 0);
    std::vector<int> pending;
    bool usable = true;
    for (const Step& step : options.warm_start->steps) {
      if (step.kind != StepKind::kCompute && step.kind != StepKind::kRecompute) continue;
      if (step.op < 0 || step.op >= n || step.on != Tier::kDevice) {
        usable = false;
        break;
      }
      if (seen[step.op]) {
        pending.push_back(step.op);
        continue;
      }
      seen[step.op] = 1;
      for (const int k : pending) usable &= k < step.op;
      for (const int k : pending) r[step.op][k] = 1;
      pending.clear();
      r[step.op][step.op] = 1;
    }
    usable &= pending.empty() && std::all_of(seen.begin(), seen.end(), [](uint8_t v) { return v; });
    if (usable) {
      std::vector<double> x = complete_from_r(g, c, r, mem, static_mem);
      if (fits(x)) start_x = std::move(x);
    }
  }
  if (!start_x.empty()) {
    std::vector<int> idx(c.count());
    std::iota(idx.begin(), idx.end(), 0);
    Cbc_setMIPStartI(model, static_cast<int>(idx.size()), idx.data(), start_x.data());
  }
  // Note [Hard deadline] (cbc_process.cc): CBC's process is killed at
  // `hard`, which leaves the end of the limit to build and simulate the
  // plan; CBC's own limit, on what is left, normally ends it first.
  remat_detail::CbcAnswer answer;
  if (hard.left() > kLeastSolve) {
    const double own = options.cpu_time_limit > 0 ? std::min(options.cpu_time_limit, hard.left())
                                                  : kCbcShare * hard.left();
    Cbc_setMaximumSeconds(model, own);
    Cbc_setParameter(model, "timeMode", options.cpu_time_limit > 0 ? "cpu" : "elapsed");
    answer = remat_detail::solve_in_child(model, hard);
  }
  std::vector<double> x = std::move(answer.x);
  double value_found = answer.objective;
  double bound = answer.bound;
  bool proven = answer.proven_optimal;
  if (!answer.finished && !start_x.empty()) {
    // Stopped before it answered: its warm start, which its incumbent was
    // never worse than, against the cost of computing every node once.
    x = start_x;
    value_found = 0;
    bound = 0;
    for (size_t k = 0; k < x.size(); ++k) value_found += obj[k] * x[k];
    for (int t = 0; t < n; ++t) bound += obj[c.R(t, t)];
  }
  if (x.empty()) {
    if (answer.proven_infeasible && g.coarse) {
      fail(
          "checkmate: no schedule of {} fits a budget of {} bytes in the MILP over its {} ops "
          "merged into a chain of {} stages (infeasible there; the chain's stages hold more than "
          "the ops would)",
          graph.name, budget, graph.ops.size(), chain.stages.size());
    }
    if (answer.proven_infeasible && g.grouped) {
      fail(
          "checkmate: no schedule of {} fits a budget of {} bytes in the MILP over its {} ops "
          "grouped into {} runs of consecutive ops (infeasible there; a group holds more than its "
          "ops would)",
          graph.name, budget, graph.ops.size(), g.n);
    }
    if (answer.proven_infeasible) {
      fail("checkmate: no schedule of {} fits a budget of {} bytes (the MILP is infeasible)",
           graph.name, budget);
    }
    fail("checkmate: CBC found no schedule within the {} s time limit for a budget of {} bytes{}",
         options.time_limit, budget, answer.finished ? "" : " (stopped at the limit)");
  }
  std::vector<OpId> sequence;
  int recomputed = 0;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i <= t; ++i) {
      if (x[c.R(t, i)] > 0.5) {
        sequence.insert(sequence.end(), g.ops[i].begin(), g.ops[i].end());
        recomputed += i < t;
      }
    }
  }
  sequence.insert(sequence.end(), g.tail.begin(), g.tail.end());
  Plan plan = rotor::plan_from_sequence(graph, sequence, hardware.name, budget);
  const double gap =
      proven ? 0 : std::max(0.0, (value_found - bound) / std::max(std::abs(value_found), 1e-12));
  RematResult result = remat_detail::finish(
      graph, hardware, budget, std::move(plan), "checkmate",
      fmt::format("{} {} nodes, {} binaries, {} node recomputations, {}", n,
                  g.coarse ? "stage" : (g.grouped ? "op-group" : "op"),
                  c.count() - static_cast<size_t>(n) * (n + 1) / 2, recomputed,
                  proven            ? std::string("proven optimal")
                  : answer.finished ? fmt::format("gap {:.3g}% at the time limit", 100 * gap)
                                    : fmt::format("CBC stopped at the time limit before it "
                                                  "answered: the warm start, gap {:.3g}%",
                                                  100 * gap)),
      clock);
  result.proven_optimal = proven;
  result.gap = gap;
  return result;
}

}  // namespace memwall
