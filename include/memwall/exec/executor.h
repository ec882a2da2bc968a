// memwall's executor (DESIGN.md "exec"): runs a Plan's steps on real
// tensors through ATen's dispatcher and measures what happened.
//
//   exec::RunOptions options;  options.steps = 3;  options.check_eager = true;
//   exec::RunResult r;  std::string error;
//   exec::Status s = exec::run_plan(graph, plan, "values/", options, r, error);
//
// The graph must carry call records (`memwall trace`, Note [Call records]
// in python/memwall/tracer/calls.py); the step's starting values (and eager's
// losses and final model states for check_eager) come from the directory
// the tracer's --values wrote or from memory (memwall/exec/values.h).
// libtorch stays inside libmemwall_exec.so: this header names no torch
// type, and a caller loads the library only when it runs a plan
// (memwall/exec/library.h: run_plan).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memwall/exec/values.h"
#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall::exec {

struct RunOptions {
  // Where the step runs (docs/exec.md): "emulated", ATen's CPU kernels on
  // memwall's emulated device (Note [Emulated device]); "cuda", torch's
  // CUDA kernels on GPU 0 over memwall's CUDA device memory (Note [The CUDA
  // run] in src/exec/cuda_run.cc).
  std::string device = "emulated";
  int steps = 3;
  bool check_eager = false;
  // The device allocator's policy over the emulated device ("stitching",
  // "caching", "expandable"); "plan" when the plan has offsets.
  std::string policy = "stitching";
  std::vector<std::string> nvme_dirs;  // for plans that use NVMe; empty: $TMPDIR
  std::string nvme_faults;             // injected NVMe faults (runtime/nvme_faults.h)
  uint64_t host_bytes = 0;             // pinned host pool's capacity; 0: 3/4 of RAM
  bool record_trace = false;           // fill RunResult::events
  // Note [Kernel timing]: record every device compute op's call time in
  // each iteration but the first (which pays for fresh pages), for
  // RunResult::kernel_seconds.
  bool time_kernels = false;
  // Data parallelism (ZeRO's rank graphs, docs/exec.md): this process is
  // rank `rank` of `ranks`, which meet through `store`: a c10d FileStore's
  // path, or "tcp://HOST:PORT" for torch.distributed's TCPStore there
  // (Note [Meeting through a TCPStore] in src/exec/executor_comm.cc), with
  // "?server=1" on the rank that hosts it. Keys go under `store_prefix`.
  int rank = 0;
  int ranks = 1;
  std::string store;
  std::string store_prefix;
  int comm_timeout_s = 300;  // a collective waiting longer fails the run
};

// What ran in the last iteration, in the simulator's lanes (sim's
// Resource order: compute, h2d, d2h, nvme read, nvme write, host cpu), for
// `memwall run --trace`. A copy's end is when the executor saw it done.
struct TraceEvent {
  int lane = 0;
  uint32_t step = 0;              // the plan step
  double start_s = 0, end_s = 0;  // since the iteration began
};
struct MemorySample {
  double time_s = 0;
  uint64_t device_bytes = 0;  // live tensor bytes
  uint64_t host_bytes = 0;    // pinned pool in use
};

struct StepMeasure {
  double loss = 0;
  uint64_t device_peak_bytes = 0;            // live tensor bytes (what the simulator counts)
  uint64_t device_peak_allocated_bytes = 0;  // the same after the allocator's rounding
  uint64_t device_peak_reserved_bytes = 0;   // memory the allocator held (run so far)
  uint64_t arena_bytes = 0;                  // with offsets: the arena's high-water mark, else 0
  // With offsets: outputs a kernel made elsewhere, copied to their offset
  // (Note [Scratch before its output]).
  uint64_t outputs_moved = 0;
  uint64_t host_peak_bytes = 0;  // pinned pool bytes in use at most
  uint64_t h2d_bytes = 0, d2h_bytes = 0, nvme_read_bytes = 0, nvme_write_bytes = 0;
  double step_time_s = 0;
  double kernel_time_s = 0;  // inside ATen calls
  double wait_time_s = 0;    // blocked on copies and NVMe
  double comm_time_s = 0;    // in collectives with the other ranks
  double overhead_s = 0;     // the rest: the executor's own bookkeeping
  double copy_busy_s = 0;    // seconds the copy streams and NVMe were busy
  // The share of that busy time the executor did not wait on (1 - waits /
  // busy): the simulator's is 1 - transfer stall / its copies' busy time.
  double overlap = 0;
};

struct RunResult {
  std::string device;  // "emulated (host threads)", "cuda (NVIDIA H100 80GB HBM3)"
  int threads = 0;
  std::vector<StepMeasure> steps;
  std::vector<double> eager_losses;
  std::optional<bool> eager_equal;  // set when check_eager
  std::string eager_difference;     // the first difference, when not equal
  uint64_t budget = 0;
  bool arena = false;  // the plan's offsets were honoured (Note [Plan offsets at run time])
  std::vector<TraceEvent> events;    // record_trace: the last iteration
  std::vector<MemorySample> memory;  // record_trace: after each plan step
  // time_kernels: per op id, the median seconds of its call as the step
  // ran it (arguments, the dispatcher, the kernel); -1 for ops not timed
  // (CPU steps, applies, ops the plan does not compute, a 1-step run).
  std::vector<double> kernel_seconds;
  // The swap space the NVMe engine held (Note [NVMe reservation] in
  // src/plan/nvme_reservation.cc); 0 when the plan used no NVMe.
  uint64_t nvme_reserved_bytes = 0;
  // Lines for the user (`memwall: note:`), kept when the run fails: stale
  // swap files of dead processes removed (Note [Stale swap files]).
  std::vector<std::string> notes;
};

// Error kinds the library reports (exit codes of `memwall run`); a
// session (memwall/exec/session.h) tells kOutOfMemory apart, which a run
// reports as kRunFailed.
enum class Status : int { kOk = 0, kRunFailed = 1, kBadInput = 2, kOutOfMemory = 3 };

// The library's entry points, resolved with dlsym by name
// (memwall/exec/library.h). Each returns the status; on failure `error` is
// one line. kRunSymbol reads the step's values from the directory
// `values` (memwall/exec/values.h, ValueFiles), kRunValuesSymbol takes them
// in memory (rank r > 0 needs its `inputs`, check_eager its `eager`).
using RunFunction = Status (*)(const Graph& graph, const Plan& plan, const std::string& values,
                               const RunOptions& options, RunResult& result, std::string& error);
inline constexpr const char* kRunSymbol = "memwall_exec_run_v5";
using RunValuesFunction = Status (*)(const Graph& graph, const Plan& plan, const StepValues& values,
                                     const RunOptions& options, RunResult& result,
                                     std::string& error);
inline constexpr const char* kRunValuesSymbol = "memwall_exec_run_values_v2";

}  // namespace memwall::exec
