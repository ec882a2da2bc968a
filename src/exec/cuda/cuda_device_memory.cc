// libmemwall_exec_cuda.so (cuda_device_memory.h): memwall's allocator on
// the CUDA VMM device as torch's CUDA allocator, with stream-ordered frees.
#include "cuda_device_memory.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "stream_ordered_frees.h"

// Note [CUDA device memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// On a GPU the executor's device memory is what torch's CUDA kernels
// allocate, as on the emulated device it is what ATen's CPU kernels do
// (Note [Emulated device] in src/exec/device_memory.h), and it has to be
// memwall's allocator for the plan's budget to mean anything: a request
// past it must fail on the spot, as it would on a GPU of that size.
// - Why torch's pluggable allocator: every CUDA tensor, a kernel's
//   temporaries and cuBLAS's workspaces included, comes from
//   c10::cuda::CUDACachingAllocator's current allocator;
//   CUDAPluggableAllocator is torch's supported way to make a pair of
//   malloc and free functions that allocator (changeCurrentAllocator), as
//   SetCPUAllocator is for the CPU. It must be installed before the
//   process's first CUDA allocation (torch refuses to swap one it has
//   used), hence once per process. Under it is memwall's allocator on the
//   CUDA VMM device (src/alloc/cuda_vmm.cc) made with the budget as its
//   capacity: past it the device creates no chunk, the allocator returns
//   out of memory after emptying its cache, and malloc throws
//   c10::OutOfMemoryError, which Python sees as torch.OutOfMemoryError.
//   (torch does not check the pointer malloc returns: a null one would be
//   a tensor without memory, so malloc throws instead.)
// - Why stream-ordered frees: torch frees a tensor when its last use has
//   been queued, long before the GPU runs it, and passes the stream it was
//   allocated on. Memory back in memwall's allocator is free for any
//   stream, so the block waits for an event recorded at the free
//   (StreamOrderedFrees, Note [Stream-ordered frees]); mallocs return the
//   blocks whose events completed, and wait for the oldest when memory is
//   short, so the budget holds however far the host runs ahead. torch's
//   record_stream adds a stream the free must wait for too.
// - Why a separate library: linked to libtorch_cuda, a library loads it
//   and everything it needs (cuBLAS, NCCL, the CUDA runtime: 2.8 GB of
//   shared objects with torch 2.14's cu130 wheel) and fails to load where
//   the wheel is CPU-only; the CPU path (every test on this machine) needs
//   none of it. libmemwall_exec.so stays as it is and dlopens this library
//   only for a CUDA run, through versioned C names (cuda_device_memory.h)
//   like its own.
// Only one GPU (the installed index) is served; a malloc on another throws.
// CUDA graph capture is not supported (no pool functions are set).

namespace {

using memwall::exec::EventFunctions;
using memwall::exec::EventHandle;
using memwall::exec::StreamKey;
using memwall::exec::StreamOrderedFrees;

[[noreturn]] void cuda_failed(const char* call, cudaError_t error) {
  // Clear the error so that torch's next check does not see ours (sticky
  // errors stay whatever is done).
  (void)cudaGetLastError();
  throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(error));
}

// Events for StreamOrderedFrees, kept for reuse: a free records one per
// stream, and creating them each time would cost a driver call per tensor.
class EventPool {
 public:
  ~EventPool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }
  EventHandle record(StreamKey stream) {
    cudaEvent_t event = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        event = free_.back();
        free_.pop_back();
      }
    }
    if (event == nullptr) {
      if (const cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
          e != cudaSuccess) {
        cuda_failed("cudaEventCreateWithFlags", e);
      }
    }
    if (const cudaError_t e = cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream));
        e != cudaSuccess) {
      release(event);
      cuda_failed("cudaEventRecord", e);
    }
    return event;
  }
  static bool done(EventHandle event) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error, but the runtime remembers it
      return false;
    }
    cuda_failed("cudaEventQuery", e);
  }
  static void wait(EventHandle event) {
    if (const cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(event));
        e != cudaSuccess) {
      cuda_failed("cudaEventSynchronize", e);
    }
  }
  void release(EventHandle event) {
    std::lock_guard lock(mutex_);
    free_.push_back(static_cast<cudaEvent_t>(event));
  }

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

// Timing events (memwall_exec_cuda_mark_v1): the i-th mark since the last
// clear is events[i]; events stay for reuse.
struct Marks {
  std::mutex mutex;
  std::vector<cudaEvent_t> events;
  uint64_t recorded = 0;
  cudaEvent_t order = nullptr;  // memwall_exec_cuda_record_v1's, made at its first call
};

// The process's device memory, made by the install and never destroyed:
// torch frees tensors during interpreter shutdown, after static
// destructors (Note [One allocator per process] in src/alloc/torch).
struct CudaDeviceMemory {
  int device = 0;
  uint64_t budget = 0;
  std::unique_ptr<memwall::alloc::Device> vmm;
  std::unique_ptr<memwall::alloc::Allocator> allocator;
  EventPool events;
  std::unique_ptr<StreamOrderedFrees> frees;
  std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> torch_allocator;
  std::mutex error_mutex;
  std::string free_error;  // the first free that failed
  Marks marks;
};

CudaDeviceMemory* g_memory = nullptr;  // set once by the install
std::mutex g_install_mutex;
thread_local std::string t_last_error;

int failed(std::string why) {
  t_last_error = std::move(why);
  return -1;
}

// An error's message as one line: c10's carry a C++ backtrace and CUDA's
// explanations on the lines after.
std::string one_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string what = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  return what.substr(0, what.find('\n'));
}

void* device_malloc(size_t bytes, int device, cudaStream_t /*stream*/) {
  CudaDeviceMemory& m = *g_memory;
  TORCH_CHECK(device == m.device, "memwall's CUDA device memory serves device ", m.device,
              " only; asked for ", bytes, " bytes on device ", device);
  {
    std::lock_guard lock(m.error_mutex);
    TORCH_CHECK(m.free_error.empty(),
                "memwall's CUDA device memory failed earlier: ", m.free_error);
  }
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  memwall::alloc::Allocation a;
  try {
    a = m.frees->allocate(bytes);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "memwall's CUDA device memory: ", one_line(e));
  }
  TORCH_CHECK_WITH(OutOfMemoryError, a || bytes == 0,
                   "CUDA out of memory in memwall's budget: ", bytes, " bytes asked with ",
                   m.frees->stats().live_bytes, " live (", m.allocator->stats().reserved_bytes,
                   " held by the allocator) of the budget ", m.budget, " on device ", device);
  return a.ptr;
}

// Called from a DataPtr's deleter, which must not throw: a failure is kept
// for the next malloc to report, and the block is never reused.
void device_free(void* ptr, size_t bytes, int device, cudaStream_t stream) {
  CudaDeviceMemory& m = *g_memory;
  try {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    m.frees->free(ptr, bytes, reinterpret_cast<StreamKey>(stream));
  } catch (const std::exception& e) {
    std::lock_guard lock(m.error_mutex);
    if (m.free_error.empty()) m.free_error = one_line(e);
    std::fprintf(stderr, "memwall: a CUDA free failed: %s\n", one_line(e).c_str());
  }
}

void record_stream(void* ptr, cudaStream_t stream) {
  try {
    g_memory->frees->use_on(ptr, reinterpret_cast<StreamKey>(stream));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "memwall's CUDA device memory: ", one_line(e));
  }
}

// torch.cuda.empty_cache(): pending frees back, then cached chunks to the device.
void empty_cache() {
  CudaDeviceMemory& m = *g_memory;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m.device));
  try {
    m.frees->synchronize();
    m.allocator->empty_cache();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "memwall's CUDA device memory: ", one_line(e));
  }
}

CudaDeviceMemory* installed() {
  std::lock_guard lock(g_install_mutex);
  return g_memory;
}

// Work `call` queued on `stream` (`queued`: what it returned), then waited
// for; 0, or -1 with the error.
int wait_for_queued(cudaError_t queued, const char* call, cudaStream_t stream) {
  if (queued == cudaSuccess) {
    queued = cudaStreamSynchronize(stream);
    call = "cudaStreamSynchronize";
  }
  if (queued == cudaSuccess) return 0;
  (void)cudaGetLastError();
  return failed(std::string(call) + " failed: " + cudaGetErrorString(queued));
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int memwall_exec_cuda_install_v1(int device, uint64_t budget,
                                                                        const char* policy) {
  std::lock_guard lock(g_install_mutex);
  try {
    if (g_memory != nullptr) {
      return failed(
          "CUDA device memory is installed already: torch's allocator is set once "
          "per process (Note [CUDA device memory])");
    }
    const std::string name = policy == nullptr ? "" : policy;
    if (name == "plan") {
      return failed(
          "the plan policy places requests at a layout's offsets, which torch's "
          "CUDA requests do not carry");
    }
    if (budget == 0) return failed("a budget of 0 bytes");
    auto m = std::make_unique<CudaDeviceMemory>();
    m->device = device;
    m->budget = budget;
    std::string why;
    m->vmm = memwall::alloc::make_cuda_vmm(device, budget, &why);
    if (m->vmm == nullptr) return failed("no CUDA VMM device: " + why);
    // make_cuda_vmm caps the capacity at the GPU's memory; the granularity
    // rounds it down as on the emulated device.
    if (m->vmm->capacity() + m->vmm->granularity() <= budget) {
      return failed("the budget of " + std::to_string(budget) + " bytes is more than CUDA device " +
                    std::to_string(device) + " has (" + std::to_string(m->vmm->capacity()) + ")");
    }
    m->allocator = memwall::alloc::make_allocator(name, *m->vmm);
    EventPool& events = m->events;
    m->frees = std::make_unique<StreamOrderedFrees>(
        *m->allocator, EventFunctions{.record = [&events](StreamKey s) { return events.record(s); },
                                      .done = &EventPool::done,
                                      .wait = &EventPool::wait,
                                      .release = [&events](EventHandle e) { events.release(e); }});
    namespace pluggable = torch::cuda::CUDAPluggableAllocator;
    m->torch_allocator = pluggable::createCustomAllocator(&device_malloc, &device_free);
    auto* custom = dynamic_cast<pluggable::CUDAPluggableAllocator*>(m->torch_allocator.get());
    if (custom == nullptr)
      return failed("torch's createCustomAllocator made no pluggable allocator");
    custom->set_record_stream_fn(&record_stream);
    custom->set_reset_fn(&empty_cache);
    // Set before the change: torch may call into it as soon as it is current.
    g_memory = m.get();
    try {
      pluggable::changeCurrentAllocator(m->torch_allocator);
    } catch (...) {
      g_memory = nullptr;
      throw;
    }
    m.release();
    return 0;
  } catch (const std::exception& e) {
    return failed(one_line(e));
  }
}

__attribute__((visibility("default"))) int memwall_exec_cuda_stats_v2(MemwallExecCudaStatsV2* out) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  const StreamOrderedFrees::Stats s = m->frees->stats();
  *out = {.budget = m->budget,
          .capacity = m->vmm->capacity(),
          .live_bytes = s.live_bytes,
          .peak_bytes = s.peak_bytes,
          .live_allocated_bytes = s.live_allocated_bytes,
          .peak_allocated_bytes = s.peak_allocated_bytes,
          .pending_frees = s.pending_frees,
          .pending_bytes = s.pending_bytes,
          .peak_held_bytes = s.peak_held_bytes,
          .reserved_bytes = m->allocator->reserved_bytes(),
          .event_waits = s.event_waits,
          .out_of_memory = s.out_of_memory,
          .lost_bytes = s.lost_bytes,
          .peak_reserved_bytes = s.peak_reserved_bytes};
  return 0;
}

__attribute__((visibility("default"))) int memwall_exec_cuda_reset_peak_v1() {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  m->frees->reset_peak();
  return 0;
}

__attribute__((visibility("default"))) int memwall_exec_cuda_synchronize_v1() {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  try {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
    m->frees->synchronize();
    return 0;
  } catch (const std::exception& e) {
    return failed(one_line(e));
  }
}

// Note [Device bytes] (src/exec/device_bytes.h): the executor's copies into,
// out of and within device memory. Unified addressing tells the direction
// (cudaMemcpyDefault); on torch's current stream, so that they come after
// the kernels queued there, and waited for, as the executor reads or
// reuses the bytes next.
__attribute__((visibility("default"))) int memwall_exec_cuda_copy_v1(void* to, const void* from,
                                                                     uint64_t bytes) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  if (bytes == 0) return 0;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  return wait_for_queued(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream),
                         "cudaMemcpyAsync", stream);
}

__attribute__((visibility("default"))) int memwall_exec_cuda_zero_v1(void* to, uint64_t bytes) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  if (bytes == 0) return 0;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  return wait_for_queued(cudaMemsetAsync(to, 0, bytes, stream), "cudaMemsetAsync", stream);
}

__attribute__((visibility("default"))) int memwall_exec_cuda_stream_synchronize_v1() {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  return wait_for_queued(cudaSuccess, "", c10::cuda::getCurrentCUDAStream().stream());
}

__attribute__((visibility("default"))) int memwall_exec_cuda_mark_v1(uint64_t* mark) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  std::lock_guard lock(m->marks.mutex);
  std::vector<cudaEvent_t>& events = m->marks.events;
  if (m->marks.recorded == events.size()) {
    cudaEvent_t event = nullptr;
    if (const cudaError_t e = cudaEventCreate(&event); e != cudaSuccess) {
      (void)cudaGetLastError();
      return failed(std::string("cudaEventCreate failed: ") + cudaGetErrorString(e));
    }
    events.push_back(event);
  }
  const uint64_t i = m->marks.recorded;
  if (const cudaError_t e = cudaEventRecord(events[i], c10::cuda::getCurrentCUDAStream().stream());
      e != cudaSuccess) {
    (void)cudaGetLastError();
    return failed(std::string("cudaEventRecord failed: ") + cudaGetErrorString(e));
  }
  m->marks.recorded = i + 1;
  *mark = i;
  return 0;
}

__attribute__((visibility("default"))) int memwall_exec_cuda_elapsed_v1(uint64_t from, uint64_t to,
                                                                        double* seconds) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  std::lock_guard lock(m->marks.mutex);
  if (from >= m->marks.recorded || to >= m->marks.recorded) {
    return failed("mark " + std::to_string(std::max(from, to)) + " was not recorded (" +
                  std::to_string(m->marks.recorded) + " since the last clear)");
  }
  cudaError_t e = cudaEventSynchronize(m->marks.events[to]);
  float ms = 0;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, m->marks.events[from], m->marks.events[to]);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return failed(std::string("cudaEventElapsedTime failed: ") + cudaGetErrorString(e));
  }
  *seconds = static_cast<double>(ms) * 1e-3;
  return 0;
}

__attribute__((visibility("default"))) int memwall_exec_cuda_clear_marks_v1() {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  std::lock_guard lock(m->marks.mutex);
  m->marks.recorded = 0;
  return 0;
}

__attribute__((visibility("default"))) int memwall_exec_cuda_record_v1(void** event) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  std::lock_guard lock(m->marks.mutex);
  cudaError_t e = cudaSuccess;
  if (m->marks.order == nullptr) e = cudaEventCreateWithFlags(&m->marks.order, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(m->marks.order, c10::cuda::getCurrentCUDAStream().stream());
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return failed(std::string("recording an ordering event failed: ") + cudaGetErrorString(e));
  }
  *event = m->marks.order;
  return 0;
}

__attribute__((visibility("default"))) int memwall_exec_cuda_stream_wait_v1(void* event) {
  CudaDeviceMemory* m = installed();
  if (m == nullptr) return failed("CUDA device memory is not installed");
  if (event == nullptr) return failed("stream_wait: no event");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(m->device));
  if (const cudaError_t e = cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(),
                                                static_cast<cudaEvent_t>(event), 0);
      e != cudaSuccess) {
    (void)cudaGetLastError();
    return failed(std::string("cudaStreamWaitEvent failed: ") + cudaGetErrorString(e));
  }
  return 0;
}

__attribute__((visibility("default"))) const char* memwall_exec_cuda_last_error_v1() {
  if (CudaDeviceMemory* m = installed(); m != nullptr && t_last_error.empty()) {
    std::lock_guard lock(m->error_mutex);
    if (!m->free_error.empty()) t_last_error = m->free_error;
  }
  return t_last_error.c_str();
}

}  // extern "C"
