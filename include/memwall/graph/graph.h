// Graph I/O, validation, liveness and memory accounting.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/error.h"
#include "memwall/graph/types.h"

namespace memwall {

// ---- JSON (memwall.graph/1) -------------------------------------------------
inline constexpr std::string_view kGraphFormat = "memwall.graph/1";

// Parse and validate. Throws Error with one line naming the problem.
Graph graph_from_json_text(std::string_view text);
Graph graph_from_json(const nlohmann::json& json);
Graph read_graph_file(const std::string& path);
nlohmann::json graph_to_json(const Graph& graph);
// Writes atomically (temporary file, then rename): never half-written.
void write_graph_file(const Graph& graph, const std::string& path);

// ---- Validation ---------------------------------------------------------------
// Throws Error naming the offending op or buffer: ids not dense, unknown ids,
// a buffer read before it exists, two producers, a produced buffer of a kind
// that exists from the start, a buffer never produced, oversize bytes.
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
  // (persistent ones, and grads read by the optimizer).
  OpId alloc_op = kNoOp;
  OpId free_op = kNoOp;
};

// O(ops + edges).
std::vector<BufferLife> liveness(const Graph& graph);

// ---- Memory accounting of the default schedule ------------------------------
struct MemoryProfile {
  // curve[i]: device bytes in use while op i runs (live buffers, op i's
  // outputs and its workspace).
  std::vector<uint64_t> curve;
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
  std::array<uint64_t, kNumBufferKinds> bytes_by_kind{};  // sum of every buffer of each kind
  // Activations produced in forward and read by a backward op.
  uint64_t saved_activation_bytes = 0;
  uint64_t peak_workspace_bytes = 0;  // largest single op workspace
};
MemorySummary memory_summary(const Graph& graph);

// Bytes of activation buffers produced by forward ops and read by at least
// one backward op, restricted to buffers whose name starts with `prefix`.
uint64_t saved_activation_bytes(const Graph& graph, std::string_view prefix = "");

}  // namespace memwall
