// Linearization of a training graph into Rotor's chain, and the plan of an
// explicit op sequence (rotor.h).
//
// Note [Linearization]
// ~~~~~~~~~~~~~~~~~~~~
// The graph must be its forward ops, then its backward ops, then the rest
// (optimizer). Params, optimizer states, inputs and grads are the baseline:
// resident whatever the schedule, left out of every count. A cut after
// forward op c splits the forward into lower (<= c) and upper ops; the
// backward splits at p(c), the last backward op reading a buffer an upper
// forward op created (p is non-increasing in c). X_c, the buffers created at
// or below c that an upper op (forward, or backward up to p(c)) reads, is an
// interval property: buffer b created by forward op a is in X_c for c in
// [a, e(b)], so one sweep gives, per cut, min over X_c of the creating op and
// its bytes; likewise the gradients Delta crossing backward position P.
// Cuts are taken greedily: c follows the previous cut c' when X_c was
// created after c' (no skip connection past a stage) and the gradients
// entering stage c' were created in the stage just above (none skip a
// stage either). Any subset of valid cuts is valid, so merging neighbouring
// stages (down to a maximum count) keeps the chain conditions.
//
// Note [Minimal liveness]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Given the order in which ops run (recomputations included), a buffer must
// stay on the device exactly while it is read again before its producer runs
// again; any schedule that is correct keeps at least that. So after every op
// the plan frees each buffer the op touched whose next read is after the next
// run of its producer (or never comes). A planner's memory model is then an
// upper bound of what the simulator sees, whatever it assumed about frees.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <queue>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"
#include "memwall/remat/rotor.h"

namespace memwall::rotor {
namespace {

bool in_baseline(BufferKind kind) {
  return exists_before_first_op(kind) || kind == BufferKind::kGrad;
}

// Distinct buffers an op reads or updates.
template <typename F>
void for_each_use(const Op& op, F&& f) {
  for (size_t i = 0; i < op.in.size(); ++i) {
    bool seen = false;
    for (size_t k = 0; k < i; ++k) seen |= op.in[k] == op.in[i];
    if (!seen) f(op.in[i]);
  }
  for (const BufferId b : op.updates) {
    bool seen = false;
    for (const BufferId a : op.in) seen |= a == b;
    if (!seen) f(b);
  }
}

// Per-buffer facts the linearization needs (chain buffers only).
struct BufferFacts {
  OpId producer = kNoOp;
  OpId last_fwd_reader = kNoOp;  // forward op index
  int first_bwd = -1;            // backward positions (op id - nf)
  int last_bwd = -1;
};

// Peak bytes of counted buffers while `ops` run in order, starting with
// `initial` bytes of the `counted_input` buffers resident. Buffers the run
// creates count too; a counted buffer goes after its last read in the run
// unless kept. Chain buffers only (the baseline is not counted).
uint64_t stage_peak(const Graph& graph, std::span<const OpId> ops, uint64_t initial,
                    const std::vector<uint8_t>& chain_buf, const std::vector<uint8_t>& keep,
                    const std::vector<uint8_t>& counted_input) {
  constexpr size_t kNever = SIZE_MAX;
  std::vector<size_t> last_read(graph.buffers.size(), kNever);
  for (size_t i = 0; i < ops.size(); ++i) {
    for_each_use(graph.ops[ops[i]], [&](BufferId b) { last_read[b] = i; });
  }
  // 0: not counted, 1: counted and resident, 2: released.
  std::vector<uint8_t> state(graph.buffers.size(), 0);
  for (size_t b = 0; b < state.size(); ++b) state[b] = counted_input[b] ? 1 : 0;
  uint64_t cur = initial;
  uint64_t peak = initial;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = graph.ops[ops[i]];
    uint64_t out = 0;
    for (const BufferId b : op.out) {
      if (chain_buf[b] && state[b] == 0) {
        out += graph.buffers[b].bytes;
        state[b] = 1;
      }
    }
    peak = std::max(peak, cur + out + contiguous_workspace(op));
    cur += out;
    const auto release = [&](BufferId b) {
      if (state[b] != 1 || keep[b]) return;
      if (last_read[b] != kNever && last_read[b] > i) return;
      cur -= graph.buffers[b].bytes;
      state[b] = 2;
    };
    for (const BufferId b : op.out) release(b);
    for_each_use(op, release);
  }
  return peak;
}

// The graph as linearize sees it: forward ops [0, nf), backward ops [nf,
// bend) (positions op id - nf, nb of them), then the tail; which buffers
// the chain counts (not the baseline), their facts, and p(c).
struct Linearization {
  const Graph& graph;
  OpId n = 0, nf = 0, bend = 0;
  int nb = 0;
  std::vector<uint8_t> chain_buf;
  std::vector<BufferFacts> facts;
  std::vector<int> pcut;  // p(c) for c in [0, nf-1); pcut[nf-1]: the top, nothing above
};

// The forward, then backward, then other ops; fails for any other order.
Linearization split_phases(const Graph& graph) {
  Linearization l{.graph = graph};
  const OpId n = l.n = static_cast<OpId>(graph.ops.size());
  OpId nf = 0;
  while (nf < n && graph.ops[nf].phase == Phase::kForward) ++nf;
  OpId bend = nf;
  while (bend < n && graph.ops[bend].phase == Phase::kBackward) ++bend;
  if (nf == 0 || bend == nf) {
    fail("graph '{}' is not a training iteration of forward then backward ops", graph.name);
  }
  for (OpId i = bend; i < n; ++i) {
    if (graph.ops[i].phase == Phase::kForward || graph.ops[i].phase == Phase::kBackward) {
      fail("{} comes after the backward's end (op {}): the chain needs forward, then backward ops",
           detail::op_label(graph, i), bend);
    }
  }
  l.nf = nf;
  l.bend = bend;
  l.nb = bend - nf;
  return l;
}

// Chain buffers (not the baseline) and the baseline's bytes.
void mark_chain_buffers(Linearization& l, Chain& chain) {
  l.chain_buf.assign(l.graph.buffers.size(), 0);
  for (const Buffer& b : l.graph.buffers) {
    l.chain_buf[b.id] = !in_baseline(b.kind);
    if (exists_before_first_op(b.kind)) chain.baseline += b.bytes;
  }
}

// Each chain buffer's producer and readers; fails when an op after the
// backward reads one the stages create.
void collect_facts(Linearization& l) {
  const Graph& graph = l.graph;
  l.facts.assign(graph.buffers.size(), BufferFacts{});
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.out) l.facts[b].producer = op.id;
  }
  for (const Op& op : graph.ops) {
    for_each_use(op, [&](BufferId b) {
      if (!l.chain_buf[b]) return;
      BufferFacts& f = l.facts[b];
      if (op.id < l.nf) {
        f.last_fwd_reader = op.id;
      } else if (op.id < l.bend) {
        const int pos = op.id - l.nf;
        if (f.first_bwd < 0) f.first_bwd = pos;
        f.last_bwd = pos;
      } else if (f.producer < l.bend) {
        fail(
            "{} reads {}, which the chain's stages create: only the baseline may cross into the "
            "ops after the backward",
            detail::op_label(graph, op.id), detail::buffer_label(graph, b));
      }
    });
  }
}

// p(c) for c in [0, nf-1): the last backward position reading an upper buffer.
void backward_cuts(Linearization& l) {
  const OpId nf = l.nf;
  std::vector<int> best_at(nf, -1);
  for (size_t b = 0; b < l.graph.buffers.size(); ++b) {
    const BufferFacts& f = l.facts[b];
    if (l.chain_buf[b] && f.producer != kNoOp && f.producer < nf) {
      best_at[f.producer] = std::max(best_at[f.producer], f.last_bwd);
    }
  }
  l.pcut.assign(nf, -1);
  for (OpId c = nf - 2; c >= 0; --c) l.pcut[c] = std::max(l.pcut[c + 1], best_at[c + 1]);
}

// Per forward cut c, X_c's earliest creator and bytes; per backward
// boundary P, Delta's (Note [Linearization]).
struct Crossings {
  int nb = 0;
  std::vector<int> x_min, d_min;
  std::vector<uint64_t> x_bytes, d_bytes;
  // Delta at boundary P (between positions P and P+1); P = -1 or nb-1: none.
  int d_min_at(int p) const { return p < 0 || p >= nb - 1 ? INT32_MAX : d_min[p]; }
  uint64_t d_bytes_at(int p) const { return p < 0 || p >= nb - 1 ? uint64_t{0} : d_bytes[p]; }
};

// Min-heap on the creator over intervals starting at each index; ended
// intervals are dropped when on top.
void sweep_min_creator(const std::vector<std::vector<std::pair<int, int>>>& starts,
                       std::vector<int>& min_creator) {
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> live;
  for (size_t c = 0; c < starts.size(); ++c) {
    for (const auto& [e, a] : starts[c]) live.emplace(a, e);
    while (!live.empty() && live.top().second < static_cast<int>(c)) live.pop();
    min_creator[c] = live.empty() ? INT32_MAX : live.top().first;
  }
}

// The last cut c >= a where pcut[c] >= first_bwd (pcut is non-increasing), or -1.
int last_cut_reaching(const std::vector<int>& pcut, int a, int hi, int first_bwd) {
  int lo = a, found = -1;
  while (lo <= hi) {
    const int mid = (lo + hi) / 2;
    if (pcut[mid] >= first_bwd) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}

// X_c intervals and Delta intervals, swept for min creator and bytes.
Crossings crossings(const Linearization& l) {
  const OpId nf = l.nf;
  const int nb = l.nb;
  std::vector<std::vector<std::pair<int, int>>> x_start(nf);  // at a: (e, a)
  std::vector<int64_t> x_bytes_diff(nf + 1, 0);
  std::vector<std::vector<std::pair<int, int>>> d_start(nb + 1);
  std::vector<int64_t> d_bytes_diff(nb + 2, 0);
  for (size_t b = 0; b < l.graph.buffers.size(); ++b) {
    const BufferFacts& f = l.facts[b];
    if (!l.chain_buf[b] || f.producer == kNoOp) continue;
    const auto bytes = static_cast<int64_t>(l.graph.buffers[b].bytes);
    if (f.producer < nf) {
      const int a = f.producer;
      int e = f.last_fwd_reader - 1;
      if (f.first_bwd >= 0) e = std::max(e, last_cut_reaching(l.pcut, a, nf - 2, f.first_bwd));
      e = std::min(e, static_cast<int>(nf) - 2);
      if (e >= a) {
        x_start[a].emplace_back(e, a);
        x_bytes_diff[a] += bytes;
        x_bytes_diff[e + 1] -= bytes;
      }
    } else if (f.producer < l.bend && f.last_bwd > f.producer - nf) {
      const int u = f.producer - nf;
      const int v = f.last_bwd;  // crosses boundaries P in [u, v-1]
      d_start[u].emplace_back(v - 1, u);
      d_bytes_diff[u] += bytes;
      d_bytes_diff[v] -= bytes;
    }
  }
  Crossings x;
  x.nb = nb;
  x.x_min.assign(nf, INT32_MAX);
  x.d_min.assign(nb + 1, INT32_MAX);
  sweep_min_creator(x_start, x.x_min);
  sweep_min_creator(d_start, x.d_min);
  x.x_bytes.assign(nf, 0);
  x.d_bytes.assign(nb + 1, 0);
  for (int64_t c = 0, acc = 0; c < nf; ++c)
    x.x_bytes[c] = static_cast<uint64_t>(acc += x_bytes_diff[c]);
  for (int64_t p = 0, acc = 0; p <= nb; ++p)
    x.d_bytes[p] = static_cast<uint64_t>(acc += d_bytes_diff[p]);
  return x;
}

// The cuts taken greedily (Note [Linearization]): no X_c created before the
// previous cut, no gradient skipping a stage.
std::vector<int> valid_cuts(const Linearization& l, const Crossings& x) {
  std::vector<int> cuts;
  int prev_c = -1;
  int prev_p = l.nb - 1;
  for (int c = 0; c + 1 < l.nf; ++c) {
    if (x.x_min[c] <= prev_c) continue;
    if (x.d_min_at(prev_p) <= l.pcut[c]) continue;
    cuts.push_back(c);
    prev_c = c;
    prev_p = l.pcut[c];
  }
  return cuts;
}

// Stage s's forward ops [0]..[1] and backward positions [2]..[3].
std::array<int, 4> stage_bounds(const Linearization& l, const std::vector<int>& cs, size_t s) {
  const int lo_c = s == 0 ? -1 : cs[s - 1];
  const int hi_c = s == cs.size() ? l.nf - 1 : cs[s];
  const int bwd_hi = s == 0 ? l.nb - 1 : l.pcut[cs[s - 1]];
  const int bwd_lo = s == cs.size() ? -1 : l.pcut[cs[s]];
  return std::array<int, 4>{lo_c + 1, hi_c, bwd_lo + 1, bwd_hi};
}

// Neighbouring stages merged down to max_stages, balanced by time.
std::vector<int> merge_cuts(const Linearization& l, const std::vector<int>& cuts,
                            const std::vector<double>& time, size_t max_stages) {
  double total = 0;
  std::vector<double> stime(cuts.size() + 1);
  for (size_t s = 0; s <= cuts.size(); ++s) {
    const auto r = stage_bounds(l, cuts, s);
    for (int i = r[0]; i <= r[1]; ++i) stime[s] += time[i];
    for (int p = r[2]; p <= r[3]; ++p) stime[s] += time[l.nf + p];
    total += stime[s];
  }
  const double target = total / static_cast<double>(max_stages);
  std::vector<int> kept;
  double acc = 0;
  for (size_t s = 0; s < cuts.size(); ++s) {
    acc += stime[s];
    const size_t left = cuts.size() - s;  // cuts still to decide, this one included
    if ((acc >= target && kept.size() + 1 < max_stages) || left + kept.size() < max_stages) {
      if (kept.size() + 1 < max_stages) {
        kept.push_back(cuts[s]);
        acc = 0;
      }
    }
  }
  return kept;
}

// The stages' ops, times, X and incoming gradients, and the tail. Returns
// the stage whose forward creates each buffer (-1: none).
std::vector<int> build_stages(const Linearization& l, const Crossings& x,
                              const std::vector<int>& cuts, const std::vector<double>& time,
                              Chain& chain) {
  const Graph& graph = l.graph;
  const size_t num_stages = cuts.size() + 1;
  chain.stages.resize(num_stages);
  std::vector<int> stage_of(graph.buffers.size(), -1);  // forward-created chain buffers
  for (size_t s = 0; s < num_stages; ++s) {
    Stage& st = chain.stages[s];
    const auto r = stage_bounds(l, cuts, s);
    for (int i = r[0]; i <= r[1]; ++i) {
      st.fwd.push_back(i);
      st.fwd_time += time[i];
      for (const BufferId b : graph.ops[i].out) stage_of[b] = static_cast<int>(s);
    }
    for (int p = r[2]; p <= r[3]; ++p) {
      st.bwd.push_back(l.nf + p);
      st.bwd_time += time[l.nf + p];
    }
    st.x = s == 0 ? 0 : x.x_bytes[cuts[s - 1]];
    st.delta_in = s + 1 == num_stages ? 0 : x.d_bytes_at(l.pcut[cuts[s]]);
  }
  for (OpId i = l.bend; i < l.n; ++i) chain.tail.push_back(i);
  return stage_of;
}

// Who reads each stage's buffers: its own backward, or a later stage
// (then the buffer is an output, in X_{s+1}).
struct StageReads {
  std::vector<int> bwd_stage;            // per op: the stage of a backward op, else -1
  std::vector<uint8_t> read_by_own_bwd;  // per buffer
  std::vector<uint8_t> is_output;        // per buffer: in X_{s+1}
};

// Which buffers each stage's backward reads, and in-place constraints
// (stage flags recomputable, bwd_reads_input, bwd_reads_output).
StageReads mark_stage_reads(const Linearization& l, const std::vector<int>& stage_of,
                            Chain& chain) {
  const Graph& graph = l.graph;
  const OpId nf = l.nf;
  const size_t num_stages = chain.stages.size();
  StageReads reads;
  reads.bwd_stage.assign(l.n, -1);
  for (size_t s = 0; s < num_stages; ++s) {
    for (const OpId i : chain.stages[s].bwd) reads.bwd_stage[i] = static_cast<int>(s);
  }
  reads.read_by_own_bwd.assign(graph.buffers.size(), 0);
  reads.is_output.assign(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    for_each_use(op, [&](BufferId b) {
      if (!l.chain_buf[b] || stage_of[b] < 0) return;
      const int s = stage_of[b];
      const int reader = op.id < nf ? -2 : reads.bwd_stage[op.id];
      if (op.id < nf) {
        // A forward reader in a later stage makes b an output.
        if (op.id > chain.stages[s].fwd.back()) reads.is_output[b] = 1;
      } else if (reader == s) {
        reads.read_by_own_bwd[b] = 1;
      } else if (reader > s) {
        reads.is_output[b] = 1;
        chain.stages[reader].bwd_reads_input = true;
      }
    });
    if (op.id < nf && !recomputable(graph, op)) {
      for (size_t s = 0; s < num_stages; ++s) {
        const Stage& st = chain.stages[s];
        if (op.id >= st.fwd.front() && op.id <= st.fwd.back()) chain.stages[s].recomputable = false;
      }
    }
    for (const BufferId b : op.updates) {
      if (stage_of[b] >= 0) chain.stages[stage_of[b]].recomputable = false;
    }
  }
  for (size_t s = 0; s + 1 < num_stages; ++s) {
    for (const OpId i : chain.stages[s].bwd) {
      for_each_use(graph.ops[i], [&](BufferId b) {
        if (stage_of[b] == static_cast<int>(s) && reads.is_output[b]) {
          chain.stages[s].bwd_reads_output = true;
        }
      });
    }
  }
  return reads;
}

// Per-buffer flags stage_peak reads, reused from stage to stage (all zero
// between stages but for counted_bwd).
struct PeakScratch {
  std::vector<uint8_t> keep, no_inputs, bwd_inputs;
  std::vector<uint8_t> counted_bwd;  // chain buffers and the grads backward creates
};

// F_none's and F_all's peaks and xbar of stage s, whose forward creates
// `mine`; marks what its backward reads of xbar as the backward's inputs and
// returns their bytes.
uint64_t forward_peaks(const Linearization& l, const StageReads& reads,
                       const std::vector<BufferId>& mine, Stage& st, PeakScratch& scratch) {
  const Graph& graph = l.graph;
  std::vector<uint8_t>& keep = scratch.keep;
  for (const BufferId b : mine) keep[b] = reads.is_output[b];
  st.peak_fwd_none = stage_peak(graph, st.fwd, 0, l.chain_buf, keep, scratch.no_inputs);
  uint64_t read_bytes = 0;
  for (const BufferId b : mine) {
    keep[b] = reads.is_output[b] || reads.read_by_own_bwd[b];
    if (keep[b]) st.xbar += graph.buffers[b].bytes;
    if (reads.read_by_own_bwd[b]) {
      read_bytes += graph.buffers[b].bytes;
      scratch.bwd_inputs[b] = 1;
    }
  }
  st.peak_fwd_all = stage_peak(graph, st.fwd, 0, l.chain_buf, keep, scratch.no_inputs);
  for (const BufferId b : mine) keep[b] = 0;
  return read_bytes;
}

// B_s's peak and the param grads it creates. The backward starts from what
// it reads of xbar (read_bytes) and the incoming gradients; it keeps the
// gradients it passes down (read later).
void backward_peak(const Linearization& l, const StageReads& reads, size_t s, uint64_t read_bytes,
                   Chain& chain, PeakScratch& scratch) {
  const Graph& graph = l.graph;
  const OpId nf = l.nf;
  const size_t num_stages = chain.stages.size();
  Stage& st = chain.stages[s];
  // The stage above's gradients this backward reads last.
  const auto read_last_here = [&](BufferId b) {
    return l.chain_buf[b] && l.facts[b].last_bwd >= 0 &&
           reads.bwd_stage[nf + l.facts[b].last_bwd] == static_cast<int>(s);
  };
  std::vector<uint8_t> keep_out(graph.buffers.size(), 0);
  for (const OpId i : st.bwd) {
    for (const BufferId b : graph.ops[i].out) {
      if (graph.buffers[b].kind == BufferKind::kGrad) {
        // Param grads stay to the optimizer: counted from here on.
        keep_out[b] = 1;
        st.grads += graph.buffers[b].bytes;
      }
      if (l.chain_buf[b] && l.facts[b].last_bwd > i - nf &&
          reads.bwd_stage[nf + l.facts[b].last_bwd] != static_cast<int>(s))
        keep_out[b] = 1;
    }
  }
  if (s + 1 < num_stages) {
    for (const OpId i : chain.stages[s + 1].bwd) {
      for (const BufferId b : graph.ops[i].out) {
        if (read_last_here(b)) scratch.bwd_inputs[b] = 1;
      }
    }
  }
  st.peak_bwd = stage_peak(graph, st.bwd, read_bytes + st.delta_in, scratch.counted_bwd, keep_out,
                           scratch.bwd_inputs);
}

// Sizes and peaks, simulating each stage alone (X_i not counted).
void stage_sizes_and_peaks(const Linearization& l, const StageReads& reads, Chain& chain) {
  const Graph& graph = l.graph;
  const size_t nbuf = graph.buffers.size();
  PeakScratch scratch{.keep = std::vector<uint8_t>(nbuf, 0),
                      .no_inputs = std::vector<uint8_t>(nbuf, 0),
                      .bwd_inputs = std::vector<uint8_t>(nbuf, 0),
                      .counted_bwd = l.chain_buf};
  for (const Buffer& b : graph.buffers) scratch.counted_bwd[b.id] |= b.kind == BufferKind::kGrad;
  for (size_t s = 0; s < chain.stages.size(); ++s) {
    std::vector<BufferId> mine;
    for (const OpId i : chain.stages[s].fwd) {
      for (const BufferId b : graph.ops[i].out) {
        if (l.chain_buf[b]) mine.push_back(b);
      }
    }
    const uint64_t read_bytes = forward_peaks(l, reads, mine, chain.stages[s], scratch);
    backward_peak(l, reads, s, read_bytes, chain, scratch);
    for (const BufferId b : mine) scratch.bwd_inputs[b] = 0;
    if (s + 1 < chain.stages.size()) {
      for (const OpId i : chain.stages[s + 1].bwd) {
        for (const BufferId b : graph.ops[i].out) scratch.bwd_inputs[b] = 0;
      }
    }
  }
}

}  // namespace

Chain linearize(const Graph& graph, const Hardware& hardware, size_t max_stages) {
  Linearization l = split_phases(graph);
  Chain chain;
  mark_chain_buffers(l, chain);
  collect_facts(l);
  backward_cuts(l);
  const Crossings x = crossings(l);
  std::vector<int> cuts = valid_cuts(l, x);
  // Per-op times for balancing and stage times.
  std::vector<double> time(l.n);
  for (OpId i = 0; i < l.n; ++i) time[i] = op_time(hardware, graph, graph.ops[i]);
  if (max_stages > 0 && cuts.size() + 1 > max_stages) cuts = merge_cuts(l, cuts, time, max_stages);
  const std::vector<int> stage_of = build_stages(l, x, cuts, time, chain);
  const StageReads reads = mark_stage_reads(l, stage_of, chain);
  stage_sizes_and_peaks(l, reads, chain);
  return chain;
}

std::vector<OpId> expand_moves(const Chain& chain, std::span<const Move> moves) {
  std::vector<OpId> seq;
  for (const Move& m : moves) {
    const Stage& st = chain.stages[m.stage];
    const auto& ops = m.kind == Move::Kind::kBackward ? st.bwd : st.fwd;
    seq.insert(seq.end(), ops.begin(), ops.end());
  }
  seq.insert(seq.end(), chain.tail.begin(), chain.tail.end());
  return seq;
}

Plan plan_from_sequence(const Graph& graph, std::span<const OpId> sequence, std::string hardware,
                        uint64_t budget) {
  const size_t nbuf = graph.buffers.size();
  // Positions where each buffer is read and where its producer runs (CSR).
  std::vector<std::vector<uint32_t>> reads(nbuf), made(nbuf);
  std::vector<uint32_t> runs(graph.ops.size(), 0);
  for (size_t q = 0; q < sequence.size(); ++q) {
    const OpId id = sequence[q];
    if (id < 0 || id >= static_cast<OpId>(graph.ops.size()))
      fail("sequence: op {} out of range", id);
    const Op& op = graph.ops[id];
    if (++runs[id] > 1 && !recomputable(graph, op)) {
      fail("sequence runs {} twice, but it updates a buffer in place", detail::op_label(graph, id));
    }
    for_each_use(op, [&](BufferId b) { reads[b].push_back(static_cast<uint32_t>(q)); });
    for (const BufferId b : op.out) made[b].push_back(static_cast<uint32_t>(q));
  }
  for (const Op& op : graph.ops) {
    if (runs[op.id] == 0) fail("sequence never runs {}", detail::op_label(graph, op.id));
  }
  std::vector<uint8_t> resident(nbuf, 0);
  std::vector<size_t> next_read(nbuf, 0), next_made(nbuf, 0);  // cursors
  for (const Buffer& b : graph.buffers) resident[b.id] = exists_before_first_op(b.kind);
  std::vector<uint8_t> computed(graph.ops.size(), 0);
  Plan plan;
  plan.graph = graph.name;
  plan.hardware = std::move(hardware);
  plan.budget = budget;
  plan.steps.reserve(sequence.size() * 2);
  const auto settle = [&](BufferId b, uint32_t q) {
    // Advance cursors past q, then decide (Note [Minimal liveness]).
    while (next_read[b] < reads[b].size() && reads[b][next_read[b]] <= q) ++next_read[b];
    while (next_made[b] < made[b].size() && made[b][next_made[b]] <= q) ++next_made[b];
    if (!resident[b] || is_persistent(graph.buffers[b].kind)) return;
    const bool read_again = next_read[b] < reads[b].size();
    const bool remade_first = next_made[b] < made[b].size() &&
                              (!read_again || made[b][next_made[b]] < reads[b][next_read[b]]);
    if (!read_again || remade_first) {
      plan.steps.push_back(Step::free(b));
      resident[b] = 0;
    }
  };
  for (size_t q = 0; q < sequence.size(); ++q) {
    const OpId id = sequence[q];
    const Op& op = graph.ops[id];
    for_each_use(op, [&](BufferId b) {
      if (!resident[b]) {
        fail("sequence: {} at position {} reads {}, which is not on the device",
             detail::op_label(graph, id), q, detail::buffer_label(graph, b));
      }
    });
    plan.steps.push_back(computed[id] ? Step::recompute(id) : Step::compute(id));
    computed[id] = 1;
    for (const BufferId b : op.out) resident[b] = 1;
    const auto qq = static_cast<uint32_t>(q);
    for_each_use(op, [&](BufferId b) { settle(b, qq); });
    for (const BufferId b : op.out) settle(b, qq);
    if (q == 0) {
      // Inputs nobody reads go after the first op, as in the default plan.
      for (const Buffer& b : graph.buffers) {
        if (resident[b.id] && !is_persistent(b.kind) && reads[b.id].empty()) {
          plan.steps.push_back(Step::free(b.id));
          resident[b.id] = 0;
        }
      }
    }
  }
  return plan;
}

}  // namespace memwall::rotor
