// Graph I/O, validation, liveness and memory accounting.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/graph/types.h"

namespace memwall {

// ---- JSON (memwall.graph/1) -------------------------------------------------
inline constexpr std::string_view kGraphFormat = "memwall.graph/1";

// Parse and validate. Throws Error with one line naming the problem.
// Required fields: format, name, meta (an object), buffers, ops; per buffer
// id, name, bytes, kind (dtype defaults to fp32, shape to []); per op id, name,
// type, phase, in, out (updates defaults to [], workspace/flops/bytes to 0,
// time to null; call, an object, is kept as its text in Op::call). Unknown
// and duplicate fields are errors.
Graph graph_from_json_text(std::string_view text);
Graph graph_from_json(const nlohmann::json& json);
Graph read_graph_file(const std::string& path);
nlohmann::json graph_to_json(const Graph& graph);
// The same JSON as text, streamed (one buffer or op per line): use it for
// large graphs, whose DOM would take gigabytes. Throws Error for what JSON
// cannot hold (non-finite numbers, names that are not UTF-8, an Op::call
// that is not one JSON object).
std::string graph_to_json_text(const Graph& graph);
// Writes atomically (temporary file, then rename): never half-written.
void write_graph_file(const Graph& graph, const std::string& path);

// ---- Fingerprint ----------------------------------------------------------------
// 16 lowercase hex digits hashing what a plan depends on: the buffers and
// ops, not the name, meta, cost annotations or calls (Note [Graph
// fingerprint]).
// The writer records it in meta as "fingerprint"; plans record the
// fingerprint of the graph they run, and the verbs check it.
std::string graph_fingerprint(const Graph& graph);

// Note [Rewritten graphs]: a rewrite of `from` (ZeRO's rank graph,
// offload's CPU steps) records in `to`'s meta, as "rewritten_from", the
// fingerprint of the graph the model gives (the first one rewritten), so
// that `memwall run` can hold a rewritten graph against a fresh trace.
void record_rewrite(const Graph& from, Graph& to);

// ---- Validation ---------------------------------------------------------------
// Throws Error naming the offending op or buffer: ids not dense, unknown ids,
// a buffer read before it exists, two producers, a produced buffer of a kind
// that exists from the start, a buffer never produced, oversize bytes, a
// call record naming a buffer its op does not bind (Note [Call bindings]).
// Ops in execution order make cycles impossible once every read follows its
// producer, which is what this checks.
void validate(const Graph& graph);

// ---- Liveness -----------------------------------------------------------------
struct BufferLife {
  OpId producer = kNoOp;   // kNoOp: exists before the first op
  OpId first_use = kNoOp;  // first op reading or updating it
  OpId last_use = kNoOp;   // last op reading or updating it (kNoOp: never used)
  // Default schedule: live during ops [alloc_op, free_op]; freed right after
  // free_op. alloc_op is kNoOp for buffers that exist before the first op;
  // free_op is kNoOp for buffers alive at the end of the iteration
  // (persistent ones, and grads read or updated by an optimizer op).
  // An input is freed after its last use; an input no op uses is freed after
  // op 0 (it exists before the first op, like a produced buffer that nobody
  // reads is freed right after its producer). With no ops at all, free_op is
  // kNoOp for every buffer.
  OpId alloc_op = kNoOp;
  OpId free_op = kNoOp;
};

// O(ops + edges). Indexed by buffer id. Meant for a validated graph; on any
// other graph it never reads out of bounds (unknown ids throw Error).
std::vector<BufferLife> liveness(const Graph& graph);

// Note [Eager lifetimes]
// ~~~~~~~~~~~~~~~~~~~~~~
// memwall's own schedules free a buffer after its last reader. Eager
// PyTorch frees a storage when its last reference goes: a training loop
// holds its batch for the whole step, a model's forward the logits until
// the loss returns, autograd the tensors a node saved until that node's
// backward ran (even those it never reads), torch.optim's loop a
// temporary until the next parameter's replaces it. `memwall trace`
// records, per buffer, the op after which eager PyTorch freed it
// (Buffer::eager_free, from a weak reference to every storage checked
// before each op), so a traced graph carries both lifetimes. The eager
// lifetime is never shorter than the last-reader one: a storage cannot die
// before an op reads it.
bool has_eager_lifetimes(const Graph& graph);
// liveness() with every recorded eager free applied (freed after
// max(eager_free, last use); kNoOp: alive at the end). Buffers without a
// record keep the last-reader lifetime.
std::vector<BufferLife> eager_liveness(const Graph& graph);

// ---- Memory accounting of the default schedule ------------------------------
struct MemoryProfile {
  // curve[i]: device bytes in use while op i runs (live buffers, op i's
  // outputs and its workspace).
  std::vector<uint64_t> curve;
  // Largest curve value and the first op reaching it. A graph without ops
  // has peak_op == kNoOp and peak_bytes == initial_bytes.
  uint64_t peak_bytes = 0;
  OpId peak_op = kNoOp;
  // Live bytes per BufferKind at the peak (workspace counts the op's own).
  std::array<uint64_t, kNumBufferKinds> peak_by_kind{};
  // Bytes of buffers alive before the first op (params, optimizer states, inputs).
  uint64_t initial_bytes = 0;
};

MemoryProfile memory_profile(const Graph& graph);
MemoryProfile memory_profile(const Graph& graph, const std::vector<BufferLife>& lives);

// Totals over a graph, as `memwall inspect` reports them.
struct MemorySummary {
  // Sum of every buffer of each kind; a buffer's versions count once
  // (they are its storage, updated in place).
  std::array<uint64_t, kNumBufferKinds> bytes_by_kind{};
  // Activations produced in forward and read (or updated) by a backward op.
  uint64_t saved_activation_bytes = 0;
  uint64_t peak_workspace_bytes = 0;  // largest single op workspace
};
MemorySummary memory_summary(const Graph& graph);

// Per buffer: 1 when it is an activation produced by a forward op and read
// (or updated) by at least one backward op (or a comm op after the first
// backward op), i.e. saved for backward.
std::vector<uint8_t> saved_for_backward(const Graph& graph);

// Whether any op is of phase backward: a training iteration. A graph
// without one is a forward-only program (inference, a GAN's unrolled
// generator steps, a custom loop), whose ops are forward, optimizer or comm.
bool has_backward(const Graph& graph);

// Per buffer: 1 when it is an activation the default schedule keeps on the
// device across ops that do not use it, until a later op reads it again:
// what recomputation and swapping can take off the device meanwhile. In a
// training iteration, the activations saved for backward
// (saved_for_backward). In a forward-only program, every activation with at
// least one op between two consecutive uses, its producer counting as one
// (a U-Net's skip connection, a buffer an unrolled loop reads at its end).
std::vector<uint8_t> read_again_later(const Graph& graph);

// Bytes of activation buffers produced by forward ops and read (or updated)
// by at least one backward op, restricted to buffers whose name starts with
// `prefix`.
uint64_t saved_activation_bytes(const Graph& graph, std::string_view prefix = "");

}  // namespace memwall
