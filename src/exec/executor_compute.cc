// The executor's compute (executor_impl.h): ops through the dispatcher,
// versions, arguments and results, CPU steps and applies, plan offsets,
// and the comparison with eager PyTorch.
#include "executor_impl.h"

#include <fmt/ranges.h>

namespace memwall::exec::detail {

// The storage an argument naming `root` means in this op: the version the
// op creates or reads (Note [Buffer versions]).
const c10::Storage& Executor::resolve(int64_t root) {
  const auto it = std::find_if(current_.begin(), current_.end(),
                               [&](const auto& p) { return p.first == root; });
  if (it == current_.end()) {
    run_failed("{}: op {} names buffer {} ({}), which it neither reads nor writes", where(),
               graph_.ops[op_].name, root, graph_.buffers[root].name);
  }
  return it->second;
}

at::Tensor Executor::argument_tensor(const TensorRef& ref) {
  if (ref.local) {
    if (locals_ == nullptr || static_cast<size_t>(ref.buffer) >= locals_->size() ||
        !static_cast<bool>((*locals_)[ref.buffer])) {
      run_failed("{}: op {} reads local {} before a step of it made it", where(),
                 graph_.ops[op_].name, ref.buffer);
    }
    return view_of((*locals_)[ref.buffer], ref);
  }
  return view_of(resolve(ref.buffer), ref);
}

void Executor::set_setting(const std::string& name, double value) {
  if (!setting_names_.contains(name)) {
    bad_input("the step reads no setting \"{}\" (it reads {})", name,
              setting_names_.empty() ? std::string("none")
                                     : fmt::format("{}", fmt::join(setting_names_, ", ")));
  }
  settings_[name] = value;
}

c10::IValue Executor::expression(const CompiledArg& a) {
  size_t next = 0;
  const double v = evaluate(
      a.expr.tree, [&](size_t i) { return argument_tensor(a.expr.items.at(i)).item<double>(); },
      settings_, next);
  switch (a.expr_as) {
    case CompiledArg::As::kDouble:
      return c10::IValue(v);
    case CompiledArg::As::kScalar:
      return c10::IValue(c10::Scalar(v));
    case CompiledArg::As::kWrappedTensor:
      return c10::IValue(wrapped_number(c10::Scalar(v), host_allocator()));
  }
  return c10::IValue(v);
}

void Executor::push_arguments(const CompiledCall& call, torch::jit::Stack& stack) {
  for (const CompiledArg& a : call.args) {
    switch (a.kind) {
      case CompiledArg::Kind::kConstant:
        stack.push_back(a.constant);
        break;
      case CompiledArg::Kind::kTensor:
        stack.emplace_back(argument_tensor(*a.tensors.front()));
        break;
      case CompiledArg::Kind::kTensorList: {
        c10::List<at::Tensor> list;
        for (const auto& t : a.tensors) list.push_back(argument_tensor(*t));
        stack.emplace_back(std::move(list));
        break;
      }
      case CompiledArg::Kind::kOptionalTensorList: {
        c10::List<std::optional<at::Tensor>> list;
        for (const auto& t : a.tensors) {
          list.push_back(t ? std::optional<at::Tensor>(argument_tensor(*t)) : std::nullopt);
        }
        stack.emplace_back(std::move(list));
        break;
      }
      case CompiledArg::Kind::kExpr:
        stack.push_back(expression(a));
        break;
    }
  }
}

// One operator through the dispatcher, below autograd (the executor's
// tensors carry no autograd state). A kernel's error is RunFailed naming
// `op`; an out-of-memory error is left to the caller.
void Executor::call_op(const Op& op, const CompiledCall& call, torch::jit::Stack& stack,
                       bool cpu_step) {
  try {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    push_arguments(call, stack);
    call.handle->callBoxed(stack);
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    const std::string line = what.substr(0, what.find('\n'));
    if (cpu_step) run_failed("{}: the CPU step {} failed: {}", where(), op.name, line);
    run_failed("{}: {} ({}) failed: {}", where(), op.name, call.name, line);
  }
}

void Executor::need_on_device(BufferId b) {
  Slot& s = slots_[b];
  if (!static_cast<bool>(s.device)) {
    run_failed("{}: op {} reads {} ({}), which is not on the device", where(), graph_.ops[op_].name,
               b, graph_.buffers[b].name);
  }
  if (!torch_stream_waits_for(s.arrived)) wait(s.arrived);  // Note [Device-side waits]
}

// Note [Recomputed randomness]: a random op (tagged nondeterministic_seeded)
// saves the CPU generator's state before its first run; a recompute runs
// from that state and then puts the generator back, so its mask is the
// first run's and the draws after it are eager's.
void Executor::run_op(const Step& s, RunResult& result) {
  op_ = s.op;
  const Op& op = graph_.ops[s.op];
  const CompiledCall& call = calls_[s.op];
  if (call.kind == CompiledCall::Kind::kApply) {
    apply(call, result);
    return;
  }
  if (call.kind == CompiledCall::Kind::kComm) {
    collective(s, result);
    return;
  }
  if ((s.on == Tier::kHost) != (call.kind == CompiledCall::Kind::kCpuStep)) {
    run_failed("{}: op {} ({}) runs on the {} here, which the executor does not do", where(),
               op.name, call.name, s.on == Tier::kHost ? "host" : "device");
  }
  if (call.kind == CompiledCall::Kind::kCpuStep) {
    cpu_step(op, call, result);
    return;
  }
  if (call.kind == CompiledCall::Kind::kSequence) {
    device_sequence(op, call, result);
    return;
  }
  current_.clear();
  // Note [Plan offsets at run time]: where the outputs go, before anything
  // of this op is allocated.
  if (has_arena()) expect_outputs(call);
  // Versions first: the op writes the next version in place, or into a
  // copy of the previous one when the plan still needs that (Note
  // [In-place steps]).
  for (const BufferId v : op.out) {
    const BufferId prev = graph_.buffers[v].version_of;
    if (prev == kNoBuffer) continue;
    need_on_device(prev);
    Slot& from = slots_[prev];
    // With offsets, a version the layout put elsewhere than its
    // predecessor's memory runs there: copied, and the predecessor freed.
    const std::optional<uint64_t> pinned =
        static_cast<bool>(slots_[v].device) ? std::nullopt : begin_stay(v);
    const bool moves = pinned && from.device.data() != memory_->arena_address(*pinned);
    if (in_place_[step_] && !static_cast<bool>(slots_[v].device) && !moves) {
      slots_[v].device = std::move(from.device);
      from.device = c10::Storage();
    } else {
      slots_[v].device = device_storage(graph_.buffers[v].bytes, "copying the version", v, pinned);
      device_bytes_.copy(slots_[v].device.mutable_data(), from.device.data(),
                         graph_.buffers[v].bytes);
      if (in_place_[step_]) from.device = c10::Storage();
    }
    slots_[v].arrived = runtime::CopyEvent();
    current_.emplace_back(roots_[v], slots_[v].device);
  }
  const auto add_current = [&](BufferId b) {
    const int64_t root = roots_[b];
    if (std::any_of(current_.begin(), current_.end(),
                    [&](const auto& p) { return p.first == root; })) {
      return;
    }
    need_on_device(b);
    current_.emplace_back(root, slots_[b].device);
  };
  for (const BufferId b : op.in) add_current(b);
  for (const BufferId b : op.updates) {
    // Note [Replaying side effects]: a recompute updates scratch copies of
    // persistent state (batch norm's running statistics), not the state.
    if (s.kind == StepKind::kRecompute && is_persistent(graph_.buffers[b].kind)) {
      need_on_device(b);
      c10::Storage copy = scratch_storage(graph_.buffers[b].bytes, b);
      device_bytes_.copy(copy.mutable_data(), slots_[b].device.data(), graph_.buffers[b].bytes);
      current_.emplace_back(roots_[b], copy);
      continue;
    }
    add_current(b);
  }
  // Random ops replay their first run's draws (Note [Recomputed randomness]).
  at::Generator gen = generator();
  std::optional<at::Tensor> resume;
  if (call.rng) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    // The saved states are host values (5,056 bytes each), not device memory.
    host_mode(true);
    if (s.kind == StepKind::kCompute) {
      rng_[s.op] = gen.get_state();
    } else if (const auto it = rng_.find(s.op); it != rng_.end()) {
      resume = gen.get_state();
      gen.set_state(it->second);
    }
    host_mode(false);
  }
  torch::jit::Stack stack;
  stack.reserve(call.args.size());
  const Clock::time_point t = Clock::now();
  const uint64_t queued = cuda_ ? cuda_->mark() : 0;
  try {
    call_op(op, call, stack);
    end_call();
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory("{}: {} {}: {}", where(), s.kind == StepKind::kCompute ? "compute" : "recompute",
                  op.name, e.what_without_backtrace());
  }
  const double called = seconds_since(t);
  const bool timed = s.kind == StepKind::kCompute && iteration_ > 0;
  // On a GPU the events tell (timed_op, once the span is in the trace).
  if (!cuda_) {
    kernel_s_ += called;
    // Note [Kernel timing]: the op's call as it ran in the step.
    if (!kernel_times_.empty() && timed) kernel_times_[s.op].push_back(called);
  }
  if (resume) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*resume);
  }
  const uint64_t ran = cuda_ ? cuda_->mark() : 0;
  bind_results(op, call, stack);
  if (s.kind == StepKind::kCompute &&
      std::find(op.out.begin(), op.out.end(), loss_.buffer) != op.out.end()) {
    loss_value_ = view_of(slots_[loss_.buffer].device, loss_).item<double>();
  }
  span(result, kCompute, std::chrono::duration<double>(t - iteration_start_).count(), now_s());
  if (cuda_) timed_op(s.op, queued, ran, timed, result);
}

// A host buffer as a storage (not owned: the slot keeps the memory).
c10::Storage Executor::on_host(BufferId b) {
  Slot& slot = slots_[b];
  if (!slot.host) {
    run_failed("{}: the CPU step {} needs {} ({}) on the host, where it is not", where(),
               graph_.ops[op_].name, b, graph_.buffers[b].name);
  }
  wait(slot.host_ready);
  return c10::Storage(c10::Storage::use_byte_size_t(), graph_.buffers[b].bytes,
                      c10::DataPtr(slot.host.data(), c10::Device(c10::kCPU)), nullptr, false);
}

// Note [CPU step calls]: the step's ops on host copies, the parameter's
// references meaning its master copy; then the new values to `update` or
// to the parameter's own host copy.
void Executor::cpu_step(const Op& op, const CompiledCall& call, RunResult& result) {
  current_.clear();
  for (const BufferId b : op.in) current_.emplace_back(roots_[b], on_host(b));
  for (const BufferId b : op.updates) current_.emplace_back(roots_[b], on_host(b));
  // A 16-bit parameter's step that only overwrites it from the trace's own
  // fp32 master writes its new values straight into `update`.
  const bool into_update = call.master < 0 && call.update >= 0;
  if (into_update) {
    Slot& u = slots_[call.update];
    u.host = host_buffer(graph_.buffers[call.update].bytes, call.update);
    u.host_ready = runtime::CopyEvent();
  }
  if (call.master >= 0 || into_update) {
    const c10::Storage as = on_host(into_update ? call.update : call.master);
    std::erase_if(current_, [&](const auto& p) { return p.first == roots_[call.param]; });
    current_.emplace_back(roots_[call.param], as);
  }
  const double start = now_s();
  const Clock::time_point t = Clock::now();
  run_parts(op, call, /*on_host=*/true);
  kernel_s_ += seconds_since(t);
  const BufferId from = call.master >= 0 ? call.master : call.param;
  const uint64_t bytes = graph_.buffers[from].bytes;
  if (into_update) {
    // The step wrote the new values itself.
  } else if (call.update >= 0) {
    Slot& u = slots_[call.update];
    u.host = host_buffer(graph_.buffers[call.update].bytes, call.update);
    u.host_ready = runtime::CopyEvent();
    put_values(kHostBytes, slots_[from].host.data(), bytes, graph_.buffers[call.update],
               u.host.data());
  } else if (from != call.param) {
    put_values(kHostBytes, slots_[from].host.data(), bytes, graph_.buffers[call.param],
               slots_[call.param].host.data());
  }
  current_.clear();
  span(result, kHostCpu, start, now_s());
}

// The ops of a CPU step or a fused device step in order, over its
// temporaries (freed on return); on the host, kernels' memory comes from
// the host meanwhile.
void Executor::run_parts(const Op& op, const CompiledCall& call, bool on_host) {
  std::vector<c10::Storage> locals(call.locals);
  locals_ = &locals;
  host_mode(on_host);
  const auto done = [this](void*) {
    host_mode(false);
    locals_ = nullptr;
  };
  const std::unique_ptr<void, decltype(done)> restore(this, done);
  for (const CompiledCall& part : call.steps) {
    torch::jit::Stack stack;
    call_op(op, part, stack, /*cpu_step=*/on_host);
    take_results(op, part, stack);
  }
}

// A fused optimizer step on the device (memwall::sequence, Note [Device
// chunks] in swap/offload.cc): its ops in order, their temporaries in the
// op's workspace.
void Executor::device_sequence(const Op& op, const CompiledCall& call, RunResult& result) {
  current_.clear();
  const auto bind = [this](BufferId b) {
    need_on_device(b);
    current_.emplace_back(roots_[b], slots_[b].device);
  };
  std::for_each(op.in.begin(), op.in.end(), bind);
  std::for_each(op.updates.begin(), op.updates.end(), bind);
  if (has_arena()) expect_outputs(call);  // no results: the workspace only
  const Clock::time_point t = Clock::now();
  const uint64_t queued = cuda_ ? cuda_->mark() : 0;
  try {
    run_parts(op, call, /*on_host=*/false);
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory("{}: compute {}: {}", where(), op.name, e.what_without_backtrace());
  }
  end_call();
  if (!cuda_) kernel_s_ += seconds_since(t);
  const uint64_t ran = cuda_ ? cuda_->mark() : 0;
  current_.clear();
  span(result, kCompute, std::chrono::duration<double>(t - iteration_start_).count(), now_s());
  if (cuda_) timed_op(op_, queued, ran, /*timed=*/false, result);
}

// memwall::apply: the device copy of a parameter's new values.
void Executor::apply(const CompiledCall& call, RunResult& result) {
  const double start = now_s();
  need_on_device(call.from);
  need_on_device(call.to);
  put_values(device_bytes_, slots_[call.from].device.data(), graph_.buffers[call.from].bytes,
             graph_.buffers[call.to], slots_[call.to].device.mutable_data());
  span(result, kCompute, start, now_s());
}

// Note [Plan offsets at run time]: an output the kernel made elsewhere
// (its scratch of the same size took the offset first) moves to its own.
//
// Note [Scratch before its output]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The arena gives an op's expected output offset to the first allocation
// of the output's size. Some kernels allocate a temporary of that size
// first: oneDNN's convolutions compute into a buffer of their own layout
// and reorder into the output allocated after it. The output then lands
// elsewhere and is copied to its offset after the call, outside the
// kernel: on MobileNetV2 b8 keep-all, 181 such copies and 51 MB a step,
// 2.2 ms more of the executor's own time per step than the same plan
// without offsets (5.5 against 3.3 ms), which op_overhead, measured
// without offsets, does not predict. The executor learns from the copy how
// many allocations of that size came first (DeviceMemory::
// scratch_before) and, when the op runs again, the arena lets that
// many go elsewhere before the offset is taken, the first of them where
// the output landed (when that is free and clear of the op's outputs): the
// same placements with the roles of the two buffers swapped, and no copy.
// (Placed by the scratch rules instead, the first temporary could take the
// front of a workspace that the rest filled to the byte: U-Net's arena grew
// 9.7% that way.) Kernels allocate in the same order each call; where one
// does not, the output is copied as before and the count learnt again.
// Before a step has learnt it, the count is the trace's (Op::scratch_first,
// from the scratch rules' order of allocations, python/memwall/tracer/scratch.py):
// ResNet-18's layer4.0.conv1 backward makes its blocked input and a strided
// buffer before its input gradient, and its blocked weight and blocked
// weight gradient before its weight gradient; each took the output's offset
// in the first step and a laid-out remat plan at 90% found no room for the
// gradients ("no room in the plan's arena of 266417762 bytes for 4718592
// bytes", RunExec.StridedConvolutionBackwardRunsItsFirstStep).
// Where what was learnt leaves an allocation no room (a grouped
// convolution_backward makes two scratch buffers of its input gradient's
// size first, and the first went where the gradient had landed, which the
// second needs), it borrows a pending output's offset of its size, as in
// the step that learnt it (DeviceMemory::allocate): regnet_y_400mf's
// keep-all plan ran its first iteration and stopped in the second before
// (RunExec.GroupedConvolutionKeepAllRunsEveryIteration).
bool Executor::learn_if_misplaced(BufferId b, const c10::Storage& storage) {
  const std::optional<uint64_t> at = slots_[b].stay_at;
  if (!has_arena() || slots_[b].stay_began != serial_ || !at ||
      storage.data() == memory_->arena_address(*at)) {
    return false;
  }
  // Note [Scratch before its output]: next time, let that many of its size
  // go elsewhere first.
  if (const auto scratch = memory_->scratch_before(storage.data(), graph_.buffers[b].bytes)) {
    scratch_first_[b] = *scratch;
  }
  return true;
}

// Note [Outputs on each other's offsets]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The arena gives an expected offset to the first free allocation of the
// output's size, so two outputs of one size can land on each other's
// offsets, or one on the other's: ResNet-18 b4 at 64x64 on an AVX2 CPU,
// whose layer3 downsampling convolution_backward returns an input and a
// weight gradient of 131,072 B each after five scratch buffers of that
// size. Moving one to its offset then meets the other there. Outputs are
// placed once the call's stack is gone (their slots hold the only
// references, so a moved output frees its old range); when an offset is
// taken, all of the call's misplaced outputs go through host memory: first
// all copied out and released, then each made at its offset. Both happen
// only in a step that learns where the op's scratch goes (Note [Scratch
// before its output]).
void Executor::place_outputs(const std::vector<BufferId>& misplaced) {
  bool all_free = true;
  for (const BufferId b : misplaced) {
    make_room(*slots_[b].stay_at, graph_.buffers[b].bytes);
    all_free = all_free && memory_->range_free(*slots_[b].stay_at, graph_.buffers[b].bytes);
  }
  const auto copy_bytes = [&](BufferId b, const c10::Storage& s) {
    return std::min<uint64_t>(graph_.buffers[b].bytes, s.nbytes());
  };
  // b made at its offset, with `bytes` of `src` in it.
  const auto place = [&](BufferId b, const void* src, uint64_t bytes) {
    c10::Storage moved = device_storage(graph_.buffers[b].bytes, "placing", b, slots_[b].stay_at);
    device_bytes_.copy(moved.mutable_data(), src, bytes);  // from the device or staged
    slots_[b].device = std::move(moved);
  };
  if (all_free) {
    for (const BufferId b : misplaced) {
      const c10::Storage old = slots_[b].device;  // freed once placed
      place(b, old.data(), copy_bytes(b, old));
    }
  } else {
    std::vector<std::vector<char>> staged(misplaced.size());
    for (size_t i = 0; i < misplaced.size(); ++i) {
      const c10::Storage& s = slots_[misplaced[i]].device;
      staged[i].resize(copy_bytes(misplaced[i], s));
      device_bytes_.copy(staged[i].data(), s.data(), staged[i].size());
      slots_[misplaced[i]].device = c10::Storage();
    }
    for (size_t i = 0; i < misplaced.size(); ++i) {
      place(misplaced[i], staged[i].data(), staged[i].size());
    }
  }
  outputs_moved_ += misplaced.size();
}

// Note [Plan offsets at run time]: the offsets of the buffers the call
// returns, in its order.
void Executor::expect_outputs(const CompiledCall& call) {
  std::vector<DeviceMemory::ExpectedOutput> outputs;
  for (const ResultRef& r : call.results) {
    if (r.local || r.id < 0) continue;
    // A recompute's output still on the device is kept (no new stay); an
    // empty one occupies no address.
    const auto b = static_cast<BufferId>(r.id);
    if (graph_.buffers[b].bytes == 0) continue;
    if (kept_on_device(b)) continue;
    if (const std::optional<uint64_t> at = begin_stay(b)) {
      make_room(*at, graph_.buffers[b].bytes);
      outputs.push_back({*at, graph_.buffers[b].bytes, scratch_first_[b]});
    }
  }
  std::pair<uint64_t, uint64_t> workspace{0, 0};
  std::span<const uint64_t> scratch_at;
  if (contiguous_workspace(graph_.ops[op_]) > 0 && !plan_.workspace_offsets.empty()) {
    // Note [Offsets per stay]: the op's run k has its own workspace.
    if (const auto at = workspace_offset(plan_, op_, op_runs_[op_]++)) {
      // Note [Workspace span]: the scratch's range holds all of it at once.
      const uint64_t span = contiguous_workspace(graph_.ops[op_]);
      workspace = {*at, span};
      scratch_at = graph_.ops[op_].scratch_at;  // Note [Scratch offsets]
      make_room(*at, span);
    }
  }
  memory_->expect(std::move(outputs), workspace, scratch_at);
}

// The returned tensors' storages to the buffers (or a CPU step's locals)
// the call record names, in order.
void Executor::take_results(const Op& op, const CompiledCall& call, torch::jit::Stack& stack) {
  size_t index = 0;
  std::vector<BufferId> misplaced;  // Note [Outputs on each other's offsets]
  const auto take = [&](const at::Tensor& tensor) {
    if (index >= call.results.size()) {
      run_failed("{}: {} in {} returned more tensors than its trace ({})", where(), call.name,
                 op.name, call.results.size());
    }
    const ResultRef r = call.results[index++];
    if (r.local) {
      if (locals_ != nullptr && static_cast<size_t>(r.id) < locals_->size()) {
        (*locals_)[r.id] = tensor.storage();
      }
      return;
    }
    const int64_t b = r.id;
    // A recompute's output still on the device keeps its storage, at its
    // offset: the call's new one (the same bits, made wherever a kernel's
    // allocation went) goes with the stack.
    if (b >= 0 && kept_on_device(static_cast<BufferId>(b))) return;
    if (b >= 0) {
      slots_[b].device = tensor.storage();
      slots_[b].arrived = runtime::CopyEvent();
      if (learn_if_misplaced(static_cast<BufferId>(b), slots_[b].device)) {
        misplaced.push_back(static_cast<BufferId>(b));
      }
    }
  };
  // Python sees an undefined tensor as None: not a result.
  for (const c10::IValue& v : stack) {
    if (v.isTensor()) {
      if (v.toTensor().defined()) take(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        if (t.defined()) take(t);
      }
    }
  }
  stack.clear();
  if (!misplaced.empty()) place_outputs(misplaced);
}

void Executor::bind_results(const Op& op, const CompiledCall& call, torch::jit::Stack& stack) {
  take_results(op, call, stack);
  // Outputs the call does not make (a kernel's workspace the trace kept
  // as a buffer): memory of their size.
  for (const BufferId b : op.out) {
    if (graph_.buffers[b].version_of == kNoBuffer && !static_cast<bool>(slots_[b].device)) {
      slots_[b].device = device_storage(graph_.buffers[b].bytes, "creating", b, begin_stay(b));
    }
  }
  current_.clear();
}

void Executor::compare_with_eager(RunResult& result) {
  engine_->synchronize();
  const EagerReference& eager = *values_->eager;
  // Each rank's own losses (Note [Data-parallel reference] in memwall/values/reference.py).
  result.eager_losses = !eager.rank_losses.empty()
                            ? eager.rank_losses.at(static_cast<size_t>(options_.rank))
                            : eager.losses;
  bool equal = true;
  std::string difference;
  const int steps = std::min<int>(options_.steps, static_cast<int>(result.eager_losses.size()));
  if (eager.ranks != options_.ranks) {
    equal = false;
    difference = fmt::format("eager's reference is for {} data-parallel ranks, this run has {}",
                             eager.ranks, options_.ranks);
  } else if (options_.steps != eager.steps) {
    equal = false;
    difference = fmt::format("eager ran {} steps, this run {}", eager.steps, options_.steps);
  }
  for (int k = 0; k < steps && equal; ++k) {
    if (result.steps[k].loss != result.eager_losses[k]) {
      equal = false;
      difference = fmt::format("the loss of step {} is {:.17g}, eager's {:.17g}", k + 1,
                               result.steps[k].loss, result.eager_losses[k]);
    }
  }
  const std::vector<uint8_t> here = compared_here();
  for (const auto& [id, whole] : eager.states.buffers()) {
    if (!equal) break;
    if (id < 0 || static_cast<size_t>(id) >= graph_.buffers.size()) continue;
    const Buffer& b = graph_.buffers[id];
    if (!here[id]) continue;
    const std::span<const std::byte> bytes = sharded(b, whole.size()) ? slice_of(b, whole) : whole;
    std::vector<std::byte> mine(bytes.size());
    const Slot& s = slots_[id];
    if (static_cast<bool>(s.device)) {
      device_bytes_.copy(mine.data(), s.device.data(),
                         std::min<size_t>(mine.size(), s.device.nbytes()));
    } else if (s.host) {
      std::memcpy(mine.data(), s.host.data(), mine.size());
    } else if (s.nvme) {
      read_nvme(*s.nvme, mine.data(), mine.size());
    }
    if (std::memcmp(mine.data(), bytes.data(), bytes.size()) != 0) {
      size_t differ = 0, first = bytes.size();
      for (size_t i = 0; i < bytes.size(); ++i) {
        if (mine[i] != bytes[i]) {
          ++differ;
          first = std::min(first, i);
        }
      }
      equal = false;
      difference = fmt::format(
          "{} differs from eager's after {} steps: {} of {} bytes, the "
          "first at byte {}",
          graph_.buffers[id].name, options_.steps, differ, bytes.size(), first);
    }
  }
  result.eager_equal = equal;
  result.eager_difference = difference;
}

// Note [Data-parallel reference] (memwall/values/reference.py): eager's module buffers
// (batch norm's running statistics) are rank 0's; every rank has its
// parameters and optimizer states (or its shards of them) to compare.
// Per buffer, once per run (ops x their updates).
std::vector<uint8_t> Executor::compared_here() const {
  std::vector<uint8_t> here(graph_.buffers.size(), options_.rank == 0 ? 1 : 0);
  if (options_.rank == 0) return here;
  for (const Buffer& b : graph_.buffers) here[b.id] = b.kind == BufferKind::kParam ? 1 : 0;
  for (const Op& op : graph_.ops) {
    if (op.phase != Phase::kOptimizer) continue;
    for (BufferId u : op.updates) here[u] = 1;
  }
  return here;
}

}  // namespace memwall::exec::detail
