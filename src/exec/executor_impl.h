// The executor's state and its steps, private to src/exec. One class over
// five files: executor.cc (set-up, iterations, the library's entry point),
// executor_device.cc (the emulated device or a GPU: device memory, its
// figures, kernel timing on a GPU), executor_copies.cc (swaps, NVMe,
// frees), executor_compute.cc (ops, CPU steps, results, the comparison
// with eager), executor_comm.cc (ZeRO's ranks and their collectives).
#pragma once
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
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include "call.h"
#include "cuda_run.h"
#include "device_bytes.h"
#include "device_memory.h"
#include "exec_error.h"
#include "memwall/alloc/allocator.h"
#include "memwall/base/error.h"
#include "memwall/exec/executor.h"
#include "memwall/exec/values.h"
#include "memwall/graph/counts.h"
#include "memwall/plan/in_place.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/nvme_engine.h"

namespace memwall::exec::detail {

// Inside a catch block: the status of the exception being handled, its one
// line in `error`. A run reports running out of memory as any failure; a
// session (session.cc) tells it apart.
inline Status status_of_current_exception(std::string& error, bool out_of_memory_apart) {
  try {
    throw;
  } catch (const BadInput& e) {
    error = e.what();
    return Status::kBadInput;
  } catch (const OutOfMemory& e) {
    error = e.what();
    return out_of_memory_apart ? Status::kOutOfMemory : Status::kRunFailed;
  } catch (const RunFailed& e) {
    error = e.what();
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    error = what.substr(0, what.find('\n'));
  } catch (const std::exception& e) {
    error = e.what();
  }
  return Status::kRunFailed;
}

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Where a buffer's copies are (the simulator's three tiers).
struct Slot {
  c10::Storage device;         // defined while on the device
  runtime::CopyEvent arrived;  // the swap_in copy that fills `device`
  runtime::HostBuffer host;
  runtime::CopyEvent host_ready;        // the swap_out copy that fills `host`
  std::optional<runtime::Extent> nvme;  // the NVMe copy, when there is one
  // Note [NVMe reservation]: the buffer's own extent, from its first write
  // to NVMe to the end of the run; `nvme` is in it.
  std::optional<runtime::Extent> nvme_home;
  // Note [Offsets per stay]: device stays begun this iteration, the step
  // (Executor::serial_) that began the latest, and its plan offset.
  uint32_t stays = 0;
  uint64_t stay_began = 0;
  std::optional<uint64_t> stay_at;
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

// The dispatch key follows the storage: a CUDA run's device memory takes
// the CUDA kernels, its host copies the CPU's (Note [The CUDA run]).
inline at::Tensor view_of(const c10::Storage& storage, const TensorRef& ref) {
  const c10::DispatchKey key =
      storage.device_type() == c10::kCUDA ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU;
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage), c10::DispatchKeySet(key),
                                                   c10::scalarTypeToTypeMeta(ref.dtype));
  impl->set_sizes_and_strides(ref.sizes, ref.strides, ref.offset);
  return at::Tensor(std::move(impl));
}

// A rank's part of a ZeRO shard (Note [Shards at run time]), in elements.
struct Shard {
  uint64_t size = 0;    // s = ceil(n / N): a shard buffer's elements
  uint64_t begin = 0;   // r * s
  uint64_t length = 0;  // the rank's elements, clamp(n - r * s, 0, s)
};

struct Group;  // the ranks' process group (executor_comm.cc)

// Where a run's values come from: the tracer's files in `dir`, read when
// the executor is set up, or `memory` (the caller's, outliving the run).
struct ValuesFrom {
  const std::string* dir = nullptr;
  const StepValues* memory = nullptr;
};

class Executor {
 public:
  // `session`: values bring no inputs (each step brings its own: step()).
  Executor(const Graph& graph, const Plan& plan, ValuesFrom values, const RunOptions& options,
           bool session = false);
  // Fills `result` as it goes: a failed run keeps its notes.
  void run(RunResult& result);

  // A session (memwall/exec/session.h, src/exec/session.cc): begin() sets
  // up the device and places the persistent buffers; each step() runs one
  // iteration on `inputs` (a graph input buffer by name each); end()
  // frees every copy. After begin() the values given to the constructor
  // are no longer read.
  void begin(RunResult& result);
  StepMeasure step(const ValueSet& inputs, RunResult& result);
  void end();
  // A step failed after it began: every copy is gone.
  bool released() const { return released_; }
  // A persistent buffer between steps (session.cc): its bytes where they
  // are (device, else host; empty when only on NVMe), and copied out of
  // or into every copy held.
  std::span<std::byte> resident_bytes(BufferId b, c10::Storage* device);
  void read_state(BufferId b, std::span<std::byte> out);
  void write_state(BufferId b, std::span<const std::byte> in);
  // Note [Kernel timing]: per op, the median of its timed calls; -1 if none.
  std::vector<double> median_kernel_times();
  // Note [Tracked settings]: the value the next steps read for `name`
  // ("group0.lr"); bad input for a name no op reads.
  void set_setting(const std::string& name, double value);

 private:
  void check_runnable();
  void check_device() const;  // what a CUDA run does not do yet (Note [The CUDA run])
  void set_up_cuda(RunResult& result);
  // The emulated device's DeviceMemory, or nothing on a GPU.
  bool has_arena() const { return memory_ != nullptr && memory_->has_arena(); }
  c10::Allocator* host_allocator() const {
    return memory_ != nullptr ? memory_->host_allocator() : c10::GetCPUAllocator();
  }
  void host_mode(bool on) {
    if (memory_ != nullptr) memory_->set_host_mode(on);
  }
  void end_call() {
    if (memory_ != nullptr) memory_->end_call();
  }
  at::Generator generator() const {
    return cuda_ ? cuda_->generator() : at::detail::getDefaultCPUGenerator();
  }
  // Device memory's figures (live tensor bytes, their peak since the
  // iteration began), the emulated device's or the GPU's.
  uint64_t device_live_bytes() const;
  void measure_device(StepMeasure& m);  // on a GPU, keeps peak_reserved_
  // Note [Kernel timing on a GPU]: an op's kernels between two events.
  struct TimedOp {
    OpId op = 0;
    uint64_t from = 0, to = 0;
    bool timed = false;           // a compute (not a recompute) past the first iteration
    std::optional<size_t> event;  // its compute span in RunResult::events
  };
  void timed_op(OpId op, uint64_t from, uint64_t to, bool timed, RunResult& result);
  void resolve_timed_ops(RunResult& result);
  void check_values() const;  // values in memory: what the options need of them
  std::span<const std::byte> value_of(const Buffer& b) const;
  uint64_t host_capacity() const;
  void compile(c10::Allocator* host);
  void set_generator_state();
  // Device memory for b: at `offset` in the plan's arena, or anywhere.
  c10::Storage device_storage(uint64_t bytes, const char* why, BufferId b,
                              std::optional<uint64_t> offset);
  // Memory for a recompute's copy of b, clear of the op's outputs and
  // workspace (Note [Replaying side effects]).
  c10::Storage scratch_storage(uint64_t bytes, BufferId b);
  // Note [Offsets per stay]: b's next device stay begins (once per step);
  // its plan offset, nullopt without one or without an arena.
  std::optional<uint64_t> begin_stay(BufferId b);
  void make_room(uint64_t offset, uint64_t bytes);
  std::string holders(std::optional<uint64_t> offset, uint64_t bytes) const;
  runtime::HostBuffer host_buffer(uint64_t bytes, BufferId b);
  void reserve_host();  // allocates Plan::host_reserved from the host pool
  runtime::NvmeEngine& nvme();
  // Writes b's bytes to its NVMe extent (Note [NVMe reservation]); throws
  // the engine's error.
  runtime::Extent store_on_nvme(Slot& s, const void* data, uint64_t bytes);
  void bind(const Buffer& b);
  void bind_persistent();
  StepMeasure iteration(int k, RunResult& result);
  void end_iteration();
  void release_all();
  void retire_finished();
  void span(RunResult& result, Lane lane, double start, double end,
            runtime::CopyEvent until = runtime::CopyEvent());
  void close_copy_spans(RunResult& result, bool all);
  void wait(const runtime::CopyEvent& e);
  // Note [Device-side waits] (src/runtime/cuda_copy_engine.cc).
  bool torch_stream_waits_for(const runtime::CopyEvent& e);
  void copy_after(const runtime::CopyEvent& e, runtime::CopyDirection direction);
  std::string where() const;
  void execute(const Step& s, RunResult& result);
  void swap_out(BufferId b, Tier to, RunResult& result);
  void drop_nvme(Slot& s);
  runtime::Extent write_nvme(Slot& s, const void* data, uint64_t bytes);
  void read_nvme(const runtime::Extent& extent, void* data, uint64_t bytes);
  void waited_on_nvme(Clock::time_point start);
  void swap_in(BufferId b, RunResult& result);
  void nvme_to_host(BufferId b, RunResult& result);
  void free_buffer(BufferId b);
  const c10::Storage& resolve(int64_t root);
  at::Tensor argument_tensor(const TensorRef& ref);
  c10::IValue expression(const CompiledArg& a);
  void push_arguments(const CompiledCall& call, torch::jit::Stack& stack);
  void call_op(const Op& op, const CompiledCall& call, torch::jit::Stack& stack,
               bool cpu_step = false);
  void need_on_device(BufferId b);
  void run_op(const Step& s, RunResult& result);
  c10::Storage on_host(BufferId b);
  void cpu_step(const Op& op, const CompiledCall& call, RunResult& result);
  void device_sequence(const Op& op, const CompiledCall& call, RunResult& result);
  void run_parts(const Op& op, const CompiledCall& call, bool on_host);
  void apply(const CompiledCall& call, RunResult& result);
  // A recompute's output still on the device from its earlier stay: it is
  // kept where it is (no new stay).
  bool kept_on_device(BufferId b) const {
    return static_cast<bool>(slots_[b].device) && slots_[b].stay_began != serial_;
  }
  // Whether b's new storage is off its plan offset; if so, learns where
  // its op's scratch of b's size goes (Note [Scratch before its output]).
  bool learn_if_misplaced(BufferId b, const c10::Storage& storage);
  void place_outputs(const std::vector<BufferId>& misplaced);
  void expect_outputs(const CompiledCall& call);
  void take_results(const Op& op, const CompiledCall& call, torch::jit::Stack& stack);
  void bind_results(const Op& op, const CompiledCall& call, torch::jit::Stack& stack);
  void compare_with_eager(RunResult& result);
  std::vector<uint8_t> compared_here() const;  // per buffer: checked against eager's here
  // Data parallelism (executor_comm.cc, Note [Shards at run time]).
  Shard shard_of(uint64_t elements) const;
  void set_up_ranks();
  // `as`: a CPU step's parameter and the master its references mean.
  void shard_views(CompiledCall& call, const Op& op, std::pair<int64_t, int64_t> as = {-1, -1});
  // Copies a step's new values, a shard or whole, into buffer `to`'s
  // `data` (the rank's slice of a whole one).
  // `with`: Note [Device bytes] (the device's, or kHostBytes for host memory).
  void put_values(const DeviceBytes& with, const void* from, uint64_t from_bytes, const Buffer& to,
                  void* data);
  bool sharded(const Buffer& b, uint64_t whole_bytes) const;
  std::span<const std::byte> slice_of(const Buffer& b, std::span<const std::byte> whole) const;
  void connect();
  void collective(const Step& s, RunResult& result);

  double now_s() const { return seconds_since(iteration_start_); }
  const Graph& graph_;
  const Plan& plan_;
  RunOptions options_;
  std::unique_ptr<ValueFiles> files_;   // values read from a directory
  const StepValues* values_ = nullptr;  // files_'s or the caller's
  int stage_ = 0;                       // ZeRO's, of a rank graph
  bool session_ = false;
  bool released_ = false;                       // a session's step failed (release_all)
  int steps_run_ = 0;                           // a session's
  std::unique_ptr<StepValues> session_values_;  // a session's step: no state, its inputs
  std::vector<BufferId> roots_;
  std::vector<uint8_t> in_place_;
  std::vector<CompiledCall> calls_;
  Settings settings_;                                 // Note [Tracked settings]: those set, by name
  std::set<std::string, std::less<>> setting_names_;  // those the calls read (compile())
  TensorRef loss_;
  double loss_value_ = 0;
  std::unique_ptr<runtime::CopyEngine> engine_;
  std::unique_ptr<alloc::Device> device_;
  std::unique_ptr<alloc::Allocator> allocator_;
  std::unique_ptr<DeviceMemory> memory_;  // the emulated device's
  std::unique_ptr<CudaRun> cuda_;          // a GPU's (Note [The CUDA run])
  std::vector<TimedOp> timed_ops_;         // this iteration's, on a GPU
  uint64_t iteration_mark_ = 0;            // the event the iteration began with
  uint64_t peak_reserved_ = 0;             // on a GPU: the most the allocator held
  DeviceBytes device_bytes_;               // Note [Device bytes]
  std::unique_ptr<runtime::HostPool> host_;
  std::vector<runtime::HostBuffer> host_reserved_;  // Plan::host_reserved, for the session
  std::unique_ptr<runtime::NvmeEngine> nvme_;
  RunResult* result_ = nullptr;  // the run's, for what nvme() learns when it starts
  std::vector<Slot> slots_;
  std::vector<Leaving> leaving_;
  std::vector<std::pair<int64_t, c10::Storage>> current_;  // the op's buffers by root
  std::map<OpId, at::Tensor> rng_;
  std::map<BufferId, BufferId> master_of_;       // master copy -> its parameter
  std::vector<c10::Storage>* locals_ = nullptr;  // the running CPU step's temporaries
  std::FILE* memory_log_ = nullptr;
  std::vector<std::vector<double>> kernel_times_;  // per op (Note [Kernel timing])
  int iteration_ = 0;
  size_t step_ = 0;
  std::vector<uint32_t> op_runs_;  // device runs per op this iteration (workspace offsets)
  // Note [Scratch before its output]: per buffer, allocations of its size
  // its op makes before its own, learnt from a run that had to move it.
  // And where the output landed then.
  std::vector<DeviceMemory::ScratchFirst> scratch_first_;
  uint64_t outputs_moved_ = 0;  // this iteration
  uint64_t serial_ =
      1;  // steps begun, over all iterations (and bindings); Slot::stay_began 0: none
  OpId op_ = 0;
  double kernel_s_ = 0, wait_s_ = 0, nvme_s_ = 0, comm_s_ = 0;
  Clock::time_point iteration_start_;
  bool tracing_ = false;
  std::vector<std::pair<size_t, runtime::CopyEvent>> open_copies_;  // event index, copy
  // Last, so destroyed first: gloo's threads go before the memory they
  // may still touch after a failed collective.
  std::shared_ptr<Group> group_;
};

}  // namespace memwall::exec::detail
