// Builder: records a training iteration op by op, the way autograd does.
//
// Note [Tape]
// Every forward layer function emits its forward op(s) and pushes a backward
// closure onto a tape. finish() seeds the loss gradient, runs the closures in
// reverse order (a valid reverse topological order, since forward ops are
// emitted in execution order), then emits one optimizer op per parameter.
// A closure reads exactly the tensors the real backward kernel reads; those
// reads are what keeps a forward activation alive until backward, so the
// graph's liveness alone yields "activations saved for backward".
//
// Note [Gradient accumulation]
// A tensor consumed twice (residual streams, tied embeddings) receives two
// gradients. The first becomes its gradient buffer; later ones are added in
// place (an op with `updates`), as PyTorch's autograd InputBuffer does when it
// owns the buffer; finish() turns updates of activations and temps into
// versions (Note [Buffer versions] in src/graph/versions.cc). Parameter
// gradients follow the same rule: the first weight-gradient op creates
// `<param>.grad`, later uses accumulate into it (gradients stay updates).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/models/zoo.h"

namespace memwall::models {

// A tensor: a buffer viewed with a shape. Views share their base's buffer.
struct Tensor {
  BufferId id = -1;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  int64_t numel() const;
  uint64_t bytes() const;  // numel * dtype size (checked)
  bool valid() const { return id >= 0; }
};

// Description of one op for Builder::emit.
struct OpSpec {
  std::string name;  // relative to the current scope
  std::string type;
  Phase phase = Phase::kForward;
  std::vector<Tensor> in;
  std::vector<Tensor> updates;
  uint64_t workspace = 0;
  double flops = 0;
  // Memory traffic; negative means "default": every input and output once,
  // every updated buffer read and written.
  double bytes = -1;
};

class Builder {
 public:
  Builder(std::string graph_name, const ModelOptions& options);

  const ModelOptions& options() const { return options_; }
  // Activation / 16-bit parameter dtype: bf16, fp16 or fp32 per precision.
  DType compute_dtype() const;
  bool mixed_precision() const { return options_.precision != Precision::kFp32; }

  // ---- names ----
  // RAII scope: names created inside are prefixed "<scope>.".
  class Scope {
   public:
    Scope(Builder& b, std::string_view name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Builder& b_;
    size_t saved_size_;
  };
  Scope scope(std::string_view name) { return Scope(*this, name); }
  std::string qualified(std::string_view name) const;

  // ---- buffers ----
  // A model input (token ids, images, labels): kind input, no gradient.
  Tensor input(std::string_view name, std::vector<int64_t> shape, DType dtype);
  // A parameter in compute dtype; gets a grad and optimizer states, unless
  // the base model is frozen (LoRA): then it has neither.
  Tensor param(std::string_view name, std::vector<int64_t> shape);
  // A LoRA adapter's parameter: trainable even when the base is frozen.
  Tensor adapter_param(std::string_view name, std::vector<int64_t> shape);
  // A frozen base weight stored in another form than one compute-dtype
  // tensor (NF4 data and its quantization constants): kind param, no
  // gradient. `elements` is how many of the model's parameters it stores
  // (0 for the constants), for param_count().
  Tensor stored_weight(std::string_view name, std::vector<int64_t> shape, DType dtype,
                       int64_t elements);
  // Whether base parameters are frozen (LoRA or quantized base weights).
  bool base_frozen() const;
  // Number of scalar parameters registered so far (a quantized weight
  // counts its elements, not its bytes), and how many of them train.
  int64_t param_count() const { return param_count_; }
  int64_t trainable_param_count() const { return trainable_count_; }

  // ---- ops ----
  // Emits an op creating one output per `outs` entry (name, shape, dtype,
  // kind) and returns them. Output requires_grad is set by the caller via
  // mark_requires_grad (forward outputs derived from a tensor that requires
  // grad should be marked).
  struct OutSpec {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    BufferKind kind = BufferKind::kActivation;
  };
  std::vector<Tensor> emit(const OpSpec& spec, const std::vector<OutSpec>& outs);
  // Convenience: one output.
  Tensor emit1(const OpSpec& spec, const OutSpec& out) { return emit(spec, {out})[0]; }

  // A view of t with another shape (same buffer, same number of elements).
  Tensor view(const Tensor& t, std::vector<int64_t> shape) const;

  // ---- autograd ----
  bool requires_grad(const Tensor& t) const;
  void mark_requires_grad(const Tensor& t);
  // Outputs require grad iff any input does (the usual rule).
  void propagate_requires_grad(std::initializer_list<Tensor> inputs,
                               std::initializer_list<Tensor> outputs);
  // Pushes a backward closure (Note [Tape]).
  void on_backward(std::function<void()> fn) { tape_.push_back(std::move(fn)); }
  // The gradient of t; valid() is false when no gradient reached t.
  Tensor grad(const Tensor& t) const;
  // Delivers gradient g to t (Note [Gradient accumulation]). Ignored when t
  // does not require grad or g is invalid. `name` names the accumulation op.
  void add_grad(const Tensor& t, const Tensor& g, std::string_view name);
  // Emits a backward op that also produces the gradients of `params`
  // (weight-gradient kernels): a parameter's first contribution creates its
  // "<param>.grad" buffer, later ones update it in place (AccumulateGrad).
  // Parameters that do not require grad are skipped. Returns the tensors
  // created for `outs` (not the parameter gradients).
  std::vector<Tensor> emit_with_param_grads(OpSpec spec, const std::vector<OutSpec>& outs,
                                            const std::vector<Tensor>& params);

  // Runs the tape from `loss` (a scalar) and emits the optimizer step.
  Graph finish(const Tensor& loss);

  const Graph& graph() const { return graph_; }

 private:
  BufferId new_buffer(std::string name, std::vector<int64_t> shape, DType dtype, BufferKind kind);
  void emit_optimizer();

  ModelOptions options_;
  Graph graph_;
  std::string scope_;
  std::vector<char> requires_grad_;  // per buffer
  std::vector<BufferId> grad_of_;    // per buffer: its gradient buffer or -1
  std::vector<BufferId> params_;     // registration order
  std::vector<std::function<void()>> tape_;
  int64_t param_count_ = 0;
  int64_t trainable_count_ = 0;
};

// Element count of a shape, checked against overflow (throws Error).
int64_t checked_numel(std::span<const int64_t> shape);

// Shorthands shared by the layer and model files.
inline constexpr BufferKind kAct = BufferKind::kActivation;
inline constexpr BufferKind kTmp = BufferKind::kTemp;
inline double numel_d(const Tensor& t) { return static_cast<double>(t.numel()); }

}  // namespace memwall::models
