// The executor (include/memwall/exec/executor.h, docs/exec.md): runs a
// plan's steps on real tensors, one iteration after another, and measures
// device memory, copies, NVMe traffic and time. This file: set-up, the
// iterations and their measurements, the library's entry point.
#include "executor_impl.h"

#include <filesystem>

#include <fmt/ranges.h>

namespace memwall::exec::detail {

Executor::Executor(const Graph& graph, const Plan& plan, ValuesFrom from, const RunOptions& options,
                   bool session)
    : graph_(graph), plan_(plan), options_(options), session_(session) {
  set_up_ranks();
  check_device();
  check_runnable();
  try {
    check_plan_graph(plan, graph);
    validate_plan(plan, graph);
  } catch (const Error& e) {
    bad_input("{}", e.what());
  }
  if (from.dir != nullptr) {
    try {
      files_ =
          std::make_unique<ValueFiles>(*from.dir, options.rank, options.ranks, options.check_eager);
    } catch (const Error& e) {
      bad_input("{}", e.what());
    }
    values_ = &files_->values();
  } else {
    values_ = from.memory;
    check_values();
  }
  roots_.resize(graph.buffers.size());
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    BufferId r = static_cast<BufferId>(b);
    while (graph.buffers[r].version_of != kNoBuffer) r = graph.buffers[r].version_of;
    roots_[b] = r;
  }
  compile(c10::GetCPUAllocator());
  for (const Buffer& b : graph.buffers) {
    if (!exists_before_first_op(b.kind) || (session_ && b.kind == BufferKind::kInput)) continue;
    const std::span<const std::byte> v = value_of(b);
    // A rank's slice of a shard may be shorter than it (the last rank's).
    if (v.size() > b.bytes || (v.size() < b.bytes && options.ranks == 1)) {
      bad_input(
          "{}: buffer {} ({}) has {} bytes of values, the graph says {}: the values are "
          "of another trace",
          values_->source, b.id, b.name, v.size(), b.bytes);
    }
  }
  in_place_ = in_place_steps(graph, plan);
  // Debugging the memory model: live and peak device bytes after each plan
  // step of the first iteration ("STEP LIVE PEAK" lines), each after the
  // step's allocations and frees (DeviceMemory::log_allocations);
  // scripts/measure-scratch.py reads it (docs/cost-model.md, "Kernel scratch").
  if (const char* log = std::getenv("MEMWALL_EXEC_MEMORY_LOG"); log != nullptr && *log) {
    memory_log_ = std::fopen(log, "w");
  }
  slots_.resize(graph.buffers.size());
  scratch_first_.assign(graph.buffers.size(), {});
  // Note [Scratch before its output]: what the trace's scratch rules say,
  // until a step learns otherwise.
  for (const Op& op : graph.ops) {
    for (size_t i = 0; i < op.scratch_first.size() && i < op.out.size(); ++i) {
      scratch_first_[op.out[i]] = {.skip = op.scratch_first[i], .from_rules = true};
    }
  }
}

void Executor::begin(RunResult& result) {
  result_ = &result;
  const int threads = values_->threads;
  if (threads > 0) at::set_num_threads(threads);
  result.threads = at::get_num_threads();
  result.budget = plan_.budget;
  if (options_.device == "cuda") {
    set_up_cuda(result);
  } else {
    engine_ = runtime::make_emulated_copy_engine();
    result.device = engine_->name();
    device_ = engine_->make_device(plan_.budget);
    allocator_ = alloc::make_allocator(options_.policy, *device_, {});
    memory_ = std::make_unique<DeviceMemory>(*allocator_, plan_.budget);
    if (!plan_.offsets.empty()) memory_->use_arena(plan_.budget);
    host_ = std::make_unique<runtime::HostPool>(host_capacity(), /*pin=*/true);
  }
  result.arena = !plan_.offsets.empty();
  if (options_.time_kernels) kernel_times_.resize(graph_.ops.size());
  connect();  // before the device's allocator is installed: gloo's threads and buffers
  DeviceMemory::Installed installed(memory_.get());
  try {
    set_generator_state();
    reserve_host();
    bind_persistent();
  } catch (...) {
    release_all();
    throw;
  }
}

void Executor::run(RunResult& result) {
  begin(result);
  {
    DeviceMemory::Installed installed(memory_.get());
    try {
      for (int k = 0; k < options_.steps; ++k) result.steps.push_back(iteration(k, result));
      if (options_.check_eager) compare_with_eager(result);
      if (options_.time_kernels) result.kernel_seconds = median_kernel_times();
    } catch (...) {
      // A failed run frees its memory only once no copy reads or writes it.
      release_all();
      throw;
    }
    release_all();
  }
  end();
}

// A session's step reads its inputs from `inputs` only (value_of: a
// rank's micro-batch), never the values the session began from.
StepMeasure Executor::step(const ValueSet& inputs, RunResult& result) {
  for (const Buffer& b : graph_.buffers) {
    if (b.kind != BufferKind::kInput) continue;
    const auto v = inputs.named(b.name);
    if (!v) bad_input("the batch has no tensor for the graph's input {} (buffer {})", b.name, b.id);
    if (v->size() != b.bytes) {
      bad_input("the batch's {} has {} bytes, the planned step's {}: a batch of another shape",
                b.name, v->size(), b.bytes);
    }
  }
  if (!session_values_) session_values_ = std::make_unique<StepValues>();
  session_values_->inputs = inputs;
  values_ = session_values_.get();
  DeviceMemory::Installed installed(memory_.get());
  try {
    return iteration(steps_run_++, result);
  } catch (...) {
    released_ = true;
    release_all();
    throw;
  }
}

void Executor::end() {
  if (memory_log_ != nullptr) {
    if (memory_ != nullptr) memory_->log_allocations(nullptr);  // a failed first iteration left it
    std::fclose(memory_log_);
    memory_log_ = nullptr;
  }
}

// Note [Kernel timing]: the median over iterations is what an iteration
// costs an op, robust to the odd preempted call on a shared machine. Taken
// in place, not by calling the op again: a repeated call finds its inputs
// in the caches and its thread pool awake, and measured Adam's elementwise
// ops 1.5-2.5x and convolutions 10-15% faster than in the step (ResNet-18
// on a 2-vCPU EPYC).
std::vector<double> Executor::median_kernel_times() {
  std::vector<double> out(graph_.ops.size(), -1.0);
  for (size_t op = 0; op < kernel_times_.size(); ++op) {
    std::vector<double>& t = kernel_times_[op];
    if (t.empty()) continue;
    const auto mid = t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2);
    std::nth_element(t.begin(), mid, t.end());
    out[op] = *mid;
  }
  return out;
}

void Executor::check_runnable() {
  const nlohmann::json& meta = graph_.meta;
  const nlohmann::json calls = meta.value("calls", nlohmann::json());
  if (!calls.is_object()) {
    bad_input(
        "graph \"{}\" carries no call records, so it can be planned and simulated but "
        "not run: trace the model with `memwall trace` (zoo graphs are not runnable)",
        graph_.name);
  }
  if (!calls.value("runnable", false)) {
    bad_input("graph \"{}\" cannot be replayed: {}", graph_.name,
              calls.value("why", std::string("its trace says so")));
  }
  // The values and eager's reference come from the kernels that run.
  const std::string kernels = meta.value("kernels", std::string("unknown"));
  if (options_.device == "cuda" &&
      (kernels != "cuda" || meta.value("device", std::string()) != "cuda")) {
    bad_input(
        "graph \"{}\" was traced on the {} for {} kernels; a CUDA run needs a trace made on "
        "the GPU (`python -m memwall --values DIR --device cuda`, or let `memwall run "
        "--device cuda` trace)",
        graph_.name, meta.value("device", std::string("unknown device")), kernels);
  }
  if (options_.device != "cuda" && kernels != "cpu") {
    bad_input(
        "graph \"{}\" was traced for {} kernels; the emulated device runs the CPU's "
        "(trace with --kernels cpu, or let `memwall run --torchvision/--script` trace)",
        graph_.name, kernels);
  }
  if (!meta.contains("loss")) bad_input("graph \"{}\" does not name its loss", graph_.name);
  for (const Op& op : graph_.ops) {
    if (op.call.empty() && !(op.phase == Phase::kComm && options_.ranks > 1)) {
      bad_input("op {} ({}) has no call record, so it cannot run", op.id, op.name);
    }
  }
}

// Values in memory have no files to be missing from: what the run needs
// of them is checked here, as ValueFiles checks a directory's.
void Executor::check_values() const {
  const StepValues& v = *values_;
  if (v.rng.empty()) bad_input("{}: no generator state (StepValues::rng)", v.source);
  if (options_.check_eager && !v.eager) {
    bad_input("{}: no eager reference to check the run with (StepValues::eager)", v.source);
  }
  if (options_.rank > 0 && !v.inputs && !session_) {
    bad_input("{}: no micro-batch for rank {} (trace the values for {} ranks)", v.source,
              options_.rank, options_.ranks);
  }
}

// A buffer's starting bytes: by name (rewrites renumber buffers), by id
// for values without names, a master's from its parameter.
std::span<const std::byte> Executor::value_of(const Buffer& b) const {
  std::span<const std::byte> whole;
  if (const auto it = master_of_.find(b.id); it != master_of_.end()) {
    whole = value_of(graph_.buffers[it->second]);
  } else if (const auto mine = values_->inputs && b.kind == BufferKind::kInput
                                   ? values_->inputs->named(b.name)
                                   : std::nullopt) {
    // A rank's micro-batch (Note [Data-parallel reference] in memwall/values/reference.py).
    return *mine;
  } else if (const auto v = values_->state.named(b.name)) {
    whole = *v;
  } else {
    whole = values_->state.buffer(b.id);
  }
  return sharded(b, whole.size()) ? slice_of(b, whole) : whole;
}

uint64_t Executor::host_capacity() const {
  if (options_.host_bytes > 0) return options_.host_bytes;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4 * 3;
}

// `host`: the allocator of wrapped scalars (host values, not device memory).
void Executor::compile(c10::Allocator* host) {
  calls_.reserve(graph_.ops.size());
  for (const Op& op : graph_.ops) {
    if (op.phase == Phase::kComm) {
      CompiledCall comm;
      comm.kind = CompiledCall::Kind::kComm;
      comm.name = op.type;
      calls_.push_back(std::move(comm));
      continue;
    }
    nlohmann::json call;
    try {
      call = nlohmann::json::parse(op.call);
    } catch (const std::exception& e) {
      bad_input("op {} ({}): call record is not JSON: {}", op.id, op.name, e.what());
    }
    calls_.push_back(compile_call(
        call, op.name, host,
        options_.device == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU)));
    if (stage_ >= 1 && op.phase == Phase::kOptimizer) shard_views(calls_.back(), op);
  }
  loss_ = tensor_ref(graph_.meta["loss"]);
  // Note [CPU step calls]: a parameter's fp32 master copy, which memwall's
  // offload rewrite adds, starts as the parameter.
  for (const CompiledCall& call : calls_) {
    if (call.kind == CompiledCall::Kind::kCpuStep && call.master >= 0) {
      master_of_[call.master] = call.param;
    }
    add_setting_names(call, setting_names_);  // Note [Tracked settings]
  }
}

// The CPU generator's state, or on a GPU the CUDA generator's seed and
// offset (Note [The CUDA run]); a host tensor either way.
void Executor::set_generator_state() {
  const std::span<const std::byte> rng = values_->rng;
  c10::Storage bytes(c10::Storage::use_byte_size_t(), rng.size(), host_allocator(), false);
  std::memcpy(bytes.mutable_data(), rng.data(), rng.size());
  const int64_t n = static_cast<int64_t>(rng.size());
  const at::Tensor state = view_of(bytes, TensorRef{-1, false, {n}, {1}, 0, c10::ScalarType::Byte});
  at::Generator gen = generator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    bad_input("{}: the values' generator state ({} bytes) is not the {} generator's: {}",
              values_->source, rng.size(), cuda_ ? "CUDA" : "CPU", what.substr(0, what.find('\n')));
  }
}

runtime::HostBuffer Executor::host_buffer(uint64_t bytes, BufferId b) {
  runtime::HostBuffer h;
  try {
    h = host_->allocate(std::max<uint64_t>(bytes, 1));
  } catch (const std::exception& e) {
    out_of_memory("the host pool cannot hold {} ({} bytes): {}", graph_.buffers[b].name, bytes,
                  e.what());
  }
  if (!h) {
    out_of_memory("the host pool cannot hold {} ({} bytes): {} in use", graph_.buffers[b].name,
                  bytes, host_->stats().in_use_bytes);
  }
  return h;
}

// Plan::host_reserved (Note [Host buffers of the published systems] in
// swap/deepspeed_buffers.cc): what the plan counts on the host beside its
// buffers is held here too, so a run's host peak is the predicted one.
void Executor::reserve_host() {
  for (const HostReserve& r : plan_.host_reserved) {
    runtime::HostBuffer h;
    try {
      h = host_->allocate(std::max<uint64_t>(r.bytes, 1));
    } catch (const std::exception& e) {
      out_of_memory("the host pool cannot hold the plan's {} ({} bytes): {}", r.what, r.bytes,
                    e.what());
    }
    if (!h) {
      out_of_memory("the host pool cannot hold the plan's {} ({} bytes): {} in use", r.what,
                    r.bytes, host_->stats().in_use_bytes);
    }
    host_reserved_.push_back(std::move(h));
  }
}

namespace {

// `bytes` at `to` become `value` and then zeros: the tail past a shorter
// value is a shard's padding (the last rank's slice); a whole value leaves
// nothing to zero, so a step's batch is copied once. `to` is memory that
// `with` reaches (Note [Device bytes]).
void fill_value(const DeviceBytes& with, std::byte* to, uint64_t bytes,
                std::span<const std::byte> value) {
  if (!value.empty()) with.copy(to, value.data(), value.size());
  if (value.size() < bytes) with.zero(to + value.size(), bytes - value.size());
}

}  // namespace

// Places a buffer that exists before the first op where the plan starts it.
void Executor::bind(const Buffer& b) {
  const std::span<const std::byte> v = value_of(b);
  Slot& s = slots_[b.id];
  const auto it = plan_.placement.find(b.id);
  const Tier tier = it == plan_.placement.end() ? Tier::kDevice : it->second;
  if (tier == Tier::kDevice) {
    s.device = device_storage(b.bytes, "placing", b.id, begin_stay(b.id));
    fill_value(device_bytes_, static_cast<std::byte*>(s.device.mutable_data()), b.bytes, v);
  } else {
    runtime::HostBuffer h = host_buffer(b.bytes, b.id);
    fill_value(kHostBytes, static_cast<std::byte*>(h.data()), b.bytes, v);
    if (tier == Tier::kHost) {
      s.host = std::move(h);
    } else {
      try {
        s.nvme = store_on_nvme(s, h.data(), b.bytes);
      } catch (const std::exception& e) {
        run_failed("placing {} on NVMe: {}", b.name, e.what());
      }
    }
  }
}

void Executor::bind_persistent() {
  for (const Buffer& b : graph_.buffers) {
    if (is_persistent(b.kind)) bind(b);
  }
}

StepMeasure Executor::iteration(int k, RunResult& result) {
  ++serial_;
  op_runs_.assign(graph_.ops.size(), 0);
  // Note [Offsets per stay]: stays count per iteration; what is on the
  // device already (persistent state) is in its first stay.
  for (Slot& s : slots_) {
    s.stays = static_cast<bool>(s.device) ? 1 : 0;
    s.stay_began = 0;
  }
  for (const Buffer& b : graph_.buffers) {
    if (b.kind == BufferKind::kInput) bind(b);
  }
  StepMeasure m;
  const runtime::CopyStats copies_before = engine_->stats();
  const runtime::NvmeStats nvme_before = nvme_ ? nvme_->stats() : runtime::NvmeStats{};
  if (memory_ != nullptr) memory_->reset_peak();
  if (cuda_) {
    cuda_->reset_peak();
    cuda_->clear_marks();
    timed_ops_.clear();
    iteration_mark_ = cuda_->mark();
  }
  kernel_s_ = wait_s_ = nvme_s_ = comm_s_ = 0;
  outputs_moved_ = 0;
  iteration_ = k;
  const Clock::time_point start = Clock::now();
  iteration_start_ = start;
  tracing_ = options_.record_trace && k + 1 == options_.steps;
  if (tracing_) {
    result.events.clear();
    result.memory.clear();
  }
  const bool log_memory = memory_log_ != nullptr && memory_ != nullptr && k == 0;
  if (log_memory) memory_->log_allocations(memory_log_);
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    step_ = i;
    const bool log = log_memory;
    const uint64_t before = log ? memory_->peak_bytes() : 0;
    if (log) memory_->reset_peak();
    ++serial_;
    execute(plan_.steps[i], result);
    retire_finished();
    if (tracing_) {
      result.memory.push_back({now_s(), device_live_bytes(), host_->stats().in_use_bytes});
    }
    if (log) {
      std::fprintf(memory_log_, "%zu %llu %llu\n", i,
                   static_cast<unsigned long long>(memory_->live_bytes()),
                   static_cast<unsigned long long>(memory_->peak_bytes()));
      memory_->merge_peak(before);
    }
  }
  if (log_memory) memory_->log_allocations(nullptr);
  const Clock::time_point waited = Clock::now();
  engine_->synchronize();
  if (cuda_) cuda_->synchronize();  // the step ends when its kernels do
  leaving_.clear();
  wait_s_ += seconds_since(waited);
  close_copy_spans(result, /*all=*/true);
  m.step_time_s = seconds_since(start);
  if (cuda_) resolve_timed_ops(result);
  m.loss = loss_value_;
  measure_device(m);
  m.host_peak_bytes = host_->stats().peak_in_use_bytes;
  const runtime::CopyStats copies = engine_->stats();
  const auto h2d = static_cast<size_t>(runtime::CopyDirection::kHostToDevice);
  const auto d2h = static_cast<size_t>(runtime::CopyDirection::kDeviceToHost);
  m.h2d_bytes = copies.bytes[h2d] - copies_before.bytes[h2d];
  m.d2h_bytes = copies.bytes[d2h] - copies_before.bytes[d2h];
  // NVMe operations run synchronously: busy and waited on alike.
  m.copy_busy_s = copies.busy_seconds[h2d] - copies_before.busy_seconds[h2d] +
                  copies.busy_seconds[d2h] - copies_before.busy_seconds[d2h] + nvme_s_;
  if (nvme_) {
    const runtime::NvmeStats n = nvme_->stats();
    m.nvme_read_bytes = n.bytes_read - nvme_before.bytes_read;
    m.nvme_write_bytes = n.bytes_written - nvme_before.bytes_written;
  }
  m.kernel_time_s = kernel_s_;
  m.outputs_moved = outputs_moved_;
  m.wait_time_s = wait_s_;
  m.comm_time_s = comm_s_;
  m.overhead_s = std::max(0.0, m.step_time_s - kernel_s_ - wait_s_ - comm_s_);
  m.overlap = m.copy_busy_s > 0 ? std::clamp(1.0 - wait_s_ / m.copy_busy_s, 0.0, 1.0) : 0.0;
  end_iteration();
  return m;
}

// What the next iteration does not need: every non-persistent copy.
void Executor::end_iteration() {
  for (const Buffer& b : graph_.buffers) {
    if (is_persistent(b.kind)) continue;
    Slot& s = slots_[b.id];
    s.device = c10::Storage();
    s.host.reset();
    drop_nvme(s);
  }
}

void Executor::release_all() {
  engine_->synchronize();
  leaving_.clear();
  for (Slot& s : slots_) {
    s.device = c10::Storage();
    s.host.reset();
    drop_nvme(s);
  }
  host_reserved_.clear();
}

void Executor::retire_finished() {
  std::erase_if(leaving_, [](const Leaving& l) { return l.until.done(); });
}

// A span of the trace: open copies end when the executor sees them done.
// Note [Copies that preempt the issuing thread]: on a 2-vCPU machine the
// emulated engine's worker, woken by copy_async, often takes the issuing
// thread's core and finishes a small copy before that thread runs again.
// Such a copy ends now, when it is first seen done, not at its issue: the
// trace showed MobileNetV2's swap-outs as empty spans followed by ~90 us
// gaps on the compute lane.
void Executor::span(RunResult& result, Lane lane, double start, double end,
                    runtime::CopyEvent until) {
  if (!tracing_) return;
  const bool done = until.done();
  if (done && (lane == kH2D || lane == kD2H)) end = now_s();
  result.events.push_back({lane, static_cast<uint32_t>(step_), start, end});
  if (done) return;
  open_copies_.emplace_back(result.events.size() - 1, std::move(until));
}

void Executor::close_copy_spans(RunResult& result, bool all) {
  if (open_copies_.empty()) return;
  const double now = now_s();
  std::erase_if(open_copies_, [&](const auto& open) {
    if (!all && !open.second.done()) return false;
    result.events[open.first].end_s = now;
    return true;
  });
}

void Executor::wait(const runtime::CopyEvent& e) {
  if (e.done()) return;
  const Clock::time_point t = Clock::now();
  e.wait();
  wait_s_ += seconds_since(t);
}

std::string Executor::where() const {
  return fmt::format("iteration {}, plan step {}", iteration_ + 1, step_);
}

void Executor::execute(const Step& s, RunResult& result) {
  switch (s.kind) {
    case StepKind::kCompute:
    case StepKind::kRecompute:
      run_op(s, result);
      break;
    case StepKind::kSwapOut:
      swap_out(s.buf, s.to, result);
      break;
    case StepKind::kSwapIn:
      if (s.to == Tier::kHost) {
        nvme_to_host(s.buf, result);
      } else {
        swap_in(s.buf, result);
      }
      break;
    case StepKind::kFree:
      free_buffer(s.buf);
      break;
  }
  close_copy_spans(result, /*all=*/false);
}

}  // namespace memwall::exec::detail

namespace memwall::exec {
namespace {

void run(const Graph& graph, const Plan& plan, detail::ValuesFrom values, const RunOptions& options,
         RunResult& result) {
  detail::Executor executor(graph, plan, values, options);
  executor.run(result);
}

// The status of a run: its errors as one line each (docs/exec.md).
template <typename Run>
Status guarded(RunResult& result, std::string& error, Run&& run_it) {
  try {
    result = RunResult();
    run_it();
    return Status::kOk;
  } catch (...) {
    return detail::status_of_current_exception(error, /*out_of_memory_apart=*/false);
  }
}

}  // namespace
}  // namespace memwall::exec

extern "C" __attribute__((visibility("default"))) memwall::exec::Status memwall_exec_run_v5(
    const memwall::Graph& graph, const memwall::Plan& plan, const std::string& values,
    const memwall::exec::RunOptions& options, memwall::exec::RunResult& result,
    std::string& error) {
  return memwall::exec::guarded(
      result, error, [&] { memwall::exec::run(graph, plan, {.dir = &values}, options, result); });
}

extern "C" __attribute__((visibility("default"))) memwall::exec::Status memwall_exec_run_values_v2(
    const memwall::Graph& graph, const memwall::Plan& plan, const memwall::exec::StepValues& values,
    const memwall::exec::RunOptions& options, memwall::exec::RunResult& result,
    std::string& error) {
  return memwall::exec::guarded(result, error, [&] {
    memwall::exec::run(graph, plan, {.memory = &values}, options, result);
  });
}
