// The executor (include/memwall/exec/executor.h, docs/exec.md): runs a
// plan's steps on real tensors, one iteration after another, and measures
// device memory, copies, NVMe traffic and time.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/TensorImpl.h>

#include "call.h"
#include "device_memory.h"
#include "exec_error.h"
#include "memwall/alloc/allocator.h"
#include "memwall/exec/executor.h"
#include "memwall/graph/error.h"
#include "memwall/plan/in_place.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/nvme_engine.h"
#include "values.h"

namespace memwall::exec {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Where a buffer's copies are (the simulator's three tiers).
struct Slot {
  c10::Storage device;         // defined while on the device
  runtime::CopyEvent arrived;  // the swap_in copy that fills `device`
  runtime::HostBuffer host;
  runtime::CopyEvent host_ready;  // the swap_out copy that fills `host`
  std::optional<runtime::Extent> nvme;
};

// The simulator's resource lanes (sim/simulator.h, Resource), which the
// trace of a run shares.
enum Lane : int { kCompute = 0, kH2D = 1, kD2H = 2, kNvmeRead = 3, kNvmeWrite = 4, kHostCpu = 5 };

// Device memory whose copy out is still running: freed when it ends.
struct Leaving {
  c10::Storage storage;
  runtime::HostBuffer host;
  runtime::CopyEvent until;
};

at::Tensor view_of(const c10::Storage& storage, const TensorRef& ref) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage),
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                   c10::scalarTypeToTypeMeta(ref.dtype));
  impl->set_sizes_and_strides(ref.sizes, ref.strides, ref.offset);
  return at::Tensor(std::move(impl));
}

class Executor {
 public:
  Executor(const Graph& graph, const Plan& plan, const std::string& values,
           const RunOptions& options)
      : graph_(graph), plan_(plan), options_(options) {
    check_runnable();
    try {
      check_plan_graph(plan, graph);
      validate_plan(plan, graph);
    } catch (const Error& e) {
      bad_input("{}", e.what());
    }
    state_ = std::make_unique<ValueFile>(values + "/state.json", values + "/state.bin");
    if (options.check_eager) {
      eager_ = std::make_unique<ValueFile>(values + "/eager.json", values + "/eager.bin");
    }
    roots_.resize(graph.buffers.size());
    for (size_t b = 0; b < graph.buffers.size(); ++b) {
      BufferId r = static_cast<BufferId>(b);
      while (graph.buffers[r].version_of != kNoBuffer) r = graph.buffers[r].version_of;
      roots_[b] = r;
    }
    find_masters();
    for (const Buffer& b : graph.buffers) {
      if (!exists_before_first_op(b.kind)) continue;
      const std::span<const std::byte> v = value_of(b);
      if (v.size() != b.bytes) {
        bad_input(
            "{}: buffer {} ({}) has {} bytes of values, the graph says {}: the values are "
            "of another trace",
            values, b.id, b.name, v.size(), b.bytes);
      }
    }
    in_place_ = in_place_steps(graph, plan);
    // Debugging the memory model: live and peak device bytes after each plan
    // step of the first iteration ("STEP LIVE PEAK" lines).
    if (const char* log = std::getenv("MEMWALL_EXEC_MEMORY_LOG"); log != nullptr && *log) {
      memory_log_ = std::fopen(log, "w");
    }
    slots_.resize(graph.buffers.size());
  }

  RunResult run() {
    RunResult result;
    const int threads = state_->index().value("threads", 0);
    if (threads > 0) at::set_num_threads(threads);
    result.threads = at::get_num_threads();
    engine_ = runtime::make_emulated_copy_engine();
    result.device = engine_->name();
    result.budget = plan_.budget;
    device_ = engine_->make_device(plan_.budget);
    allocator_ = alloc::make_allocator(options_.policy, *device_, {});
    memory_ = std::make_unique<DeviceMemory>(*allocator_, plan_.budget);
    if (!plan_.offsets.empty()) memory_->use_arena(plan_.budget);
    result.arena = !plan_.offsets.empty();
    host_ = std::make_unique<runtime::HostPool>(host_capacity(), /*pin=*/true);
    compile();
    {
      DeviceMemory::Installed installed(*memory_);
      set_generator_state();
      bind_persistent();
      for (int k = 0; k < options_.steps; ++k) result.steps.push_back(iteration(k, result));
      if (eager_) compare_with_eager(result);
      release_all();
    }
    if (memory_log_ != nullptr) std::fclose(memory_log_);
    return result;
  }

 private:
  // ---- Set-up ---------------------------------------------------------------------------
  void check_runnable() {
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
    if (meta.value("kernels", std::string()) != "cpu") {
      bad_input(
          "graph \"{}\" was traced for {} kernels; the emulated device runs the CPU's "
          "(trace with --kernels cpu, or let `memwall run --torchvision/--script` trace)",
          graph_.name, meta.value("kernels", std::string("unknown")));
    }
    if (!meta.contains("loss")) bad_input("graph \"{}\" does not name its loss", graph_.name);
    for (const Op& op : graph_.ops) {
      if (op.call.empty()) {
        bad_input(
            "op {} ({}) has no call record: ops that memwall's planners add (ZeRO's CPU "
            "step, gathers) cannot run yet",
            op.id, op.name);
      }
    }
  }

  // Note [CPU step calls]: a parameter's fp32 master copy, which memwall's
  // offload rewrite adds, starts as the parameter.
  void find_masters() {
    for (const Op& op : graph_.ops) {
      if (op.call.find("memwall::cpu_step") == std::string::npos) continue;
      const nlohmann::json call = nlohmann::json::parse(op.call, nullptr, false);
      if (call.is_discarded() || !call.contains("master") || call["master"].is_null()) continue;
      master_of_[call["master"].at("t").get<BufferId>()] = call.at("param").at("t").get<BufferId>();
    }
  }

  // A buffer's starting bytes: by name (rewrites renumber buffers), by id
  // for values without names, a master's from its parameter.
  std::span<const std::byte> value_of(const Buffer& b) const {
    if (const auto it = master_of_.find(b.id); it != master_of_.end()) {
      return value_of(graph_.buffers[it->second]);
    }
    if (const auto v = state_->named(b.name)) return *v;
    return state_->buffer(b.id);
  }

  uint64_t host_capacity() const {
    if (options_.host_bytes > 0) return options_.host_bytes;
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGE_SIZE);
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4 * 3;
  }

  void compile() {
    calls_.reserve(graph_.ops.size());
    for (const Op& op : graph_.ops) {
      nlohmann::json call;
      try {
        call = nlohmann::json::parse(op.call);
      } catch (const std::exception& e) {
        bad_input("op {} ({}): call record is not JSON: {}", op.id, op.name, e.what());
      }
      calls_.push_back(compile_call(call, op.name, memory_->host_allocator()));
    }
    loss_ = TensorRef{};
    const nlohmann::json& loss = graph_.meta["loss"];
    loss_.buffer = loss.at("t").get<int64_t>();
    loss_.sizes = loss.at("size").get<std::vector<int64_t>>();
    loss_.strides = loss.at("stride").get<std::vector<int64_t>>();
    loss_.offset = loss.at("offset").get<int64_t>();
    loss_.dtype = c10::ScalarType::Float;
    for (const c10::ScalarType st :
         {c10::ScalarType::Double, c10::ScalarType::Half, c10::ScalarType::BFloat16}) {
      if (loss.at("dtype") == c10::toString(st)) loss_.dtype = st;
    }
  }

  void set_generator_state() {
    const std::span<const std::byte> rng = state_->blob(state_->index().at("rng"));
    c10::Storage bytes(c10::Storage::use_byte_size_t(), rng.size(), memory_->host_allocator(),
                       false);
    std::memcpy(bytes.mutable_data(), rng.data(), rng.size());
    const int64_t n = static_cast<int64_t>(rng.size());
    const at::Tensor state =
        view_of(bytes, TensorRef{-1, false, {n}, {1}, 0, c10::ScalarType::Byte});
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }

  c10::Storage device_storage(uint64_t bytes, const char* why, BufferId b) {
    try {
      if (const auto it = plan_.offsets.find(b); it != plan_.offsets.end()) {
        return c10::Storage(c10::Storage::use_byte_size_t(), bytes,
                            memory_->allocate_at(it->second, bytes), memory_.get(), false);
      }
      return c10::Storage(c10::Storage::use_byte_size_t(), bytes, memory_.get(), false);
    } catch (const c10::OutOfMemoryError& e) {
      run_failed("{} {} ({}): {}", why, b, graph_.buffers[b].name, e.what_without_backtrace());
    }
  }

  runtime::HostBuffer host_buffer(uint64_t bytes, BufferId b) {
    runtime::HostBuffer h = host_->allocate(bytes);
    if (!h) {
      run_failed("the host pool cannot hold {} ({} bytes): {} in use", graph_.buffers[b].name,
                 bytes, host_->stats().in_use_bytes);
    }
    return h;
  }

  runtime::NvmeEngine& nvme() {
    if (!nvme_) {
      runtime::NvmeOptions o;
      o.dirs = options_.nvme_dirs;
      if (o.dirs.empty()) {
        const char* tmp = std::getenv("TMPDIR");
        o.dirs.push_back(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
      }
      uint64_t total = 0;
      for (const Buffer& b : graph_.buffers) total += b.bytes + o.block_size;
      o.capacity = total;
      if (!options_.nvme_faults.empty()) o.faults = options_.nvme_faults;
      try {
        nvme_ = std::make_unique<runtime::NvmeEngine>(o);
      } catch (const std::exception& e) {
        run_failed("the NVMe engine cannot start: {}", e.what());
      }
    }
    return *nvme_;
  }

  // Places a buffer that exists before the first op where the plan starts it.
  void bind(const Buffer& b) {
    const std::span<const std::byte> v = value_of(b);
    Slot& s = slots_[b.id];
    const auto it = plan_.placement.find(b.id);
    const Tier tier = it == plan_.placement.end() ? Tier::kDevice : it->second;
    if (tier == Tier::kDevice) {
      s.device = device_storage(b.bytes, "placing", b.id);
      if (!v.empty()) std::memcpy(s.device.mutable_data(), v.data(), v.size());
    } else {
      runtime::HostBuffer h = host_buffer(std::max<uint64_t>(b.bytes, 1), b.id);
      if (!v.empty()) std::memcpy(h.data(), v.data(), v.size());
      if (tier == Tier::kHost) {
        s.host = std::move(h);
      } else {
        try {
          s.nvme = nvme().write(h.data(), b.bytes);
        } catch (const std::exception& e) {
          run_failed("placing {} on NVMe: {}", b.name, e.what());
        }
      }
    }
  }

  void bind_persistent() {
    for (const Buffer& b : graph_.buffers) {
      if (is_persistent(b.kind)) bind(b);
    }
  }

  // ---- One iteration --------------------------------------------------------------------
  StepMeasure iteration(int k, RunResult& result) {
    for (const Buffer& b : graph_.buffers) {
      if (b.kind == BufferKind::kInput) bind(b);
    }
    StepMeasure m;
    const runtime::CopyStats copies_before = engine_->stats();
    const runtime::NvmeStats nvme_before = nvme_ ? nvme_->stats() : runtime::NvmeStats{};
    memory_->reset_peak();
    kernel_s_ = wait_s_ = nvme_s_ = 0;
    iteration_ = k;
    const Clock::time_point start = Clock::now();
    iteration_start_ = start;
    tracing_ = options_.record_trace && k + 1 == options_.steps;
    if (tracing_) {
      result.events.clear();
      result.memory.clear();
    }
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      step_ = i;
      const bool log = memory_log_ != nullptr && k == 0;
      const uint64_t before = memory_->peak_bytes();
      if (log) memory_->reset_peak();
      execute(plan_.steps[i], result);
      retire_finished();
      if (tracing_) {
        result.memory.push_back({now_s(), memory_->live_bytes(), host_->stats().in_use_bytes});
      }
      if (log) {
        std::fprintf(memory_log_, "%zu %llu %llu\n", i,
                     static_cast<unsigned long long>(memory_->live_bytes()),
                     static_cast<unsigned long long>(memory_->peak_bytes()));
        memory_->merge_peak(before);
      }
    }
    const Clock::time_point waited = Clock::now();
    engine_->synchronize();
    leaving_.clear();
    wait_s_ += seconds_since(waited);
    close_copy_spans(result, /*all=*/true);
    m.step_time_s = seconds_since(start);
    m.loss = loss_value_;
    m.device_peak_bytes = memory_->peak_bytes();
    m.device_peak_allocated_bytes = memory_->peak_allocated_bytes();
    m.device_peak_reserved_bytes = memory_->stats().peak_reserved_bytes;
    m.arena_bytes = memory_->arena_high_water();
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
    m.wait_time_s = wait_s_;
    m.overhead_s = std::max(0.0, m.step_time_s - kernel_s_ - wait_s_);
    m.overlap = m.copy_busy_s > 0 ? std::clamp(1.0 - wait_s_ / m.copy_busy_s, 0.0, 1.0) : 0.0;
    end_iteration();
    return m;
  }

  // What the next iteration does not need: every non-persistent copy.
  void end_iteration() {
    for (const Buffer& b : graph_.buffers) {
      if (is_persistent(b.kind)) continue;
      Slot& s = slots_[b.id];
      s.device = c10::Storage();
      s.host.reset();
      if (s.nvme) {
        nvme().free(*s.nvme);
        s.nvme.reset();
      }
    }
  }

  void release_all() {
    engine_->synchronize();
    leaving_.clear();
    for (Slot& s : slots_) {
      s.device = c10::Storage();
      s.host.reset();
      if (s.nvme && nvme_) nvme_->free(*s.nvme);
      s.nvme.reset();
    }
  }

  void retire_finished() {
    std::erase_if(leaving_, [](const Leaving& l) { return l.until.done(); });
  }

  double now_s() const { return seconds_since(iteration_start_); }

  // A span of the trace: open copies end when the executor sees them done.
  void span(RunResult& result, Lane lane, double start, double end,
            runtime::CopyEvent until = runtime::CopyEvent()) {
    if (!tracing_) return;
    result.events.push_back({lane, static_cast<uint32_t>(step_), start, end});
    if (until.done()) return;
    open_copies_.emplace_back(result.events.size() - 1, std::move(until));
  }

  void close_copy_spans(RunResult& result, bool all) {
    if (open_copies_.empty()) return;
    const double now = now_s();
    std::erase_if(open_copies_, [&](const auto& open) {
      if (!all && !open.second.done()) return false;
      result.events[open.first].end_s = now;
      return true;
    });
  }

  void wait(const runtime::CopyEvent& e) {
    if (e.done()) return;
    const Clock::time_point t = Clock::now();
    e.wait();
    wait_s_ += seconds_since(t);
  }

  std::string where() const {
    return fmt::format("iteration {}, plan step {}", iteration_ + 1, step_);
  }

  void execute(const Step& s, RunResult& result) {
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

  // ---- Copies ---------------------------------------------------------------------------
  void swap_out(BufferId b, Tier to, RunResult& result) {
    Slot& s = slots_[b];
    const uint64_t bytes = graph_.buffers[b].bytes;
    if (!static_cast<bool>(s.device)) {
      if (to == Tier::kNvme && s.host) {  // host -> NVMe write-back
        wait(s.host_ready);
        const double t = now_s();
        s.nvme = write_nvme(s, s.host.data(), bytes);
        span(result, kNvmeWrite, t, now_s());
        s.host.reset();
        return;
      }
      run_failed("{}: swap_out of {} ({}), which is not on the device", where(), b,
                 graph_.buffers[b].name);
    }
    wait(s.arrived);
    runtime::HostBuffer h = host_buffer(std::max<uint64_t>(bytes, 1), b);
    const double issued = now_s();
    const runtime::CopyEvent copied = engine_->copy_async(h.data(), s.device.data(), bytes,
                                                          runtime::CopyDirection::kDeviceToHost);
    span(result, kD2H, issued, issued, copied);
    if (to == Tier::kNvme) {
      wait(copied);
      const double t = now_s();
      s.nvme = write_nvme(s, h.data(), bytes);
      span(result, kNvmeWrite, t, now_s());
      s.device = c10::Storage();
      return;  // the bounce buffer goes with h
    }
    leaving_.push_back({std::move(s.device), runtime::HostBuffer(), copied});
    s.device = c10::Storage();
    s.host = std::move(h);
    s.host_ready = copied;
  }

  // Writes a buffer's bytes to NVMe, in place of an older copy (a model
  // state written back after its CPU step).
  runtime::Extent write_nvme(Slot& s, const void* data, uint64_t bytes) {
    if (s.nvme) {
      nvme().free(*s.nvme);
      s.nvme.reset();
    }
    const Clock::time_point t = Clock::now();
    try {
      runtime::Extent e = nvme().write(data, bytes);
      wait_s_ += seconds_since(t);
      nvme_s_ += seconds_since(t);
      return e;
    } catch (const std::exception& e) {
      run_failed("{}: NVMe write failed: {}", where(), e.what());
    }
  }

  void read_nvme(const runtime::Extent& extent, void* data, uint64_t bytes) {
    const Clock::time_point t = Clock::now();
    try {
      nvme().read(extent, data, bytes);
    } catch (const std::exception& e) {
      run_failed("{}: NVMe read failed: {}", where(), e.what());
    }
    wait_s_ += seconds_since(t);
    nvme_s_ += seconds_since(t);
  }

  void swap_in(BufferId b, RunResult& result) {
    Slot& s = slots_[b];
    const Buffer& buf = graph_.buffers[b];
    const bool persistent = is_persistent(buf.kind);
    s.device = device_storage(buf.bytes, "swap_in of", b);
    if (s.host) {
      wait(s.host_ready);
      const double issued = now_s();
      s.arrived = engine_->copy_async(s.device.mutable_data(), s.host.data(), buf.bytes,
                                      runtime::CopyDirection::kHostToDevice);
      span(result, kH2D, issued, issued, s.arrived);
      if (!persistent) {
        leaving_.push_back({c10::Storage(), std::move(s.host), s.arrived});
        s.host.reset();
      }
      return;
    }
    if (!s.nvme) {
      run_failed("{}: swap_in of {} ({}), which has no copy", where(), b, buf.name);
    }
    runtime::HostBuffer bounce = host_buffer(std::max<uint64_t>(buf.bytes, 1), b);
    const double read = now_s();
    read_nvme(*s.nvme, bounce.data(), buf.bytes);
    const double issued = now_s();
    span(result, kNvmeRead, read, issued);
    s.arrived = engine_->copy_async(s.device.mutable_data(), bounce.data(), buf.bytes,
                                    runtime::CopyDirection::kHostToDevice);
    span(result, kH2D, issued, issued, s.arrived);
    leaving_.push_back({c10::Storage(), std::move(bounce), s.arrived});
    if (!persistent) {
      nvme().free(*s.nvme);
      s.nvme.reset();
    }
  }

  void nvme_to_host(BufferId b, RunResult& result) {
    Slot& s = slots_[b];
    const Buffer& buf = graph_.buffers[b];
    if (!s.nvme) run_failed("{}: {} ({}) is not on NVMe", where(), b, buf.name);
    s.host = host_buffer(std::max<uint64_t>(buf.bytes, 1), b);
    const double t = now_s();
    read_nvme(*s.nvme, s.host.data(), buf.bytes);
    span(result, kNvmeRead, t, now_s());
    s.host_ready = runtime::CopyEvent();
    if (!is_persistent(buf.kind)) {
      nvme().free(*s.nvme);
      s.nvme.reset();
    }
  }

  void free_buffer(BufferId b) {
    Slot& s = slots_[b];
    if (static_cast<bool>(s.device)) {
      wait(s.arrived);
      s.device = c10::Storage();
      return;
    }
    s.host.reset();
    if (s.nvme) {
      nvme().free(*s.nvme);
      s.nvme.reset();
    }
  }

  // ---- Compute --------------------------------------------------------------------------
  // The storage an argument naming `root` means in this op: the version the
  // op creates or reads (Note [Buffer versions]).
  const c10::Storage& resolve(int64_t root) {
    const auto it = std::find_if(current_.begin(), current_.end(),
                                 [&](const auto& p) { return p.first == root; });
    if (it == current_.end()) {
      run_failed("{}: op {} names buffer {} ({}), which it neither reads nor writes", where(),
                 graph_.ops[op_].name, root, graph_.buffers[root].name);
    }
    return it->second;
  }

  at::Tensor argument_tensor(const TensorRef& ref) {
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

  c10::IValue expression(const CompiledArg& a) {
    size_t next = 0;
    const double v = evaluate(
        a.expr.tree, [&](size_t i) { return argument_tensor(a.expr.items.at(i)).item<double>(); },
        next);
    switch (a.expr_as) {
      case CompiledArg::As::kDouble:
        return c10::IValue(v);
      case CompiledArg::As::kScalar:
        return c10::IValue(c10::Scalar(v));
      case CompiledArg::As::kWrappedTensor:
        return c10::IValue(wrapped_number(c10::Scalar(v), memory_->host_allocator()));
    }
    return c10::IValue(v);
  }

  void push_arguments(const CompiledCall& call, torch::jit::Stack& stack) {
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

  void need_on_device(BufferId b) {
    Slot& s = slots_[b];
    if (!static_cast<bool>(s.device)) {
      run_failed("{}: op {} reads {} ({}), which is not on the device", where(),
                 graph_.ops[op_].name, b, graph_.buffers[b].name);
    }
    wait(s.arrived);
  }

  void run_op(const Step& s, RunResult& result) {
    op_ = s.op;
    const Op& op = graph_.ops[s.op];
    const CompiledCall& call = calls_[s.op];
    if (call.kind == CompiledCall::Kind::kApply) {
      apply(op, call, result);
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
    current_.clear();
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
      const auto pinned = plan_.offsets.find(v);
      const bool moves = memory_->has_arena() && pinned != plan_.offsets.end() &&
                         from.device.data() != memory_->arena_address(pinned->second);
      if (in_place_[step_] && !static_cast<bool>(slots_[v].device) && !moves) {
        slots_[v].device = std::move(from.device);
        from.device = c10::Storage();
      } else {
        slots_[v].device = device_storage(graph_.buffers[v].bytes, "copying the version", v);
        std::memcpy(slots_[v].device.mutable_data(), from.device.data(), graph_.buffers[v].bytes);
        if (in_place_[step_]) from.device = c10::Storage();
      }
      slots_[v].arrived = runtime::CopyEvent();
      current_.emplace_back(roots_[v], slots_[v].device);
    }
    std::vector<c10::Storage> scratch;
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
        c10::Storage copy = device_storage(graph_.buffers[b].bytes, "scratch state for", b);
        std::memcpy(copy.mutable_data(), slots_[b].device.data(), graph_.buffers[b].bytes);
        current_.emplace_back(roots_[b], copy);
        continue;
      }
      add_current(b);
    }
    // Random ops replay their first run's draws (Note [Recomputed randomness]).
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::optional<at::Tensor> resume;
    if (call.rng) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      if (s.kind == StepKind::kCompute) {
        rng_[s.op] = gen.get_state();
      } else if (const auto it = rng_.find(s.op); it != rng_.end()) {
        resume = gen.get_state();
        gen.set_state(it->second);
      }
    }
    torch::jit::Stack stack;
    stack.reserve(call.args.size());
    const Clock::time_point t = Clock::now();
    if (memory_->has_arena()) expect_outputs(call);
    try {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      push_arguments(call, stack);
      call.handle->callBoxed(stack);
      memory_->expect({});
    } catch (const c10::OutOfMemoryError& e) {
      run_failed("{}: {} {}: {}", where(), s.kind == StepKind::kCompute ? "compute" : "recompute",
                 op.name, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      run_failed("{}: {} ({}) failed: {}", where(), op.name, call.name,
                 what.substr(0, what.find('\n')));
    }
    kernel_s_ += seconds_since(t);
    if (resume) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(*resume);
    }
    bind_results(op, call, stack);
    if (s.kind == StepKind::kCompute &&
        std::find(op.out.begin(), op.out.end(), loss_.buffer) != op.out.end()) {
      loss_value_ = view_of(slots_[loss_.buffer].device, loss_).item<double>();
    }
    span(result, kCompute, std::chrono::duration<double>(t - iteration_start_).count(), now_s());
  }

  // A host buffer as a storage (not owned: the slot keeps the memory).
  c10::Storage on_host(BufferId b) {
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
  void cpu_step(const Op& op, const CompiledCall& call, RunResult& result) {
    current_.clear();
    for (const BufferId b : op.in) current_.emplace_back(roots_[b], on_host(b));
    for (const BufferId b : op.updates) current_.emplace_back(roots_[b], on_host(b));
    if (call.master >= 0) {
      const c10::Storage master = on_host(call.master);
      std::erase_if(current_, [&](const auto& p) { return p.first == roots_[call.param]; });
      current_.emplace_back(roots_[call.param], master);
    }
    std::vector<c10::Storage> locals(call.locals);
    locals_ = &locals;
    const double start = now_s();
    const Clock::time_point t = Clock::now();
    memory_->set_host_mode(true);
    try {
      for (const CompiledCall& part : call.steps) {
        torch::jit::Stack stack;
        {
          at::AutoDispatchBelowADInplaceOrView below_autograd;
          push_arguments(part, stack);
          part.handle->callBoxed(stack);
        }
        bind_part_results(op, part, stack);
      }
    } catch (const c10::Error& e) {
      memory_->set_host_mode(false);
      locals_ = nullptr;
      const std::string what = e.what_without_backtrace();
      run_failed("{}: the CPU step {} failed: {}", where(), op.name,
                 what.substr(0, what.find('\n')));
    }
    memory_->set_host_mode(false);
    locals_ = nullptr;
    kernel_s_ += seconds_since(t);
    const BufferId from = call.master >= 0 ? call.master : call.param;
    const uint64_t bytes = graph_.buffers[call.param].bytes;
    if (call.update >= 0) {
      Slot& u = slots_[call.update];
      u.host = host_buffer(std::max<uint64_t>(bytes, 1), call.update);
      u.host_ready = runtime::CopyEvent();
      std::memcpy(u.host.data(), slots_[from].host.data(), bytes);
    } else if (from != call.param) {
      std::memcpy(slots_[call.param].host.data(), slots_[from].host.data(), bytes);
    }
    current_.clear();
    span(result, kHostCpu, start, now_s());
  }

  void bind_part_results(const Op& op, const CompiledCall& part, torch::jit::Stack& stack) {
    size_t index = 0;
    const auto take = [&](const at::Tensor& tensor) {
      if (index >= part.results.size()) {
        run_failed("{}: {} in {} returned more tensors than its trace", where(), part.name,
                   op.name);
      }
      const ResultRef r = part.results[index++];
      if (r.local && static_cast<size_t>(r.id) < locals_->size()) {
        (*locals_)[r.id] = tensor.storage();
      }
    };
    for (const c10::IValue& v : stack) {
      if (v.isTensor() && v.toTensor().defined()) take(v.toTensor());
    }
  }

  // memwall::apply: the device copy of a parameter's new values.
  void apply(const Op& op, const CompiledCall& call, RunResult& result) {
    const double start = now_s();
    need_on_device(call.from);
    need_on_device(call.to);
    const uint64_t bytes = graph_.buffers[call.to].bytes;
    if (graph_.buffers[call.from].bytes != bytes) {
      run_failed("{}: {} copies {} bytes into {}", where(), op.name,
                 graph_.buffers[call.from].bytes, bytes);
    }
    std::memcpy(slots_[call.to].device.mutable_data(), slots_[call.from].device.data(), bytes);
    span(result, kCompute, start, now_s());
  }

  // Note [Plan offsets at run time]: an output the kernel made elsewhere
  // (its scratch of the same size took the offset first) moves to its own.
  c10::Storage at_its_offset(BufferId b, c10::Storage storage) {
    const auto it = plan_.offsets.find(b);
    if (!memory_->has_arena() || it == plan_.offsets.end() ||
        storage.data() == memory_->arena_address(it->second)) {
      return storage;
    }
    c10::Storage moved = device_storage(graph_.buffers[b].bytes, "placing", b);
    std::memcpy(moved.mutable_data(), storage.data(),
                std::min<uint64_t>(graph_.buffers[b].bytes, storage.nbytes()));
    return moved;
  }

  // Note [Plan offsets at run time]: the offsets of the buffers the call
  // returns, in its order.
  void expect_outputs(const CompiledCall& call) {
    std::vector<std::pair<uint64_t, uint64_t>> outputs;
    for (const ResultRef& r : call.results) {
      if (r.local || r.id < 0) continue;
      const auto it = plan_.offsets.find(static_cast<BufferId>(r.id));
      if (it != plan_.offsets.end()) outputs.emplace_back(it->second, graph_.buffers[r.id].bytes);
    }
    memory_->expect(std::move(outputs));
  }

  void bind_results(const Op& op, const CompiledCall& call, torch::jit::Stack& stack) {
    size_t index = 0;
    const auto take = [&](const at::Tensor& tensor) {
      if (index >= call.results.size()) {
        run_failed("{}: {} returned more tensors than its trace ({})", where(), op.name,
                   call.results.size());
      }
      const ResultRef r = call.results[index++];
      if (r.local) {
        if (locals_ != nullptr && static_cast<size_t>(r.id) < locals_->size()) {
          (*locals_)[r.id] = tensor.storage();
        }
        return;
      }
      const int64_t b = r.id;
      if (b >= 0) {
        slots_[b].device = at_its_offset(static_cast<BufferId>(b), tensor.storage());
        slots_[b].arrived = runtime::CopyEvent();
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
    // Outputs the call does not make (a kernel's workspace the trace kept
    // as a buffer): memory of their size.
    for (const BufferId b : op.out) {
      if (graph_.buffers[b].version_of == kNoBuffer && !static_cast<bool>(slots_[b].device)) {
        slots_[b].device = device_storage(graph_.buffers[b].bytes, "creating", b);
      }
    }
    current_.clear();
  }

  // ---- Eager --------------------------------------------------------------------------
  void compare_with_eager(RunResult& result) {
    engine_->synchronize();
    const nlohmann::json& index = eager_->index();
    result.eager_losses = index.at("losses").get<std::vector<double>>();
    bool equal = true;
    std::string difference;
    const int steps = std::min<int>(options_.steps, static_cast<int>(result.eager_losses.size()));
    if (options_.steps != index.value("steps", 0)) {
      equal = false;
      difference =
          fmt::format("eager ran {} steps, this run {}", index.value("steps", 0), options_.steps);
    }
    for (int k = 0; k < steps && equal; ++k) {
      if (result.steps[k].loss != result.eager_losses[k]) {
        equal = false;
        difference = fmt::format("the loss of step {} is {:.17g}, eager's {:.17g}", k + 1,
                                 result.steps[k].loss, result.eager_losses[k]);
      }
    }
    for (const auto& [id, bytes] : eager_->buffers()) {
      if (!equal) break;
      if (id < 0 || static_cast<size_t>(id) >= graph_.buffers.size()) continue;
      std::vector<std::byte> mine(bytes.size());
      const Slot& s = slots_[id];
      if (static_cast<bool>(s.device)) {
        std::memcpy(mine.data(), s.device.data(), std::min<size_t>(mine.size(), s.device.nbytes()));
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

  const Graph& graph_;
  const Plan& plan_;
  RunOptions options_;
  std::unique_ptr<ValueFile> state_, eager_;
  std::vector<BufferId> roots_;
  std::vector<uint8_t> in_place_;
  std::vector<CompiledCall> calls_;
  TensorRef loss_;
  double loss_value_ = 0;

  std::unique_ptr<runtime::CopyEngine> engine_;
  std::unique_ptr<alloc::Device> device_;
  std::unique_ptr<alloc::Allocator> allocator_;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<runtime::HostPool> host_;
  std::unique_ptr<runtime::NvmeEngine> nvme_;

  std::vector<Slot> slots_;
  std::vector<Leaving> leaving_;
  std::vector<std::pair<int64_t, c10::Storage>> current_;  // the op's buffers by root
  std::map<OpId, at::Tensor> rng_;
  std::map<BufferId, BufferId> master_of_;       // master copy -> its parameter
  std::vector<c10::Storage>* locals_ = nullptr;  // the running CPU step's temporaries
  std::FILE* memory_log_ = nullptr;
  int iteration_ = 0;
  size_t step_ = 0;
  OpId op_ = 0;
  double kernel_s_ = 0, wait_s_ = 0, nvme_s_ = 0;
  Clock::time_point iteration_start_;
  bool tracing_ = false;
  std::vector<std::pair<size_t, runtime::CopyEvent>> open_copies_;  // event index, copy
};

}  // namespace

RunResult run(const Graph& graph, const Plan& plan, const std::string& values,
              const RunOptions& options) {
  Executor executor(graph, plan, values, options);
  return executor.run();
}

}  // namespace memwall::exec

// Note [Recomputed randomness]: a random op (tagged nondeterministic_seeded)
// saves the CPU generator's state before its first run; a recompute runs
// from that state and then puts the generator back, so its mask is the
// first run's and the draws after it are eager's.
extern "C" __attribute__((visibility("default"))) memwall::exec::Status memwall_exec_run_v1(
    const memwall::Graph& graph, const memwall::Plan& plan, const std::string& values,
    const memwall::exec::RunOptions& options, memwall::exec::RunResult& result,
    std::string& error) {
  using memwall::exec::Status;
  try {
    result = memwall::exec::run(graph, plan, values, options);
    return Status::kOk;
  } catch (const memwall::exec::BadInput& e) {
    error = e.what();
    return Status::kBadInput;
  } catch (const memwall::exec::RunFailed& e) {
    error = e.what();
    return Status::kRunFailed;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    error = what.substr(0, what.find('\n'));
    return Status::kRunFailed;
  } catch (const std::exception& e) {
    error = e.what();
    return Status::kRunFailed;
  }
}
