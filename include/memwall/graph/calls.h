// Buffer ids inside op call records (the `call` field, docs/exec.md), for
// memwall's graph rewrites: a rewrite that renumbers buffers renumbers its
// calls' tensor references with them, so that the executor runs the right
// buffers.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace memwall {

// What a buffer id of a call becomes: another id, or a local of a fused
// sequence (its index among the sequence's temporaries).
struct CallBuffer {
  int64_t id = -1;
  bool local = false;
};

// `call` (JSON text) with every tensor reference {"t": B} turned into
// {"t": map(B).id} or {"l": map(B).id}, and every "results" entry alike
// (a local result as {"l": k}). Throws Error when `call` is not JSON.
nlohmann::json remap_call(std::string_view call, const std::function<CallBuffer(int64_t)>& map);
std::string remap_call_text(std::string_view call, const std::function<CallBuffer(int64_t)>& map);

// `call` parsed. Throws Error when it is not one JSON object.
nlohmann::json call_object(std::string_view call);

// Whether a fused call (memwall::cpu_step or memwall::sequence) only
// overwrites `b`: some part copies into the whole of it (aten::copy_ with
// it first), and no part reads it (no other argument names it). Such a
// step's references to `b` may mean a fresh buffer (Note [CPU step calls]
// in src/swap/offload.cc).
struct Buffer;
bool call_only_overwrites(const nlohmann::json& call, const Buffer& b);

// Note [Call bindings] (call_bindings.cc): throws Error naming the op when
// a call names a buffer its op neither reads nor writes, as the executor
// binds them. validate() calls it.
struct Graph;
void check_call_bindings(const Graph& graph);

// Note [Kernel signatures]: what decides a kernel's time, from its call
// record: the operator, every argument's view (sizes, strides, offset,
// dtype) and every other argument, without the buffer ids (two ops on
// different buffers of one shape are one kernel), the results, and the
// value of a tracked scalar (its expression stays: it names the kernel's
// argument kinds). The key of a profile's measured kernels (hw's
// Hardware::kernel_seconds). Throws Error when `call` is not JSON.
std::string kernel_signature(std::string_view call);
// The kernels a call runs: its own signature, or for memwall's fused calls
// (a CPU step's or a sequence's "steps", Note [Fused calls]) those of its
// parts, in order. Throws Error when `call` is not JSON.
std::vector<std::string> kernel_signatures(std::string_view call);

}  // namespace memwall
