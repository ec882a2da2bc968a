// One op's call record (Note [Call records], python/memwall/tracer/calls.py)
// compiled once against the operator's schema, then turned into a boxed
// argument stack per run of the op.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

namespace memwall::exec {

// A tensor argument: a view of a buffer's storage. `buffer` is the id the
// tracer gave the storage (a version's root, Note [Buffer versions]).
struct TensorRef {
  int64_t buffer = -1;  // a local's index when `local` (Note [Fused calls])
  bool local = false;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// A float computed from tensors' .item() and the optimizer's settings
// (Note [Tracked scalars], Note [Tracked settings]).
struct ScalarExpr {
  nlohmann::json tree;
  std::vector<TensorRef> items;       // the ["item", ref] leaves in tree order
  std::vector<std::string> settings;  // the ["setting", name, traced] leaves' names
};

// Note [Tracked settings]: the values the caller gave by name ("group0.lr"),
// which replace those the trace recorded.
using Settings = std::map<std::string, double, std::less<>>;

struct CompiledArg {
  enum class Kind { kConstant, kTensor, kTensorList, kOptionalTensorList, kExpr };
  Kind kind = Kind::kConstant;
  c10::IValue constant;
  std::vector<std::optional<TensorRef>> tensors;  // kTensor: exactly one
  ScalarExpr expr;
  enum class As { kDouble, kScalar, kWrappedTensor } expr_as = As::kDouble;
};

// What a returned tensor becomes: a buffer (id), a local of a fused
// sequence, or nothing (-1).
struct ResultRef {
  int64_t id = -1;
  bool local = false;
};

struct CompiledCall {
  // kAten: one operator. memwall's own ops (docs/exec.md): kCpuStep, a
  // parameter's optimizer step on the host (Note [CPU step calls]: `steps`
  // in order over `locals` temporaries, the parameter's references meaning
  // its master copy, which then gives `update` or the parameter its
  // values); kApply, the device copy of `from` into `to`; kSequence, a
  // fused optimizer step kept on the device (Note [Device chunks] in
  // swap/offload.cc): `steps` in order over `locals` temporaries.
  // kComm: a collective of ZeRO's rank graphs (no call record; the op's
  // type says which, executor_comm.cc).
  enum class Kind { kAten, kCpuStep, kApply, kSequence, kComm } kind = Kind::kAten;
  std::vector<CompiledCall> steps;
  size_t locals = 0;
  int32_t param = -1, master = -1, update = -1, from = -1, to = -1;  // buffer ids
  std::string name;                                                  // "aten::addmm.out"
  std::optional<c10::OperatorHandle> handle;
  std::vector<CompiledArg> args;   // one per schema argument
  std::vector<ResultRef> results;  // per returned tensor
  bool rng = false;
};

// A tensor reference of a call record ({"t"|"l", "size", "stride",
// "offset", "dtype"}); throws BadInput on a malformed one.
TensorRef tensor_ref(const nlohmann::json& v);

// Throws BadInput naming the op on an unknown operator or an argument the
// schema does not accept. `device`: what the record's device arguments
// mean (a CPU step's are the CPU whatever it is).
CompiledCall compile_call(const nlohmann::json& call, const std::string& op_name,
                          c10::Allocator* host_allocator, c10::Device device);

// A 0-dim tensor of `value` marked as a wrapped number (what Python's
// `tensor * 0.5` passes to aten::mul.Tensor), in host memory.
at::Tensor wrapped_number(const c10::Scalar& value, c10::Allocator* host_allocator);

// Adds the names of the settings `call` reads (its steps' included).
void add_setting_names(const CompiledCall& call, std::set<std::string, std::less<>>& names);

// Evaluates the expression in doubles, reading each item through `read`
// and each setting from `settings` (the traced value when not set).
double evaluate(const nlohmann::json& tree, const std::function<double(size_t)>& read,
                const Settings& settings, size_t& next_item);

}  // namespace memwall::exec
