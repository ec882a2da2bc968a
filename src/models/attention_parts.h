// Pieces the attention kernels share (attention.cc, context_parallel.cc).
// Internal to src/models.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "builder.h"
#include "memwall/base/error.h"

namespace memwall::models::attention_parts {

inline double dbl(int64_t v) { return static_cast<double>(v); }

// Memory traffic of an op from the tensors it touches. Views of one fused
// buffer count their own elements, not the whole buffer each (the builder's
// default counts whole buffers).
inline double traffic(std::initializer_list<Tensor> tensors) {
  double total = 0;
  for (const Tensor& t : tensors) total += static_cast<double>(t.bytes());
  return total;
}

// An op's `in` list names each buffer once, even when it reads several views
// of it (q, k and v of a fused QKV buffer).
inline std::vector<Tensor> distinct(std::vector<Tensor> tensors) {
  std::vector<Tensor> out;
  for (Tensor& t : tensors) {
    bool seen = false;
    for (const Tensor& o : out) seen = seen || o.id == t.id;
    if (!seen) out.push_back(std::move(t));
  }
  return out;
}

// flash-attn 2's mha_bwd allocates an fp32 dQ accumulator and the fp32
// rowsum(dO * O) per query; with fewer KV heads it also computes dK, dV per
// query head and sums them afterwards (dk_expanded, dv_expanded).
inline uint64_t flash_backward_workspace(int64_t batch, int64_t s, int64_t heads, int64_t d,
                                         int64_t kv_heads, DType dt) {
  uint64_t workspace = checked_mul(static_cast<uint64_t>(batch * s * heads * d), 4, "workspace");
  workspace = checked_add(workspace, static_cast<uint64_t>(batch * heads * s) * 4, "workspace");
  if (kv_heads != heads) {
    workspace = checked_add(
        workspace,
        checked_mul(static_cast<uint64_t>(batch * s * heads * d), 2 * dtype_size(dt), "workspace"),
        "workspace");
  }
  return workspace;
}

// Where the gradients of q, k and v go: straight to their buffers, or, when
// they are views of one fused buffer, collected for a final "cat".
struct QkvGradients {
  bool fused = false;
  std::array<Tensor, 3> inputs;  // q, k, v as given
  std::array<Tensor, 3> grads;   // fused case: dQ, dK, dV
  std::string name;              // qualified attention name

  void deliver(Builder& b, int which, const Tensor& g) {
    static constexpr std::array<const char*, 3> kWhich = {".q", ".k", ".v"};
    if (fused) {
      grads[which] = g;
    } else {
      b.add_grad(inputs[which], g, name + kWhich[which]);
    }
  }
};

}  // namespace memwall::models::attention_parts
