// ZeRO data parallelism as a graph transform (zero.h).
//
// Note [ZeRO as a graph]
// ~~~~~~~~~~~~~~~~~~~~~~
// Rajbhandari et al. 2020 ("ZeRO", sec. 5 and 7) partition the model states
// of N data-parallel ranks; each rank runs the same iteration on its own
// micro-batch. The rank's graph is the input graph with
//   stage 0  every gradient all-reduced (2(N-1)/N of its bytes sent) right
//            after its last writer in backward;
//   stage 1  optimizer states cut to 1/N and the step doing 1/N of the work;
//            gradients reduce-scattered in place (the buffer stays whole,
//            only the rank's part is summed) and each updated parameter
//            all-gathered after its step ((N-1)/N sent each): the same
//            volume as stage 0, as the paper says;
//   stage 2  as stage 1, but the reduce-scatter writes a 1/N gradient shard
//            (the full gradient becomes a temporary, freed once reduced);
//   stage 3  as stage 2, and parameters cut to 1/N: before a run of users a
//            comm op all-gathers the whole parameter into a temporary that
//            the users read and that dies after the run (forward and
//            backward each gather, which is the paper's 3x volume); the step
//            updates the shard, so no all-gather follows it.
// Comm ops run on the simulator's collective stream, overlapping compute;
// where they sit in op order decides how early they can start, hence
// prefetch_ops. Shards round up to whole elements (ceil(elements / N)); a
// state that is not the parameter's size (Adam's step count) is replicated,
// as every rank counts steps. Calls follow the remaps (the step reads the
// gradient's shard, stage 3's users the gathered parameter), so that the
// executor runs them (Note [Shards at run time] in src/exec/executor_comm.cc).
// A stage above 0 with one
// rank changes nothing. A step of several ops (a traced one, Note [Traced
// optimizer steps] in optimizer_steps.cc) stays as it is: each of its ops
// reads the shard and does 1/N of its work, its temporaries cut to 1/N,
// and the all-gather follows its last op.
#include "memwall/swap/zero.h"

#include <algorithm>
#include <string>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/calls.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/describe.h"

namespace memwall {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

struct Rewrite {
  const Graph& in;
  const ZeroOptions& opt;
  Graph out;
  // Ops to emit before / after each input op, and input remaps per op.
  std::vector<std::vector<Op>> before, after;
  std::vector<std::vector<std::pair<BufferId, BufferId>>> remap;  // per op: old -> new

  Rewrite(const Graph& graph, const ZeroOptions& options)
      : in(graph),
        opt(options),
        out(graph),
        before(graph.ops.size()),
        after(graph.ops.size()),
        remap(graph.ops.size()) {}

  double ranks() const { return static_cast<double>(opt.ranks); }
  double share_sent() const { return (ranks() - 1) / ranks(); }  // (N-1)/N

  BufferId add_buffer(const Buffer& like, const std::string& suffix, uint64_t bytes,
                      BufferKind kind, bool shard) {
    Buffer b = like;
    b.id = static_cast<BufferId>(out.buffers.size());
    b.name = like.name + suffix;
    b.bytes = bytes;
    b.kind = kind;
    if (shard) b.shape = Dims{static_cast<int64_t>(ceil_div(element_count(like), opt.ranks))};
    out.buffers.push_back(std::move(b));
    return out.buffers.back().id;
  }

  // Bytes of a 1/N shard of `like`: whole elements, ceil(elements / N).
  uint64_t shard_bytes(const Buffer& like) const {
    const uint64_t elements = element_count(like);
    const auto ranks = static_cast<uint64_t>(opt.ranks);
    if (elements == 0 || like.bytes % elements != 0) return ceil_div(like.bytes, ranks);
    return ceil_div(elements, ranks) * (like.bytes / elements);
  }

  // Cuts buffer b to its 1/N shard in place.
  void shard(BufferId b) {
    Buffer& buf = out.buffers[b];
    const uint64_t elements = element_count(buf);
    buf.bytes = shard_bytes(buf);
    buf.shape = Dims{static_cast<int64_t>(ceil_div(elements, opt.ranks))};
  }
  // A state or temporary of the parameter's size (not a step count).
  bool param_sized(BufferId b, const ModelState& s) const {
    return element_count(in.buffers[b]) == element_count(in.buffers[s.param]);
  }

  static Op comm(std::string name, std::string type, double bytes_sent) {
    Op op;
    op.name = std::move(name);
    op.type = std::move(type);
    op.phase = Phase::kComm;
    op.bytes = bytes_sent;
    return op;
  }

  // The last op outside the optimizer that writes each buffer.
  std::vector<OpId> last_writers() const {
    std::vector<OpId> last(in.buffers.size(), kNoOp);
    for (const Op& op : in.ops) {
      if (op.phase == Phase::kOptimizer) continue;
      for (const BufferId b : op.out) last[b] = op.id;
      for (const BufferId b : op.updates) last[b] = op.id;
    }
    return last;
  }
  std::vector<OpId> last_write;

  void gradients(const ModelState& s) {
    const Buffer& g = in.buffers[s.grad];
    const OpId writer = last_write[s.grad];
    if (writer == kNoOp || writer > s.ops.front()) {
      fail("ZeRO: {} reads {}, which no op before it writes", detail::op_label(in, s.ops.front()),
           detail::buffer_label(in, s.grad));
    }
    const auto bytes = static_cast<double>(g.bytes);
    if (opt.stage == 0) {
      Op op = comm(g.name + ".all_reduce", "all_reduce", 2 * share_sent() * bytes);
      op.updates = {s.grad};
      after[writer].push_back(std::move(op));
      return;
    }
    if (opt.stage == 1) {
      Op op = comm(g.name + ".reduce_scatter", "reduce_scatter", share_sent() * bytes);
      op.updates = {s.grad};
      after[writer].push_back(std::move(op));
      return;
    }
    // Stages 2 and 3: the reduced shard is the gradient the step reads.
    const BufferId shard_id = add_buffer(g, ".shard", shard_bytes(g), BufferKind::kGrad, true);
    out.buffers[s.grad].kind = BufferKind::kTemp;
    Op op = comm(g.name + ".reduce_scatter", "reduce_scatter", share_sent() * bytes);
    op.in = {s.grad};
    op.out = {shard_id};
    after[writer].push_back(std::move(op));
    for (const OpId id : s.ops) remap[id].push_back({s.grad, shard_id});
  }

  void optimizer(const ModelState& s) {
    for (const BufferId st : s.states) {
      if (param_sized(st, s)) shard(st);
    }
    // Every op of a traced step does 1/N of its work on 1/N of its
    // temporaries (Note [Traced optimizer steps] in optimizer_steps.cc).
    for (const BufferId t : s.temps) {
      if (param_sized(t, s)) shard(t);
    }
    for (const OpId id : s.ops) {
      Op& op = out.ops[id];
      op.flops /= ranks();
      op.bytes /= ranks();
      if (op.time) *op.time /= ranks();
      // A fused step's workspace is its parameter-sized temporaries, and
      // foreach's lists (Note [Foreach lists] in optimizer_impl.cc): 1/N of
      // them. A traced op's own scratch (placed by scratch_at) stays.
      if (s.ops.size() == 1 && op.scratch_at.empty()) {
        op.workspace = ceil_div(op.workspace, static_cast<uint64_t>(opt.ranks));
        op.workspace_span = ceil_div(op.workspace_span, static_cast<uint64_t>(opt.ranks));
      }
    }
    if (opt.stage == 3) return;  // the step updates the parameter's shard
    Op op = comm(in.buffers[s.param].name + ".all_gather", "all_gather",
                 share_sent() * static_cast<double>(in.buffers[s.param].bytes));
    op.updates = {s.param};
    after[s.step].push_back(std::move(op));
  }

  // Stage 3: gathers before each run of users of the parameter.
  void gathers(const ModelState& s, const std::vector<OpId>& users) {
    const Buffer& p = in.buffers[s.param];
    const uint64_t full_bytes = p.bytes;
    shard(s.param);
    size_t run = 0;
    for (size_t i = 0; i < users.size();) {
      size_t j = i + 1;
      while (j < users.size() && in.ops[users[j]].phase == in.ops[users[i]].phase &&
             users[j] - users[j - 1] <= opt.regather_gap) {
        ++j;
      }
      const BufferId full =
          add_buffer(p, fmt::format(".gathered{}", run++), full_bytes, BufferKind::kTemp, false);
      out.buffers[full].shape = p.shape;
      Op op = comm(out.buffers[full].name, "all_gather",
                   share_sent() * static_cast<double>(full_bytes));
      op.in = {s.param};
      op.out = {full};
      // Prefetch: a few ops early, but never before the previous run's last
      // user (or the parameter would be held twice) nor across phases.
      OpId at = users[i];
      const OpId floor = i > 0 ? users[i - 1] + 1 : 0;
      for (int k = 0;
           k < opt.prefetch_ops && at > floor && in.ops[at - 1].phase == in.ops[users[i]].phase;
           ++k) {
        --at;
      }
      before[at].push_back(std::move(op));
      for (size_t k = i; k < j; ++k) remap[users[k]].push_back({s.param, full});
      i = j;
    }
  }

  Graph run() {
    const std::vector<ModelState> states = model_states(in);
    last_write = last_writers();
    if (opt.stage == 3) {
      std::vector<std::vector<OpId>> users(in.buffers.size());
      for (const Op& op : in.ops) {
        if (op.phase == Phase::kOptimizer) continue;
        for (const BufferId b : op.in) {
          if (in.buffers[b].kind == BufferKind::kParam) users[b].push_back(op.id);
        }
      }
      for (const ModelState& s : states) gathers(s, users[s.param]);
    }
    for (const ModelState& s : states) {
      gradients(s);
      if (opt.stage >= 1) optimizer(s);
    }
    // Emit ops in order with ids renumbered; comm ops' buffers are final.
    std::vector<Op> ops;
    ops.reserve(in.ops.size() * 2);
    std::vector<OpId> renumbered(in.ops.size(), kNoOp);
    const auto push = [&](Op op) {
      op.id = static_cast<OpId>(ops.size());
      ops.push_back(std::move(op));
    };
    for (size_t i = 0; i < in.ops.size(); ++i) {
      for (Op& op : before[i]) push(std::move(op));
      Op op = std::move(out.ops[i]);
      for (const auto& [from, to] : remap[i]) {
        std::replace(op.in.begin(), op.in.end(), from, to);
        std::replace(op.updates.begin(), op.updates.end(), from, to);
      }
      if (!op.call.empty() && !remap[i].empty()) {
        op.call = remap_call_text(op.call, [&](int64_t b) {
          for (const auto& [from, to] : remap[i]) {
            if (b == from) return CallBuffer{.id = to};
          }
          return CallBuffer{.id = b};
        });
      }
      renumbered[i] = static_cast<OpId>(ops.size());
      push(std::move(op));
      for (Op& c : after[i]) push(std::move(c));
    }
    out.ops = std::move(ops);
    // Note [Eager lifetimes] (graph.h): the op after which eager freed a
    // buffer keeps its place among the renumbered ops.
    for (Buffer& b : out.buffers) {
      if (b.eager_free >= 0 && static_cast<size_t>(b.eager_free) < renumbered.size()) {
        b.eager_free = renumbered[static_cast<size_t>(b.eager_free)];
      }
    }
    out.name = fmt::format("{} (ZeRO-{} rank of {})", in.name, opt.stage, opt.ranks);
    out.meta["zero"] = {{"stage", opt.stage}, {"ranks", opt.ranks}};
    record_rewrite(in, out);  // Note [Rewritten graphs]
    return std::move(out);
  }
};

}  // namespace

Graph zero_rank_graph(const Graph& graph, const ZeroOptions& options) {
  if (options.ranks < 1) fail("ZeRO needs at least one rank (got {})", options.ranks);
  if (options.stage < 0 || options.stage > 3) {
    fail("ZeRO stage {} does not exist (0, 1, 2 or 3)", options.stage);
  }
  if (options.prefetch_ops < 0 || options.regather_gap < 1) {
    fail("ZeRO prefetch distance must be >= 0 and the regather gap >= 1 (got {} and {})",
         options.prefetch_ops, options.regather_gap);
  }
  if (options.ranks == 1) return graph;
  return Rewrite(graph, options).run();
}

}  // namespace memwall
