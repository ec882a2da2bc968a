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
//
// Note [Inputs freed after their last forward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The paper holds X_i until B_i ends. Where B_i does not read X_i (a ReLU
// stage's backward reads its output), X_i is dead once F_i has run for
// the last time (under F_all), unless B_{i-1} still reads it: X_i is in
// xbar_{i-1} when F_all(i-1) kept it for B_{i-1}, and is a checkpoint
// otherwise, which opt(., i-1) recomputes if B_{i-1} needs it. With
// frees_inputs, opt carries that as one more state bit, `held` (X_i must
// stay for B_{i-1}), and gives x_i back to the rest of the segment after
// F_all(i) when it may go. memwall's Rotor proposer plans with it
// (src/remat/memwall.cc); on VGG-19 it is what recomputing the first
// block twice needs (the 2-level schedules Checkmate finds there); the
// baseline keeps the paper's model.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "memwall/base/error.h"
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
  std::vector<uint8_t> reads_output;
  // X_i may go after the last F_i unless held (Note [Inputs freed after
  // their last forward]): frees_inputs, and B_i does not read X_i.
  std::vector<uint8_t> may_free;
  uint64_t top = std::numeric_limits<uint64_t>::max();  // the memory there is at all
  std::vector<uint64_t> grads_before;                   // grads of stages < i (prefix sums)
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
    s.may_free.push_back(0);
    s.reads_output.push_back(st.bwd_reads_output);
  }
  return s;
}

// The memory after F_all(i), the last forward of stage i: m, and X_i's
// bytes where it may go (Note [Inputs freed after their last forward]).
uint64_t after_last_forward(const Sizes& s, int i, uint64_t m, bool held) {
  return std::min(m + (s.may_free[i] && !held ? s.x[i] : 0), s.top);
}

void set_frees_inputs(Sizes& s, const Chain& chain, bool frees_inputs) {
  for (size_t i = 0; i < chain.stages.size(); ++i) {
    s.may_free[i] = frees_inputs && !chain.stages[i].bwd_reads_input && s.x[i] > 0;
  }
}

// The recurrence of Note [Rotor's recurrence] over any opt() lookup.
// `choose(cost, what)` sees every option: what = 0 for F_all, j for F_ck
// with the next checkpoint at j.
template <typename Opt, typename Choose>
void options(const Sizes& s, int i, int l, uint64_t m, bool held, Opt&& opt, Choose&& choose) {
  const uint64_t after = after_last_forward(s, i, m, held);
  if (i == l) {
    if (s.din[l] + s.pa[l] <= m && s.pb[l] <= after) choose(s.f[l] + s.b[l], 0);
    return;
  }
  // B_i runs after the grads of stages i+1..l appeared.
  if (s.din[l] + s.pa[i] <= m && s.pb[i] + s.grads(i + 1, l) <= after && s.xbar[i] <= after) {
    const double rest = opt(i + 1, l, after - s.xbar[i], s.reads_output[i] != 0);
    if (rest < kInf) choose(s.f[i] + s.b[i] + rest, 0);
  }
  bool ok = s.recomputable[i] && s.din[l] + s.pn[i] <= m;
  double fsum = s.f[i];
  for (int j = i + 1; j <= l && ok; ++j) {
    const uint64_t left = s.grads(j, l);  // what j..l leaves behind
    if (s.x[j] <= m && left <= m) {
      const double top = opt(j, l, m - s.x[j], false);
      if (top < kInf) {
        const double bottom = opt(i, j - 1, m - left, held);
        if (bottom < kInf) choose(fsum + top + bottom, j);
      }
    }
    ok = s.recomputable[j] && s.din[l] + s.x[j] + s.pn[j] <= m;
    fsum += s.f[j];
  }
}

// Cells (i, l, m, held). `held` changes nothing where X_i may not go
// anyway: the paper's cells stand for both there, and the cells of the
// other state, (i, l, m) with X_i free to go, are apart, few (one row per
// such stage) and out of the paper's way.
class Table {
 public:
  Table(int stages, int slots, const std::vector<uint8_t>& may_free)
      : stages_(stages), slots_(slots), freeing_row_(may_free.size(), -1) {
    int rows = 0;
    for (size_t i = 0; i < may_free.size(); ++i) {
      if (may_free[i]) freeing_row_[i] = rows++;
    }
    paper_cells_ = static_cast<size_t>(stages) * (stages + 1) / 2 * (slots + 1);
    const size_t freeing_cells = static_cast<size_t>(rows) * stages * (slots + 1);
    cost_.assign(paper_cells_ + freeing_cells, kInf);
    what_.assign(cost_.size(), -1);
  }
  size_t at(int i, int l, uint64_t m, bool held) const {
    if (!held && freeing_row_[i] >= 0) {
      return paper_cells_ + (static_cast<size_t>(freeing_row_[i]) * stages_ + l) * (slots_ + 1) + m;
    }
    return (static_cast<size_t>(l) * (l + 1) / 2 + i) * (slots_ + 1) + m;
  }
  double& cost(int i, int l, uint64_t m, bool held) { return cost_[at(i, l, m, held)]; }
  int16_t& what(int i, int l, uint64_t m, bool held) { return what_[at(i, l, m, held)]; }

 private:
  int stages_;
  int slots_;
  std::vector<int> freeing_row_;  // -1: X_i never goes early
  size_t paper_cells_ = 0;
  std::vector<double> cost_;
  std::vector<int16_t> what_;
};

void reconstruct(Table& t, const Sizes& s, int i, int l, uint64_t m, bool held,
                 std::vector<Move>& out) {
  const int what = t.what(i, l, m, held);
  if (i == l) {
    out.push_back({Move::Kind::kForwardAll, i});
    out.push_back({Move::Kind::kBackward, i});
  } else if (what == 0) {
    out.push_back({Move::Kind::kForwardAll, i});
    reconstruct(t, s, i + 1, l, after_last_forward(s, i, m, held) - s.xbar[i],
                s.reads_output[i] != 0, out);
    out.push_back({Move::Kind::kBackward, i});
  } else {
    out.push_back({Move::Kind::kForwardCheck, i});
    for (int k = i + 1; k < what; ++k) out.push_back({Move::Kind::kForwardNone, k});
    reconstruct(t, s, what, l, m - s.x[what], false, out);
    reconstruct(t, s, i, what - 1, m - s.grads(what, l), held, out);
  }
}

}  // namespace

DpResult solve_chain(const Chain& chain, uint64_t memory, int slots, Deadline deadline,
                     bool frees_inputs) {
  const int L = static_cast<int>(chain.stages.size());
  if (L == 0 || slots <= 0 || L > std::numeric_limits<int16_t>::max()) {
    fail("rotor: cannot solve a chain of {} stages with {} slots", L, slots);
  }
  // The paper's discretization: memory in `slots` equal parts, sizes rounded up.
  const uint64_t unit = std::max<uint64_t>(
      1, memory / static_cast<uint64_t>(slots) + (memory % static_cast<uint64_t>(slots) != 0));
  const uint64_t top = std::min<uint64_t>(memory / unit, static_cast<uint64_t>(slots));
  Sizes s = sizes_of(chain, unit);
  set_frees_inputs(s, chain, frees_inputs);
  s.top = top;
  Table t(L, static_cast<int>(top), s.may_free);
  for (int d = 0; d < L; ++d) {
    for (int i = 0; i + d < L; ++i) {
      const int l = i + d;
      // A cell costs O(slots x stages): checking every cell costs nothing.
      if (deadline.passed()) {
        fail("rotor: the time limit ran out in the dynamic program over {} stages and {} slots", L,
             top);
      }
      for (uint64_t m = 0; m <= top; ++m) {
        for (const bool held : {true, false}) {
          if (!held && !s.may_free[i]) break;
          double best = kInf;
          int16_t what = -1;
          options(
              s, i, l, m, held,
              [&](int a, int b, uint64_t mm, bool h) { return t.cost(a, b, mm, h); },
              [&](double c, int w) {
                if (c < best) {
                  best = c;
                  what = static_cast<int16_t>(w);
                }
              });
          t.cost(i, l, m, held) = best;
          t.what(i, l, m, held) = what;
        }
      }
    }
  }
  DpResult result;
  result.slot_bytes = unit;
  // X_0 is the graph's input, part of the baseline: held throughout.
  result.cost = t.cost(0, L - 1, top, true);
  result.feasible = result.cost < kInf;
  if (result.feasible) reconstruct(t, s, 0, L - 1, top, true, result.moves);
  return result;
}

double exhaustive_cost(const Chain& chain, uint64_t memory, bool frees_inputs) {
  Sizes s = sizes_of(chain, 1);
  set_frees_inputs(s, chain, frees_inputs);
  s.top = memory;
  std::function<double(int, int, uint64_t, bool)> opt = [&](int i, int l, uint64_t m, bool held) {
    double best = kInf;
    options(s, i, l, m, held, opt, [&](double c, int) { best = std::min(best, c); });
    return best;
  };
  return opt(0, static_cast<int>(chain.stages.size()) - 1, memory, true);
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
  if (options.rotor_frees_inputs &&
      std::none_of(chain.stages.begin(), chain.stages.end(),
                   [](const rotor::Stage& st) { return !st.bwd_reads_input && st.x > 0; })) {
    // The same DP as the paper's, for a caller that runs that one too.
    fail("rotor: no stage of the chain of {} has an input its backward does not read",
         chain.stages.size());
  }
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
  const rotor::DpResult dp = rotor::solve_chain(chain, budget - chain.baseline, kSlots, deadline,
                                                options.rotor_frees_inputs);
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
