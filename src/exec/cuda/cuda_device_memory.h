// libmemwall_exec_cuda.so's C ABI: memwall's allocator on the CUDA VMM
// device, capacity a plan's budget, as torch's CUDA allocator (Note [CUDA
// device memory] in cuda_device_memory.cc). The executor loads the library
// with dlopen for a CUDA run only, as memwall loads libmemwall_exec.so
// (src/exec/api/library.cc), and finds each function by its versioned
// name; a change of signature is a new version. No CUDA or torch type
// crosses it, so callers include this header without either.
//
//   auto install = reinterpret_cast<memwall::exec::CudaInstallFunction>(
//       dlsym(handle, memwall::exec::kCudaInstallSymbol));
//   if (install(0, plan.budget, "stitching") != 0) fail(last_error());
//   ... run: torch's CUDA tensors are memwall's device memory ...
//   MemwallExecCudaStatsV2 s;  stats(&s);
#pragma once
#include <cstdint>

extern "C" {

// Byte counts of device memory. Requested bytes are what torch asked for;
// allocated bytes are memwall's blocks (after the policy's rounding).
struct MemwallExecCudaStatsV2 {
  uint64_t budget;    // as installed
  uint64_t capacity;  // the device's: the budget rounded down to the granularity
  uint64_t live_bytes;
  uint64_t peak_bytes;  // live bytes at most since the install or reset_peak
  uint64_t live_allocated_bytes;
  uint64_t peak_allocated_bytes;
  uint64_t pending_frees;    // freed, waiting for an event on their streams
  uint64_t pending_bytes;    // their allocated bytes
  uint64_t peak_held_bytes;  // live + pending allocated bytes, at most
  uint64_t reserved_bytes;   // physical chunks the allocator holds now
  uint64_t event_waits;      // events waited for because memory was short
  uint64_t out_of_memory;    // requests refused (torch raised OutOfMemoryError)
  uint64_t lost_bytes;       // blocks never reused: their free's event failed
  // (v2) reserved_bytes at most since the install or reset_peak, so that a
  // run reads it once an iteration, not after every op.
  uint64_t peak_reserved_bytes;
};

// Makes memwall's allocator with `policy` ("caching", "expandable" or
// "stitching") on CUDA device `device` with `budget` bytes torch's CUDA
// allocator for the rest of the process. Must come before the process's
// first CUDA allocation (torch cannot swap an allocator it has used), and
// once per process. Returns 0, or -1 with memwall_exec_cuda_last_error_v1()
// saying why (no GPU or driver, a used allocator, a second install...).
int memwall_exec_cuda_install_v1(int device, uint64_t budget, const char* policy);
// Fills `out`; 0, or -1 before an install.
int memwall_exec_cuda_stats_v2(MemwallExecCudaStatsV2* out);
// Peaks restart at the current values; 0, or -1 before an install.
int memwall_exec_cuda_reset_peak_v1();
// Waits for every pending free (its stream's work) and returns its block
// to the allocator; 0, or -1 with the error (before an install, a CUDA
// error).
int memwall_exec_cuda_synchronize_v1();
// Note [Device bytes] (src/exec/device_bytes.h): `bytes` from `from` to
// `to`, either or both on the device (unified addresses), or `bytes` zeros
// at device memory `to`, on torch's current stream, returned from once they
// are there; 0, or -1 with the error (before an install, a CUDA error).
int memwall_exec_cuda_copy_v1(void* to, const void* from, uint64_t bytes);
int memwall_exec_cuda_zero_v1(void* to, uint64_t bytes);
// Waits for the work queued on torch's current stream (the kernels the
// executor launched): before a copy engine's stream reads what they wrote
// (Note [The CUDA run] in src/exec/cuda_run.cc); 0, or -1 with the error.
int memwall_exec_cuda_stream_synchronize_v1();
// Note [Kernel timing on a GPU] (src/exec/cuda_run.cc): a timing event
// recorded on torch's current stream, numbered from 0 since the last
// clear; 0 with `*mark` set, or -1 with the error.
int memwall_exec_cuda_mark_v1(uint64_t* mark);
// The seconds between marks `from` and `to`, once `to` has happened
// (waited for); 0, or -1 with the error (a mark not recorded since the
// last clear).
int memwall_exec_cuda_elapsed_v1(uint64_t from, uint64_t to, double* seconds);
// Forgets every mark (their events are kept for the next ones); 0.
int memwall_exec_cuda_clear_marks_v1();
// Note [Device-side waits] (src/runtime/cuda_copy_engine.cc): records the
// library's ordering event (no timing) on torch's current stream and sets
// `*event` to it, a cudaEvent_t (= CUevent) for a copy stream to wait on;
// valid until the next call. 0, or -1 with the error.
int memwall_exec_cuda_record_v1(void** event);
// Torch's current stream waits, on the device, for `event` (a copy
// engine's CUevent of the same primary context); 0, or -1 with the error.
int memwall_exec_cuda_stream_wait_v1(void* event);
// Why this thread's last call failed, or the first free that failed on
// any thread (a CUDA error recording its event); "" if none. Valid until
// the thread's next call.
const char* memwall_exec_cuda_last_error_v1();

}  // extern "C"

namespace memwall::exec {

using CudaInstallFunction = int (*)(int device, uint64_t budget, const char* policy);
using CudaStatsFunction = int (*)(MemwallExecCudaStatsV2* out);
using CudaResetPeakFunction = int (*)();
using CudaSynchronizeFunction = int (*)();
using CudaLastErrorFunction = const char* (*)();
using CudaCopyFunction = int (*)(void* to, const void* from, uint64_t bytes);
using CudaZeroFunction = int (*)(void* to, uint64_t bytes);
using CudaStreamSynchronizeFunction = int (*)();
using CudaMarkFunction = int (*)(uint64_t* mark);
using CudaElapsedFunction = int (*)(uint64_t from, uint64_t to, double* seconds);
using CudaClearMarksFunction = int (*)();
using CudaRecordFunction = int (*)(void** event);
using CudaStreamWaitFunction = int (*)(void* event);

inline constexpr const char* kCudaLibrary = "libmemwall_exec_cuda.so";
inline constexpr const char* kCudaInstallSymbol = "memwall_exec_cuda_install_v1";
inline constexpr const char* kCudaStatsSymbol = "memwall_exec_cuda_stats_v2";
inline constexpr const char* kCudaResetPeakSymbol = "memwall_exec_cuda_reset_peak_v1";
inline constexpr const char* kCudaSynchronizeSymbol = "memwall_exec_cuda_synchronize_v1";
inline constexpr const char* kCudaLastErrorSymbol = "memwall_exec_cuda_last_error_v1";
inline constexpr const char* kCudaCopySymbol = "memwall_exec_cuda_copy_v1";
inline constexpr const char* kCudaZeroSymbol = "memwall_exec_cuda_zero_v1";
inline constexpr const char* kCudaStreamSynchronizeSymbol = "memwall_exec_cuda_stream_synchronize_v1";
inline constexpr const char* kCudaMarkSymbol = "memwall_exec_cuda_mark_v1";
inline constexpr const char* kCudaElapsedSymbol = "memwall_exec_cuda_elapsed_v1";
inline constexpr const char* kCudaClearMarksSymbol = "memwall_exec_cuda_clear_marks_v1";
inline constexpr const char* kCudaRecordSymbol = "memwall_exec_cuda_record_v1";
inline constexpr const char* kCudaStreamWaitSymbol = "memwall_exec_cuda_stream_wait_v1";

}  // namespace memwall::exec
