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

#include "cbc_process.h"
#include "checkmate_graph.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "memwall/remat/rotor.h"
#include "planner_common.h"

#ifdef MEMWALL_HAVE_CBC

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

// The graph the MILP is over (checkmate_graph.h): op by op up to
// kMaxOpNodes ops, above that runs of consecutive ops of a forward-only
// program or the stages of Rotor's chain (kept: its schedule is a warm start).
struct ModelGraph {
  MilpGraph g;
  rotor::Chain chain;  // empty unless g.coarse
};

ModelGraph model_graph(const Graph& graph, const Hardware& hardware) {
  ModelGraph m;
  if (graph.ops.size() <= kMaxOpNodes) {
    m.g = op_graph(graph, hardware);
  } else if (!has_backward(graph)) {
    m.g = group_graph(graph, hardware, kMaxGroups);
  } else {
    try {
      m.chain = rotor::linearize(graph, hardware, kMaxStages);
    } catch (const Error& e) {
      fail(
          "checkmate: {} has {} ops, above the MILP's limit of {} op nodes, and cannot be "
          "linearized into stages: {}",
          graph.name, graph.ops.size(), kMaxOpNodes, e.what());
    }
    m.g = chain_graph(m.chain);
  }
  return m;
}

// The MILP's units: the budget is 1e6 units; costs average 1.
struct Scale {
  double unit = 1;          // bytes per unit
  double limit = 0;         // the budget in units, with half a byte of slack
  std::vector<double> mem;  // per value
  double static_mem = 0;
  double cost_unit = 1;  // cost per unit of the objective
};

Scale scale(const MilpGraph& g, uint64_t budget) {
  Scale s;
  s.unit = static_cast<double>(budget) / 1e6;
  // Memory is whole bytes: up to half a byte over the budget is within it,
  // which keeps an exact fit feasible despite rounding in the scaling.
  s.limit = 1e6 + 0.5 / s.unit;
  s.mem.resize(g.bytes.size());
  for (size_t b = 0; b < s.mem.size(); ++b) s.mem[b] = static_cast<double>(g.bytes[b]) / s.unit;
  s.static_mem = static_cast<double>(g.static_bytes) / s.unit;
  const double total_cost = std::accumulate(g.cost.begin(), g.cost.end(), 0.0);
  s.cost_unit = total_cost > 0 ? total_cost / g.n : 1;
  return s;
}

// The MILP of Note [Checkmate's MILP]: columns' bounds, objective and
// integrality, and the rows in the order CBC gets them.
struct Milp {
  std::vector<double> col_lo, col_hi, obj;
  std::vector<uint8_t> integer;
  std::vector<Row> rows;
};

// R's cost and bounds (R[t][t] = 1; a node that may not be recomputed runs
// only in its own stage), U continuous in [0, 2e6] units, the rest binary.
void set_columns(const MilpGraph& g, const Columns& c, const Scale& s, Milp& m) {
  m.col_lo.assign(c.count(), 0);
  m.col_hi.assign(c.count(), 1);
  m.obj.assign(c.count(), 0);
  m.integer.assign(c.count(), 1);
  for (int t = 0; t < g.n; ++t) {
    for (int i = 0; i <= t; ++i) {
      m.obj[c.R(t, i)] = g.cost[i] / s.cost_unit;
      if (i == t) m.col_lo[c.R(t, i)] = 1;
      if (i < t && g.once[i]) m.col_hi[c.R(t, i)] = 0;
    }
    for (int k = 0; k <= t; ++k) {
      m.col_hi[c.U(t, k)] = 2e6;
      m.integer[c.U(t, k)] = 0;
    }
  }
}

// (1b): a node computed in stage t finds each value it reads recomputed or
// kept in that stage.
void add_dependency_rows(const MilpGraph& g, const Columns& c, std::vector<Row>& rows) {
  for (int t = 0; t < g.n; ++t) {
    for (int j = 0; j <= t; ++j) {
      for (const int b : g.in[j]) {
        Row row;
        row.terms = {{c.R(t, j), 1}, {c.R(t, g.producer[b]), -1}, {c.S(t, b), -1}};
        row.hi = 0;
        rows.push_back(std::move(row));
      }
    }
  }
}

// (1c): a value is kept into stage t only if stage t-1 had it.
void add_retention_rows(const MilpGraph& g, const Columns& c, std::vector<Row>& rows) {
  for (size_t b = 0; b < g.bytes.size(); ++b) {
    const int p = g.producer[b];
    const auto bi = static_cast<int>(b);
    for (int t = p + 1; t < g.n; ++t) {
      Row row;
      row.terms = {{c.S(t, bi), 1}, {c.R(t - 1, p), -1}};
      if (t - 1 > p) row.terms.emplace_back(c.S(t - 1, bi), -1);
      row.hi = 0;
      rows.push_back(std::move(row));
    }
  }
}

// The memory recurrence U[t][k] as an equality.
Row memory_row(const MilpGraph& g, const Columns& c, const Scale& s, int t, int k) {
  Row row;
  row.terms.emplace_back(c.U(t, k), 1);
  double out_mem = 0;
  for (const int b : g.out[k]) out_mem += s.mem[b];
  if (out_mem != 0) row.terms.emplace_back(c.R(t, k), -out_mem);
  if (k == 0) {
    for (size_t b = 0; b < g.bytes.size(); ++b) {
      if (g.producer[b] < t && s.mem[b] != 0) {
        row.terms.emplace_back(c.S(t, static_cast<int>(b)), -s.mem[b]);
      }
    }
    row.lo = row.hi = s.static_mem;
  } else {
    row.terms.emplace_back(c.U(t, k - 1), -1);
    for (const int b : g.in[k - 1]) {
      if (s.mem[b] != 0) row.terms.emplace_back(c.FREE(t, b, k - 1), s.mem[b]);
    }
    for (const int b : g.out[k - 1]) {
      if (s.mem[b] != 0) row.terms.emplace_back(c.FREE(t, b, k - 1), s.mem[b]);
    }
    row.lo = row.hi = 0;
  }
  return row;
}

// The budget while node k runs: U[t][k] + W_k R[t][k] <= budget.
Row budget_row(const MilpGraph& g, const Columns& c, const Scale& s, int t, int k) {
  Row cap;
  cap.terms = {{c.U(t, k), 1}};
  const double ws = static_cast<double>(g.workspace[k]) / s.unit;
  if (ws != 0) cap.terms.emplace_back(c.R(t, k), ws);
  cap.hi = s.limit;
  return cap;
}

// FREE[t][b][k]'s linearization: 1 - FREE <= h <= kappa (1 - FREE).
void add_free_rows(const MilpGraph& g, const Columns& c, int t, int b, int k,
                   std::vector<Row>& rows) {
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
}

// Per stage and node: the memory recurrence, the budget, and FREE's rows for
// every value the node creates or reads.
void add_memory_rows(const MilpGraph& g, const Columns& c, const Scale& s, std::vector<Row>& rows) {
  for (int t = 0; t < g.n; ++t) {
    for (int k = 0; k <= t; ++k) {
      rows.push_back(memory_row(g, c, s, t, k));
      rows.push_back(budget_row(g, c, s, t, k));
      for (const int b : g.in[k]) add_free_rows(g, c, t, b, k, rows);
      for (const int b : g.out[k]) add_free_rows(g, c, t, b, k, rows);
    }
  }
}

Milp build_milp(const MilpGraph& g, const Columns& c, const Scale& s) {
  Milp m;
  set_columns(g, c, s, m);
  add_dependency_rows(g, c, m.rows);
  add_retention_rows(g, c, m.rows);
  add_memory_rows(g, c, s, m.rows);
  return m;
}

// The MILP into CBC's model, as compressed columns.
void load_milp(Cbc_Model* model, const Columns& c, const Milp& m) {
  std::vector<std::vector<std::pair<int, double>>> cols(c.count());
  std::vector<double> row_lo, row_hi;
  for (size_t r = 0; r < m.rows.size(); ++r) {
    for (const auto& [col, v] : m.rows[r].terms) cols[col].emplace_back(static_cast<int>(r), v);
    row_lo.push_back(m.rows[r].lo);
    row_hi.push_back(m.rows[r].hi);
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
  Cbc_loadProblem(model, static_cast<int>(c.count()), static_cast<int>(m.rows.size()), start.data(),
                  index.data(), value.data(), m.col_lo.data(), m.col_hi.data(), m.obj.data(),
                  row_lo.data(), row_hi.data());
  for (size_t k = 0; k < c.count(); ++k) {
    if (m.integer[k]) Cbc_setInteger(model, static_cast<int>(k));
  }
  Cbc_setLogLevel(model, 0);
  // CBC 2.10.8 crashes in CglPreProcess::postProcess when the time limit
  // stops it mid-search on these models; the MILP is small enough without.
  Cbc_setParameter(model, "preprocess", "off");
}

// Whether an assignment keeps every node's memory and workspace within the budget.
bool fits_budget(const MilpGraph& g, const Columns& c, const Scale& s,
                 const std::vector<double>& x) {
  for (int t = 0; t < g.n; ++t) {
    for (int k = 0; k <= t; ++k) {
      const double ws = x[c.R(t, k)] > 0.5 ? static_cast<double>(g.workspace[k]) / s.unit : 0;
      if (x[c.U(t, k)] + ws > s.limit) return false;
    }
  }
  return true;
}

using Stages = std::vector<std::vector<uint8_t>>;  // R[t][i]

// Every node computed once, in its own stage.
Stages r_compute_once(int n) {
  Stages r(n, std::vector<uint8_t>(n, 0));
  for (int t = 0; t < n; ++t) r[t][t] = 1;
  return r;
}

// Rotor's schedule on the chain, as stages: stage t of the frontier holds
// the moves up to the first run of node t. Empty when Rotor finds none or
// its moves do not map onto the frontier.
Stages r_from_rotor(const rotor::Chain& chain, int n, uint64_t budget) {
  const rotor::DpResult dp = rotor::solve_chain(chain, budget - chain.baseline, 500);
  if (!dp.feasible) return {};
  const int L = static_cast<int>(chain.stages.size());
  Stages r(n, std::vector<uint8_t>(n, 0));
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
  if (!ordered || !pending.empty()) return {};
  return r;
}

// The caller's plan on the op graph, as stages: stage t of the frontier
// runs the recomputes issued since the previous stage, then node t (op t);
// each stage's nodes run in index order, so the caller's order is
// normalized. Empty when the plan does not map onto the frontier.
Stages r_from_plan(const Plan& warm, int n) {
  Stages r(n, std::vector<uint8_t>(n, 0));
  std::vector<uint8_t> seen(n, 0);
  std::vector<int> pending;
  bool usable = true;
  for (const Step& step : warm.steps) {
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
  if (!usable) return {};
  return r;
}

// Warm starts (the paper has none; CBC then always holds a schedule), the
// first that fits: compute everything once, on a chain Rotor's schedule,
// and on the op graph the caller's plan (options.warm_start) when it has
// one. Empty when none fits.
std::vector<double> warm_start_x(const ModelGraph& m, const Columns& c, const Scale& s,
                                 uint64_t budget, const RematOptions& options) {
  const MilpGraph& g = m.g;
  const auto complete = [&](const Stages& r) {
    std::vector<double> x;
    if (r.empty()) return x;
    x = complete_from_r(g, c, r, s.mem, s.static_mem);
    if (!fits_budget(g, c, s, x)) x.clear();
    return x;
  };
  std::vector<double> x = complete(r_compute_once(g.n));
  if (g.coarse && x.empty()) x = complete(r_from_rotor(m.chain, g.n, budget));
  if (!g.coarse && !g.grouped && x.empty() && options.warm_start != nullptr) {
    x = complete(r_from_plan(*options.warm_start, g.n));
  }
  return x;
}

// What the search ends with: CBC's answer, or its warm start when CBC was
// stopped before it answered.
struct Solution {
  remat_detail::CbcAnswer answer;
  std::vector<double> x;  // empty: no schedule
  double value = 0;
  double bound = 0;
  bool proven = false;
};

Solution solve_milp(Cbc_Model* model, const Columns& c, const Milp& milp, int n,
                    const std::vector<double>& start_x, const RematOptions& options,
                    const Deadline& hard) {
  if (!start_x.empty()) {
    std::vector<int> idx(c.count());
    std::iota(idx.begin(), idx.end(), 0);
    Cbc_setMIPStartI(model, static_cast<int>(idx.size()), idx.data(), start_x.data());
  }
  // Note [Hard deadline] (cbc_process.cc): CBC's process is killed at
  // `hard`, which leaves the end of the limit to build and simulate the
  // plan; CBC's own limit, on what is left, normally ends it first.
  Solution sol;
  if (hard.left() > kLeastSolve) {
    const double own = options.cpu_time_limit > 0 ? std::min(options.cpu_time_limit, hard.left())
                                                  : kCbcShare * hard.left();
    Cbc_setMaximumSeconds(model, own);
    Cbc_setParameter(model, "timeMode", options.cpu_time_limit > 0 ? "cpu" : "elapsed");
    sol.answer = remat_detail::solve_in_child(model, hard);
  }
  sol.x = std::move(sol.answer.x);
  sol.value = sol.answer.objective;
  sol.bound = sol.answer.bound;
  sol.proven = sol.answer.proven_optimal;
  if (!sol.answer.finished && !start_x.empty()) {
    // Stopped before it answered: its warm start, which its incumbent was
    // never worse than, against the cost of computing every node once.
    sol.x = start_x;
    sol.value = 0;
    sol.bound = 0;
    for (size_t k = 0; k < sol.x.size(); ++k) sol.value += milp.obj[k] * sol.x[k];
    for (int t = 0; t < n; ++t) sol.bound += milp.obj[c.R(t, t)];
  }
  return sol;
}

// Why there is no schedule, as the error the caller sees.
[[noreturn]] void fail_without_schedule(const Graph& graph, const ModelGraph& m, uint64_t budget,
                                        const RematOptions& options,
                                        const remat_detail::CbcAnswer& answer) {
  if (answer.proven_infeasible && m.g.coarse) {
    fail(
        "checkmate: no schedule of {} fits a budget of {} bytes in the MILP over its {} ops "
        "merged into a chain of {} stages (infeasible there; the chain's stages hold more than "
        "the ops would)",
        graph.name, budget, graph.ops.size(), m.chain.stages.size());
  }
  if (answer.proven_infeasible && m.g.grouped) {
    fail(
        "checkmate: no schedule of {} fits a budget of {} bytes in the MILP over its {} ops "
        "grouped into {} runs of consecutive ops (infeasible there; a group holds more than its "
        "ops would)",
        graph.name, budget, graph.ops.size(), m.g.n);
  }
  if (answer.proven_infeasible) {
    fail("checkmate: no schedule of {} fits a budget of {} bytes (the MILP is infeasible)",
         graph.name, budget);
  }
  fail("checkmate: CBC found no schedule within the {} s time limit for a budget of {} bytes{}",
       options.time_limit, budget, answer.finished ? "" : " (stopped at the limit)");
}

// The ops in the order the solution runs them: each stage's computed nodes
// in index order, then the tail. Counts the node recomputations.
std::vector<OpId> op_sequence(const MilpGraph& g, const Columns& c, const std::vector<double>& x,
                              int* recomputed) {
  std::vector<OpId> sequence;
  *recomputed = 0;
  for (int t = 0; t < g.n; ++t) {
    for (int i = 0; i <= t; ++i) {
      if (x[c.R(t, i)] > 0.5) {
        sequence.insert(sequence.end(), g.ops[i].begin(), g.ops[i].end());
        *recomputed += i < t;
      }
    }
  }
  sequence.insert(sequence.end(), g.tail.begin(), g.tail.end());
  return sequence;
}

double optimality_gap(const Solution& sol) {
  return sol.proven ? 0
                    : std::max(0.0, (sol.value - sol.bound) / std::max(std::abs(sol.value), 1e-12));
}

// The result's note: the MILP's size, the recomputations, how the search ended.
std::string solution_note(const MilpGraph& g, const Columns& c, int recomputed, const Solution& sol,
                          double gap) {
  const int n = g.n;
  return fmt::format("{} {} nodes, {} binaries, {} node recomputations, {}", n,
                     g.coarse ? "stage" : (g.grouped ? "op-group" : "op"),
                     c.count() - static_cast<size_t>(n) * (n + 1) / 2, recomputed,
                     sol.proven            ? std::string("proven optimal")
                     : sol.answer.finished ? fmt::format("gap {:.3g}% at the time limit", 100 * gap)
                                           : fmt::format("CBC stopped at the time limit before it "
                                                         "answered: the warm start, gap {:.3g}%",
                                                         100 * gap));
}

}  // namespace

RematResult plan_checkmate(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options) {
  remat_detail::Stopwatch clock;
  const Deadline hard = remat_detail::work_deadline(options);
  const ModelGraph m = model_graph(graph, hardware);
  const MilpGraph& g = m.g;
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
  const Columns c(g);
  const Scale s = scale(g, budget);
  const Milp milp = build_milp(g, c, s);

  Cbc_Model* model = Cbc_newModel();
  struct Deleter {
    Cbc_Model* m;
    ~Deleter() { Cbc_deleteModel(m); }
  } deleter{model};
  load_milp(model, c, milp);
  const std::vector<double> start_x = warm_start_x(m, c, s, budget, options);
  const Solution sol = solve_milp(model, c, milp, g.n, start_x, options, hard);
  if (sol.x.empty()) fail_without_schedule(graph, m, budget, options, sol.answer);

  int recomputed = 0;
  const std::vector<OpId> sequence = op_sequence(g, c, sol.x, &recomputed);
  Plan plan = rotor::plan_from_sequence(graph, sequence, hardware.name, budget);
  const double gap = optimality_gap(sol);
  RematResult result = remat_detail::finish(graph, hardware, budget, std::move(plan), "checkmate",
                                            solution_note(g, c, recomputed, sol, gap), clock);
  result.proven_optimal = sol.proven;
  result.gap = gap;
  return result;
}

}  // namespace memwall

#else  // Note [Builds without CBC] in cbc_process.cc

namespace memwall {

RematResult plan_checkmate(const Graph&, const Hardware&, uint64_t, const RematOptions&) {
  fail(
      "checkmate: this memwall was built without CBC, the MILP solver it needs (apt install "
      "coinor-libcbc-dev, then build again)");
}

}  // namespace memwall

#endif  // MEMWALL_HAVE_CBC
