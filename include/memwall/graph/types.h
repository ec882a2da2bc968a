// Plain record types of the Graph IR (format memwall.graph/1, DESIGN.md).
//
// A Graph is one training iteration: an ordered list of ops over buffers.
// A buffer is a unit of memory (a storage, not a view). Sizes are integer
// bytes, times are seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/base/error.h"  // kMaxBytes
#include "memwall/graph/inline_vector.h"

namespace memwall {

using BufferId = int32_t;
using OpId = int32_t;
inline constexpr OpId kNoOp = -1;
inline constexpr BufferId kNoBuffer = -1;
// Buffer::eager_free when the graph does not say (Note [Eager lifetimes] in graph.h).
inline constexpr OpId kEagerUnknown = -2;

enum class BufferKind : uint8_t {
  kParam,
  kGrad,
  kOptimState,
  kActivation,
  kInput,
  kWorkspace,
  kTemp
};
inline constexpr int kNumBufferKinds = 7;

enum class Phase : uint8_t { kForward, kBackward, kOptimizer, kComm };

enum class DType : uint8_t { kF32, kF16, kBF16, kF64, kI64, kI32, kI8, kU8, kBool };

// Inline up to four ids or dims: see Note [Inline id lists].
using BufferIds = InlineVector<BufferId, 4>;
using Dims = InlineVector<int64_t, 4>;

struct Buffer {
  BufferId id = 0;
  std::string name;
  uint64_t bytes = 0;
  BufferKind kind = BufferKind::kActivation;
  DType dtype = DType::kF32;
  Dims shape;
  // The buffer this one is the next version of (Note [Buffer versions] in
  // src/graph/versions.cc): its producer updated that buffer in place.
  // kNoBuffer for a buffer that is nobody's next version.
  BufferId version_of = kNoBuffer;
  // The op after which eager PyTorch frees the buffer's storage (its last
  // reference goes; Note [Eager lifetimes] in graph.h); kNoOp: alive at the
  // end of the step; kEagerUnknown: not recorded (the zoo's graphs).
  OpId eager_free = kEagerUnknown;
};

struct Op {
  OpId id = 0;
  std::string name;
  std::string type;  // matmul, attention, layer_norm, ... (free-form, documented in docs/)
  Phase phase = Phase::kForward;
  BufferIds in;            // buffers read
  BufferIds out;           // buffers created
  BufferIds updates;       // buffers modified in place
  uint64_t workspace = 0;  // scratch bytes held only while the op runs
  // Note [Workspace span]: the contiguous bytes that scratch needs when the
  // op's outputs sit at addresses of their own (0: `workspace` itself).
  uint64_t workspace_span = 0;
  // Note [Scratch before its output] (src/exec/executor_compute.cc): per
  // output, in `out` order, how many allocations of its size the kernel
  // makes before it (the tracer's scratch rules); empty: none said.
  std::vector<uint32_t> scratch_first;
  // Note [Scratch offsets] (src/exec/device_memory.cc): the kernel's scratch
  // allocations in the order it makes them, as pairs (bytes, offset in the
  // workspace span), flat; empty: none said.
  std::vector<uint64_t> scratch_at;
  double flops = 0;
  double bytes = 0;            // memory traffic, for the cost model
  std::optional<double> time;  // measured seconds; overrides the cost model
  // Raw JSON text of the op's "call" object (how the executor runs the op
  // again: docs/exec.md), empty when the op has none. Readers that do not
  // run graphs ignore it.
  std::string call;
};

// Note [Workspace span]
// ~~~~~~~~~~~~~~~~~~~~~
// `workspace` is the bytes a kernel's scratch adds to the live total at its
// highest, counted against the op's outputs as allocated from its start: a
// oneDNN convolution computes into a blocked output, then allocates the real
// output and reorders into it, so its scratch peak comes before the output
// exists and the live total needs only the excess over the output. A layout
// that gives the output its own address must still give all of the scratch
// one range at once: the span (the scratch's own highest total, which is at
// most workspace + the outputs' bytes). The eager memory profile (what
// PyTorch's allocator holds, memory.cc) counts `workspace`; the simulator
// and the planners, which plan for an arena, count and place the span, so
// that a plan within its budget also lays out within it.
inline uint64_t contiguous_workspace(const Op& op) {
  return op.workspace_span > op.workspace ? op.workspace_span : op.workspace;
}

struct Graph {
  std::string name;
  nlohmann::json meta = nlohmann::json::object();
  std::vector<Buffer> buffers;
  std::vector<Op> ops;
};

// Names as they appear in the JSON format.
std::string_view to_string(BufferKind kind);
std::string_view to_string(Phase phase);
std::string_view to_string(DType dtype);
// Parsers return std::nullopt for an unknown name.
std::optional<BufferKind> parse_buffer_kind(std::string_view name);
std::optional<Phase> parse_phase(std::string_view name);
std::optional<DType> parse_dtype(std::string_view name);

// Bytes per element of a dtype (bool and u8/i8 take one byte).
uint64_t dtype_size(DType dtype);

// param, optim_state and input buffers exist before the first op; every other
// buffer has exactly one producer.
inline bool exists_before_first_op(BufferKind kind) {
  return kind == BufferKind::kParam || kind == BufferKind::kOptimState ||
         kind == BufferKind::kInput;
}
// param and optim_state survive across iterations.
inline bool is_persistent(BufferKind kind) {
  return kind == BufferKind::kParam || kind == BufferKind::kOptimState;
}

}  // namespace memwall
