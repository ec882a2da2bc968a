// Structural validation of a Graph (graph.h).
//
// Note [No cycle check]
// Ops are listed in execution order and an op may only read or update a
// buffer created by an earlier op (or one that exists before the first op).
// Every dependency therefore points backwards in the list, so a graph that
// passes these checks has no cycle; no separate graph search is needed.
//
// Linear: one pass over buffers (ids, sizes, total), one over ops in order
// (each read or update must find its buffer already existing), one over
// buffers again (every non-initial buffer has a producer).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "memwall/graph/calls.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

using detail::buffer_label;
using detail::op_label;

// Returns every buffer's kind: the later passes look kinds up by id, and a
// 1 MB array stays in cache where the buffers themselves (88 MB for a 1M-op
// graph) do not.
std::vector<BufferKind> check_buffers(const Graph& graph, uint64_t& total) {
  std::vector<BufferKind> kinds(graph.buffers.size());
  total = 0;
  for (size_t i = 0; i < graph.buffers.size(); ++i) {
    const Buffer& buffer = graph.buffers[i];
    if (buffer.id < 0 || static_cast<size_t>(buffer.id) != i) {
      fail("graph: buffer at position {} ({}) has id {}; ids must be dense, 0-based and in order",
           i, detail::in_quotes(buffer.name), buffer.id);
    }
    if (buffer.bytes > kMaxBytes) {
      fail("graph: {}: \"bytes\" is {}, above the limit of 2^62 bytes",
           buffer_label(graph, buffer.id), buffer.bytes);
    }
    if (static_cast<size_t>(buffer.kind) >= kNumBufferKinds) {
      fail("graph: {}: invalid kind", buffer_label(graph, buffer.id));
    }
    if (buffer.bytes > kMaxBytes - total) {
      fail("graph: {}: with its {} bytes, the buffers up to it hold more than 2^62 bytes",
           buffer_label(graph, buffer.id), buffer.bytes);
    }
    total += buffer.bytes;
    kinds[i] = buffer.kind;
  }
  return kinds;
}

// `buffer_bytes`: the graph's total, which an op's workspace must fit next
// to, so that no sum of bytes in use at one time can pass 2^62 anywhere
// downstream (memory profile, simulator) with a less helpful message.
void check_op_fields(const Graph& graph, const Op& op, uint64_t buffer_bytes) {
  if (op.workspace > kMaxBytes) {
    fail("graph: {}: \"workspace\" is {}, above the limit of 2^62 bytes", op_label(graph, op.id),
         op.workspace);
  }
  if (!op.scratch_first.empty() && op.scratch_first.size() != op.out.size()) {
    fail("graph: {}: \"scratch_first\" has {} counts for {} outputs", op_label(graph, op.id),
         op.scratch_first.size(), op.out.size());
  }
  if (op.scratch_at.size() % 2 != 0) {
    fail("graph: {}: \"scratch_at\" holds {} numbers, not (bytes, offset) pairs",
         op_label(graph, op.id), op.scratch_at.size());
  }
  for (size_t i = 0; i + 1 < op.scratch_at.size(); i += 2) {
    const uint64_t bytes = op.scratch_at[i], offset = op.scratch_at[i + 1];
    if (bytes > contiguous_workspace(op) || offset > contiguous_workspace(op) - bytes) {
      fail("graph: {}: \"scratch_at\" puts {} bytes at {}, past its workspace span of {}",
           op_label(graph, op.id), bytes, offset, contiguous_workspace(op));
    }
  }
  if (op.workspace_span != 0 && op.workspace_span < op.workspace) {
    fail(
        "graph: {}: \"workspace_span\" is {}, below its workspace of {} bytes (Note "
        "[Workspace span])",
        op_label(graph, op.id), op.workspace_span, op.workspace);
  }
  if (op.workspace_span > kMaxBytes - buffer_bytes) {
    fail(
        "graph: {}: its workspace span of {} bytes and the graph's {} bytes of buffers exceed "
        "2^62 bytes together",
        op_label(graph, op.id), op.workspace_span, buffer_bytes);
  }
  if (op.workspace > kMaxBytes - buffer_bytes) {
    fail(
        "graph: {}: its workspace of {} bytes and the graph's {} bytes of buffers exceed 2^62 "
        "bytes together",
        op_label(graph, op.id), op.workspace, buffer_bytes);
  }
  // `!(x >= 0)` also rejects NaN; infinity is checked separately.
  const auto check = [&](double value, const char* field) {
    if (!(value >= 0) || value == std::numeric_limits<double>::infinity()) {
      fail("graph: {}: \"{}\" must be a finite number >= 0", op_label(graph, op.id), field);
    }
  };
  check(op.flops, "flops");
  check(op.bytes, "bytes");
  if (op.time) check(*op.time, "time");
}

bool in_range(const Graph& graph, BufferId id) {
  return id >= 0 && static_cast<size_t>(id) < graph.buffers.size();
}

// A read or update of a buffer that has no producer yet: find out why, for
// the message. Only runs on the error path, so the scan costs nothing.
[[noreturn]] void fail_early_use(const Graph& graph, const Op& op, BufferId b, const char* verb) {
  for (size_t j = op.id; j < graph.ops.size(); ++j) {
    for (const BufferId out : graph.ops[j].out) {
      if (out != b) continue;
      if (static_cast<OpId>(j) == op.id) {
        fail("graph: {} both creates and {} {}", op_label(graph, op.id), verb,
             buffer_label(graph, b));
      }
      fail("graph: {} {} {} before {} creates it", op_label(graph, op.id), verb,
           buffer_label(graph, b), op_label(graph, static_cast<OpId>(j)));
    }
  }
  fail("graph: {} {} {}, which no op creates", op_label(graph, op.id), verb,
       buffer_label(graph, b));
}

// A buffer is used only after it exists: one pass in execution order, reads
// and updates of each op checked before its outputs come into existence.
std::vector<OpId> check_ops(const Graph& graph, const std::vector<BufferKind>& kinds,
                            uint64_t buffer_bytes) {
  std::vector<OpId> producer(graph.buffers.size(), kNoOp);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    if (op.id < 0 || static_cast<size_t>(op.id) != i) {
      fail("graph: op at position {} ({}) has id {}; ids must be dense, 0-based and in order", i,
           detail::in_quotes(op.name), op.id);
    }
    check_op_fields(graph, op, buffer_bytes);
    const auto check_uses = [&](const BufferIds& list, const char* verb) {
      for (const BufferId b : list) {
        if (!in_range(graph, b)) {
          fail("graph: {} {} buffer {}, which does not exist", op_label(graph, op.id), verb, b);
        }
        if (producer[b] == kNoOp && !exists_before_first_op(kinds[b])) {
          fail_early_use(graph, op, b, verb);
        }
      }
    };
    check_uses(op.in, "reads");
    check_uses(op.updates, "updates");
    for (const BufferId b : op.out) {
      if (!in_range(graph, b)) {
        fail("graph: {} creates buffer {}, which does not exist", op_label(graph, op.id), b);
      }
      if (exists_before_first_op(kinds[b])) {
        fail("graph: {} creates {}, but {} buffers exist before the first op and have no producer",
             op_label(graph, op.id), buffer_label(graph, b), to_string(kinds[b]));
      }
      if (producer[b] == op.id) {
        fail("graph: {} lists {} twice in \"out\"", op_label(graph, op.id), buffer_label(graph, b));
      }
      if (producer[b] != kNoOp) {
        fail("graph: {} is created by two ops: {} and {}", buffer_label(graph, b),
             op_label(graph, producer[b]), op_label(graph, op.id));
      }
      producer[b] = op.id;
    }
  }
  return producer;
}

// Note [Buffer versions] (versions.cc): a version has the size of the buffer
// it follows, both come from ops, its producer reads the previous version,
// and a buffer has at most one next version.
void check_versions(const Graph& graph, const std::vector<BufferKind>& kinds,
                    const std::vector<OpId>& producer) {
  std::vector<uint8_t> has_next(graph.buffers.size(), 0);
  for (const Buffer& v : graph.buffers) {
    const BufferId prev = v.version_of;
    if (prev == kNoBuffer) continue;
    const std::string label = buffer_label(graph, v.id);
    if (!in_range(graph, prev) || prev == v.id) {
      fail("graph: {}: \"version_of\" is {}, which is not another buffer", label, prev);
    }
    if (exists_before_first_op(kinds[v.id]) || exists_before_first_op(kinds[prev])) {
      fail("graph: {} is a version of {}, but only buffers that ops create have versions", label,
           buffer_label(graph, prev));
    }
    if (graph.buffers[prev].bytes != v.bytes) {
      fail("graph: {} has {} bytes, but the version it follows, {}, has {}", label, v.bytes,
           buffer_label(graph, prev), graph.buffers[prev].bytes);
    }
    const Op& op = graph.ops[producer[v.id]];
    if (std::find(op.in.begin(), op.in.end(), prev) == op.in.end()) {
      fail("graph: {} is a version of {}, but its producer {} does not read it", label,
           buffer_label(graph, prev), op_label(graph, op.id));
    }
    if (has_next[prev]++) {
      fail("graph: {} has two next versions (the second is {})", buffer_label(graph, prev), label);
    }
  }
}

}  // namespace

void validate(const Graph& graph) {
  uint64_t buffer_bytes = 0;
  const std::vector<BufferKind> kinds = check_buffers(graph, buffer_bytes);
  const std::vector<OpId> producer = check_ops(graph, kinds, buffer_bytes);
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    if (producer[b] == kNoOp && !exists_before_first_op(kinds[b])) {
      fail(
          "graph: {} of kind {} is never created by an op (only param, optim_state and input "
          "buffers exist before the first op)",
          buffer_label(graph, static_cast<BufferId>(b)), to_string(kinds[b]));
    }
  }
  check_versions(graph, kinds, producer);
  check_call_bindings(graph);  // Note [Call bindings]
  // Note [Eager lifetimes]: an op of this graph, not before the producer.
  for (const Buffer& b : graph.buffers) {
    if (b.eager_free == kEagerUnknown || b.eager_free == kNoOp) continue;
    if (b.eager_free < 0 || static_cast<size_t>(b.eager_free) >= graph.ops.size()) {
      fail("graph: {}: \"eager_free\" is {}, which is not an op", buffer_label(graph, b.id),
           b.eager_free);
    }
    if (producer[b.id] != kNoOp && b.eager_free < producer[b.id]) {
      fail("graph: {}: \"eager_free\" is op {}, before {} creates it", buffer_label(graph, b.id),
           b.eager_free, op_label(graph, producer[b.id]));
    }
  }
}

}  // namespace memwall
