#include "builder.h"

#include <algorithm>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/versions.h"

namespace memwall::models {

int64_t checked_numel(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("model: negative dimension {}", d);
    n = checked_mul(n, static_cast<uint64_t>(d), "tensor element count");
  }
  return static_cast<int64_t>(n);
}

int64_t Tensor::numel() const { return checked_numel(shape); }

uint64_t Tensor::bytes() const {
  return checked_mul(static_cast<uint64_t>(numel()), dtype_size(dtype), "tensor bytes");
}

Builder::Builder(std::string graph_name, const ModelOptions& options) : options_(options) {
  graph_.name = std::move(graph_name);
}

DType Builder::compute_dtype() const { return memwall::compute_dtype(options_.precision); }

Builder::Scope::Scope(Builder& b, std::string_view name) : b_(b), saved_size_(b.scope_.size()) {
  if (!b_.scope_.empty()) b_.scope_ += '.';
  b_.scope_ += name;
}

Builder::Scope::~Scope() { b_.scope_.resize(saved_size_); }

std::string Builder::qualified(std::string_view name) const {
  if (scope_.empty()) return std::string(name);
  std::string q = scope_;
  q += '.';
  q += name;
  return q;
}

BufferId Builder::new_buffer(std::string name, std::vector<int64_t> shape, DType dtype,
                             BufferKind kind) {
  Buffer buf;
  buf.id = static_cast<BufferId>(graph_.buffers.size());
  buf.name = std::move(name);
  buf.kind = kind;
  buf.dtype = dtype;
  buf.bytes = Tensor{buf.id, shape, dtype}.bytes();
  buf.shape = std::move(shape);
  graph_.buffers.push_back(std::move(buf));
  requires_grad_.push_back(0);
  grad_of_.push_back(-1);
  return graph_.buffers.back().id;
}

Tensor Builder::input(std::string_view name, std::vector<int64_t> shape, DType dtype) {
  BufferId id = new_buffer(qualified(name), shape, dtype, BufferKind::kInput);
  return Tensor{id, std::move(shape), dtype};
}

bool Builder::base_frozen() const {
  return options_.lora.rank > 0 || options_.base_weights == WeightFormat::kNf4;
}

Tensor Builder::param(std::string_view name, std::vector<int64_t> shape) {
  if (base_frozen()) {
    return stored_weight(name, shape, compute_dtype(), checked_numel(shape));
  }
  return adapter_param(name, std::move(shape));
}

Tensor Builder::adapter_param(std::string_view name, std::vector<int64_t> shape) {
  BufferId id = new_buffer(qualified(name), shape, compute_dtype(), BufferKind::kParam);
  requires_grad_[id] = 1;
  params_.push_back(id);
  param_count_ += checked_numel(shape);
  trainable_count_ += checked_numel(shape);
  return Tensor{id, std::move(shape), compute_dtype()};
}

Tensor Builder::stored_weight(std::string_view name, std::vector<int64_t> shape, DType dtype,
                              int64_t elements) {
  BufferId id = new_buffer(qualified(name), shape, dtype, BufferKind::kParam);
  param_count_ += elements;
  return Tensor{id, std::move(shape), dtype};
}

std::vector<Tensor> Builder::emit(const OpSpec& spec, const std::vector<OutSpec>& outs) {
  Op op;
  op.id = static_cast<OpId>(graph_.ops.size());
  op.name = qualified(spec.name);
  op.type = spec.type;
  op.phase = spec.phase;
  op.workspace = spec.workspace;
  op.flops = spec.flops;
  // Traffic from the tensors as viewed: an op reading a slice of a buffer
  // (a concat gradient seen as one input's gradient) moves only the slice.
  double traffic = 0;
  for (const Tensor& t : spec.in) {
    op.in.push_back(t.id);
    traffic += static_cast<double>(t.bytes());
  }
  for (const Tensor& t : spec.updates) {
    op.updates.push_back(t.id);
    traffic += 2.0 * static_cast<double>(t.bytes());
  }
  std::vector<Tensor> created;
  created.reserve(outs.size());
  for (const OutSpec& o : outs) {
    BufferId id = new_buffer(qualified(o.name), o.shape, o.dtype, o.kind);
    op.out.push_back(id);
    traffic += static_cast<double>(graph_.buffers[id].bytes);
    created.push_back(Tensor{id, o.shape, o.dtype});
  }
  op.bytes = spec.bytes >= 0 ? spec.bytes : traffic;
  graph_.ops.push_back(std::move(op));
  return created;
}

Tensor Builder::view(const Tensor& t, std::vector<int64_t> shape) const {
  if (checked_numel(shape) != t.numel()) {
    fail("model: view of {} changes its element count", graph_.buffers[t.id].name);
  }
  return Tensor{t.id, std::move(shape), t.dtype};
}

bool Builder::requires_grad(const Tensor& t) const { return t.valid() && requires_grad_[t.id]; }

void Builder::mark_requires_grad(const Tensor& t) { requires_grad_[t.id] = 1; }

void Builder::propagate_requires_grad(std::initializer_list<Tensor> inputs,
                                      std::initializer_list<Tensor> outputs) {
  bool any = false;
  for (const Tensor& t : inputs) any = any || requires_grad(t);
  if (!any) return;
  for (const Tensor& t : outputs) mark_requires_grad(t);
}

Tensor Builder::grad(const Tensor& t) const {
  BufferId g = grad_of_[t.id];
  if (g < 0) return Tensor{};
  const Buffer& buf = graph_.buffers[g];
  // The gradient has the tensor's shape (views included) and its own dtype.
  return Tensor{g, t.shape, buf.dtype};
}

void Builder::add_grad(const Tensor& t, const Tensor& g, std::string_view name) {
  if (!requires_grad(t) || !g.valid()) return;
  BufferId& slot = grad_of_[t.id];
  if (slot < 0) {
    slot = g.id;
    return;
  }
  // Note [Gradient accumulation]. Out of place: the existing buffer may also
  // be the gradient of another tensor (add's backward hands the same
  // gradient to both operands), so updating it in place could be wrong.
  Tensor existing{slot, g.shape, graph_.buffers[slot].dtype};
  Tensor sum = emit1({.name = std::string(name) + ".grad_acc",
                      .type = "add",
                      .phase = Phase::kBackward,
                      .in = {existing, g},
                      .flops = static_cast<double>(g.numel())},
                     {std::string(name) + ".grad_acc", g.shape, existing.dtype, BufferKind::kTemp});
  grad_of_[t.id] = sum.id;  // `slot` may dangle: emit1 grew grad_of_
}

std::vector<Tensor> Builder::emit_with_param_grads(OpSpec spec, const std::vector<OutSpec>& outs,
                                                   const std::vector<Tensor>& params) {
  std::vector<OutSpec> all_outs = outs;
  std::vector<Tensor> created_params;
  // A weight-gradient kernel of frozen weights (LoRA's base) does not run.
  const bool any_grad =
      std::any_of(params.begin(), params.end(), [&](const Tensor& p) { return requires_grad(p); });
  if (outs.empty() && !any_grad) return {};
  for (const Tensor& p : params) {
    if (!requires_grad(p)) continue;
    if (grad_of_[p.id] >= 0) {
      spec.updates.push_back(grad(p));
    } else {
      all_outs.push_back(
          OutSpec{graph_.buffers[p.id].name + ".grad", p.shape, p.dtype, BufferKind::kGrad});
      created_params.push_back(p);
    }
  }
  std::vector<Tensor> created = emit(spec, all_outs);
  for (size_t i = 0; i < created_params.size(); ++i) {
    grad_of_[created_params[i].id] = created[outs.size() + i].id;
  }
  created.resize(outs.size());
  return created;
}

Graph Builder::finish(const Tensor& loss) {
  // The counts a quantized weight's bytes cannot tell (zoo.cc copies them).
  graph_.meta["param_count"] = param_count_;
  graph_.meta["trainable_param_count"] = trainable_count_;
  if (options_.forward_only) return std::move(graph_);  // no tape run, no step
  std::string saved_scope = std::exchange(scope_, std::string());
  // Seed dL/dL = 1 (what loss.backward() does).
  Tensor seed = emit1({.name = "loss.grad_seed", .type = "fill", .phase = Phase::kBackward},
                      {"loss.grad_seed", loss.shape, loss.dtype, BufferKind::kTemp});
  add_grad(loss, seed, "loss");
  // Run the tape backwards; closures may push nothing new.
  std::vector<std::function<void()>> tape = std::move(tape_);
  tape_.clear();
  for (auto it = tape.rbegin(); it != tape.rend(); ++it) (*it)();
  emit_optimizer();
  scope_ = std::move(saved_scope);
  // Accumulations into activation gradients, MoE's index_add_: versions
  // (Note [Buffer versions]).
  version_in_place_updates(graph_);
  return std::move(graph_);
}

void Builder::emit_optimizer() {
  // States per parameter (ZeRO, Rajbhandari et al. 2020, sec. 3.1: mixed
  // precision Adam keeps an fp32 master copy, momentum and variance = 12
  // bytes per parameter; fp32 training has no master copy).
  std::vector<std::string> states;
  if (mixed_precision()) states.push_back("master");
  switch (options_.optimizer) {
    case Optimizer::kSgd:
      break;
    case Optimizer::kMomentum:
      states.push_back("momentum");
      break;
    case Optimizer::kAdam:
    case Optimizer::kAdamW:
      states.push_back("exp_avg");
      states.push_back("exp_avg_sq");
      break;
  }
  // Flops per element of one step: SGD 2, momentum 4, Adam/AdamW ~12
  // (moment updates, bias correction, sqrt, divide, weight decay).
  double flops_per_element = 2;
  if (options_.optimizer == Optimizer::kMomentum) flops_per_element = 4;
  if (options_.optimizer == Optimizer::kAdam || options_.optimizer == Optimizer::kAdamW) {
    flops_per_element = 12;
  }
  std::string type(to_string(options_.optimizer));
  for (BufferId pid : params_) {
    Tensor p{pid, graph_.buffers[pid].shape.to_vector(), graph_.buffers[pid].dtype};
    Tensor g = grad(p);
    if (!g.valid()) continue;  // an unused parameter gets no step and no states
    std::vector<Tensor> updates;
    for (const std::string& s : states) {
      BufferId sid = new_buffer(graph_.buffers[pid].name + "." + s, p.shape, DType::kF32,
                                BufferKind::kOptimState);
      updates.push_back(Tensor{sid, p.shape, DType::kF32});
    }
    updates.push_back(p);
    emit({.name = graph_.buffers[pid].name + ".step",
          .type = type,
          .phase = Phase::kOptimizer,
          .in = {g},
          .updates = updates,
          .flops = flops_per_element * static_cast<double>(p.numel())},
         {});
  }
}

}  // namespace memwall::models
