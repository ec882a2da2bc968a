// Rotor (rotor.h, remat.h): optimal checkpointing of the linearized chain by
// dynamic programming, after Beaumont, Eyraud-Dubois, Herrmann, Joly and
// Shilova, "Optimal checkpointing for heterogeneous chains: how to train deep
// neural networks with limited memory" (2019), section 4; docs/remat-rotor.md.
//
// Note [Rotor's recurrence]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// opt(i, l, m): least compute time to run stages i..l forward and backward,
// given X_i held outside m and m bytes for everything else, the gradient
// entering B_l included. Either
//   - F_all(i) keeps xbar_i, the rest runs in m - xbar_i, then B_i:
//       f_i + opt(i+1, l, m - xbar_i) + b_i  (B_i with G_{i+1..l} resident);
//   - F_ck(i) keeps X_i, F_none(i+1..j-1) advance without keeping anything,
//     the segment j..l runs with X_j held, then i..j-1 with the gradient of
//     j in hand and the param grads G_{j..l} of j..l resident:
//       sum f_i..f_{j-1} + opt(j, l, m - x_j) + opt(i, j-1, m - G_{j..l});
// and opt(i, i, m) = f_i + b_i when F_all and B fit. Each move's fit uses
// the stage's measured peaks (rotor_chain.cc). A stage that updates a buffer
// in place runs forward once, so it is never swept by F_none/F_ck.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "memwall/remat/rotor.h"
#include "planner_common.h"

namespace memwall::rotor {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The chain's sizes in some unit (slots for the DP, bytes when exact).
struct Sizes {
  std::vector<uint64_t> x, xbar, din, pn, pa, pb;
  std::vector<double> f, b;
  std::vector<uint8_t> recomputable;
  std::vector<uint64_t> grads_before;  // grads of stages < i (prefix sums)
  // Grads the backwards of stages lo..hi create.
  uint64_t grads(int lo, int hi) const { return grads_before[hi + 1] - grads_before[lo]; }
};

Sizes sizes_of(const Chain& chain, uint64_t unit) {
  const auto up = [unit](uint64_t bytes) { return bytes / unit + (bytes % unit != 0); };
  Sizes s;
  s.grads_before.push_back(0);
  for (const Stage& st : chain.stages) {
    s.grads_before.push_back(s.grads_before.back() + up(st.grads));
    s.x.push_back(up(st.x));
    s.xbar.push_back(up(st.xbar));
    s.din.push_back(up(st.delta_in));
    s.pn.push_back(up(st.peak_fwd_none));
    s.pa.push_back(up(st.peak_fwd_all));
    s.pb.push_back(up(st.peak_bwd));
    s.f.push_back(st.fwd_time);
    s.b.push_back(st.bwd_time);
    s.recomputable.push_back(st.recomputable);
  }
  return s;
}

// The recurrence of Note [Rotor's recurrence] over any opt() lookup.
// `choose(cost, what)` sees every option: what = 0 for F_all, j for F_ck
// with the next checkpoint at j.
template <typename Opt, typename Choose>
void options(const Sizes& s, int i, int l, uint64_t m, Opt&& opt, Choose&& choose) {
  if (i == l) {
    if (s.din[l] + s.pa[l] <= m && s.pb[l] <= m) choose(s.f[l] + s.b[l], 0);
    return;
  }
  // B_i runs after the grads of stages i+1..l appeared.
  if (s.din[l] + s.pa[i] <= m && s.pb[i] + s.grads(i + 1, l) <= m && s.xbar[i] <= m) {
    const double rest = opt(i + 1, l, m - s.xbar[i]);
    if (rest < kInf) choose(s.f[i] + s.b[i] + rest, 0);
  }
  bool ok = s.recomputable[i] && s.din[l] + s.pn[i] <= m;
  double fsum = s.f[i];
  for (int j = i + 1; j <= l && ok; ++j) {
    const uint64_t left = s.grads(j, l);  // what j..l leaves behind
    if (s.x[j] <= m && left <= m) {
      const double top = opt(j, l, m - s.x[j]);
      if (top < kInf) {
        const double bottom = opt(i, j - 1, m - left);
        if (bottom < kInf) choose(fsum + top + bottom, j);
      }
    }
    ok = s.recomputable[j] && s.din[l] + s.x[j] + s.pn[j] <= m;
    fsum += s.f[j];
  }
}

class Table {
 public:
  Table(int stages, int slots)
      : slots_(slots),
        cost_(static_cast<size_t>(stages) * (stages + 1) / 2 * (slots + 1), kInf),
        what_(cost_.size(), -1) {}
  size_t at(int i, int l, uint64_t m) const {
    return (static_cast<size_t>(l) * (l + 1) / 2 + i) * (slots_ + 1) + m;
  }
  double& cost(int i, int l, uint64_t m) { return cost_[at(i, l, m)]; }
  int16_t& what(int i, int l, uint64_t m) { return what_[at(i, l, m)]; }

 private:
  int slots_;
  std::vector<double> cost_;
  std::vector<int16_t> what_;
};

void reconstruct(Table& t, const Sizes& s, int i, int l, uint64_t m, std::vector<Move>& out) {
  const int what = t.what(i, l, m);
  if (i == l) {
    out.push_back({Move::Kind::kForwardAll, i});
    out.push_back({Move::Kind::kBackward, i});
  } else if (what == 0) {
    out.push_back({Move::Kind::kForwardAll, i});
    reconstruct(t, s, i + 1, l, m - s.xbar[i], out);
    out.push_back({Move::Kind::kBackward, i});
  } else {
    out.push_back({Move::Kind::kForwardCheck, i});
    for (int k = i + 1; k < what; ++k) out.push_back({Move::Kind::kForwardNone, k});
    reconstruct(t, s, what, l, m - s.x[what], out);
    reconstruct(t, s, i, what - 1, m - s.grads(what, l), out);
  }
}

}  // namespace

DpResult solve_chain(const Chain& chain, uint64_t memory, int slots, Deadline deadline) {
  const int L = static_cast<int>(chain.stages.size());
  if (L == 0 || slots <= 0 || L > std::numeric_limits<int16_t>::max()) {
    fail("rotor: cannot solve a chain of {} stages with {} slots", L, slots);
  }
  // The paper's discretization: memory in `slots` equal parts, sizes rounded up.
  const uint64_t unit = std::max<uint64_t>(
      1, memory / static_cast<uint64_t>(slots) + (memory % static_cast<uint64_t>(slots) != 0));
  const uint64_t top = std::min<uint64_t>(memory / unit, static_cast<uint64_t>(slots));
  const Sizes s = sizes_of(chain, unit);
  Table t(L, static_cast<int>(top));
  for (int d = 0; d < L; ++d) {
    for (int i = 0; i + d < L; ++i) {
      const int l = i + d;
      // A cell costs O(slots x stages): checking every cell costs nothing.
      if (deadline.passed()) {
        fail("rotor: the time limit ran out in the dynamic program over {} stages and {} slots", L,
             top);
      }
      for (uint64_t m = 0; m <= top; ++m) {
        double best = kInf;
        int16_t what = -1;
        options(
            s, i, l, m, [&](int a, int b, uint64_t mm) { return t.cost(a, b, mm); },
            [&](double c, int w) {
              if (c < best) {
                best = c;
                what = static_cast<int16_t>(w);
              }
            });
        t.cost(i, l, m) = best;
        t.what(i, l, m) = what;
      }
    }
  }
  DpResult result;
  result.slot_bytes = unit;
  result.cost = t.cost(0, L - 1, top);
  result.feasible = result.cost < kInf;
  if (result.feasible) reconstruct(t, s, 0, L - 1, top, result.moves);
  return result;
}

double exhaustive_cost(const Chain& chain, uint64_t memory) {
  const Sizes s = sizes_of(chain, 1);
  std::function<double(int, int, uint64_t)> opt = [&](int i, int l, uint64_t m) {
    double best = kInf;
    options(s, i, l, m, opt, [&](double c, int) { best = std::min(best, c); });
    return best;
  };
  return opt(0, static_cast<int>(chain.stages.size()) - 1, memory);
}

}  // namespace memwall::rotor

namespace memwall {

RematResult plan_rotor(const Graph& graph, const Hardware& hardware, uint64_t budget,
                       const RematOptions& options) {
  // At most options.rotor_stages stages (neighbours merged, balanced by
  // time) and the paper's 500 memory slots: the table is stages^2/2 x 501
  // entries and the DP stages^3/6 x 501 steps.
  constexpr int kSlots = 500;
  remat_detail::Stopwatch clock;
  const Deadline deadline = remat_detail::work_deadline(options);
  if (options.rotor_stages < 1) fail("rotor: the chain needs at least one stage");
  if (!has_backward(graph)) {
    fail(
        "rotor: {} has no backward ops: Rotor's dynamic program needs a chain of forward stages "
        "each with its backward, so it cannot plan a forward-only program (dtr, checkmate and "
        "memwall can)",
        graph.name);
  }
  const rotor::Chain chain = rotor::linearize(graph, hardware, options.rotor_stages);
  if (auto fits = remat_detail::keep_all_if_it_fits(graph, hardware, budget, "rotor", clock)) {
    return *std::move(fits);
  }
  uint64_t least = 0;  // every stage runs F_all then B with its input held
  for (const rotor::Stage& st : chain.stages) {
    least = std::max(least, st.x + std::max(st.peak_fwd_all, st.peak_bwd));
  }
  if (budget <= chain.baseline) {
    fail(
        "rotor: budget {} bytes does not hold the baseline (params, optimizer states, inputs) "
        "of {} bytes; its chain needs at least {} bytes",
        budget, chain.baseline, chain.baseline + least);
  }
  const rotor::DpResult dp = rotor::solve_chain(chain, budget - chain.baseline, kSlots, deadline);
  if (!dp.feasible) {
    // The DP's slots round every size up, so it can miss budgets a little
    // above what the chain needs at least (a lower bound, not a minimum).
    if (budget < chain.baseline + least) {
      fail(
          "rotor: budget {} bytes is below what the chain of {} stages can reach: it needs at "
          "least {} bytes (baseline {} + the largest stage run with its input, {})",
          budget, chain.stages.size(), chain.baseline + least, chain.baseline, least);
    }
    fail(
        "rotor: no schedule of the chain of {} stages fits {} bytes in its model of {} memory "
        "slots (every size rounded up to a slot of {} bytes); it needs at least {} bytes",
        chain.stages.size(), budget, kSlots, dp.slot_bytes, chain.baseline + least);
  }
  int recomputed = 0;
  for (const rotor::Move& m : dp.moves) recomputed += m.kind != rotor::Move::Kind::kBackward;
  recomputed -= static_cast<int>(chain.stages.size());
  Plan plan =
      rotor::plan_from_sequence(graph, rotor::expand_moves(chain, dp.moves), hardware.name, budget);
  RematResult result = remat_detail::finish(
      graph, hardware, budget, std::move(plan), "rotor",
      fmt::format("{} stages, {} slots, {} stage forwards recomputed, modelled compute {:.6g} s",
                  chain.stages.size(), kSlots, recomputed, dp.cost),
      clock);
  result.proven_optimal = true;  // optimal in its own (slotted chain) model
  return result;
}

}  // namespace memwall
