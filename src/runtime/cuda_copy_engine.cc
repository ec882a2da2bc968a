// The copy engine on a CUDA GPU (Note [CUDA copy engine]).
//
// Note [CUDA copy engine]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Two streams created non-blocking (so that no work on the legacy default
// stream serializes with them), one per direction, as a GPU has one copy
// engine each way. A copy is cuMemcpyHtoDAsync / cuMemcpyDtoHAsync between
// a device range from memwall's CUDA VMM allocator (make_device) and host
// memory, bracketed by two timing events: the second is the copy's
// completion (its CopyEvent), and the time between the two is the stream's
// busy time in stats(). The copy runs asynchronously only when the host side
// is page-locked and known to the driver: the pinned pool registers its
// buffers through host_registrar() (cuMemHostRegister, PORTABLE so any
// context may use them); pageable memory still copies correctly but the
// driver stages it and the call returns late. Statistics count a copy when
// its events are seen complete (stats() and synchronize() look), in
// submission order per direction. The driver acts on the calling thread's
// current context, so every call first makes the device's primary context
// current; the context is retained until the engine and the last event it
// returned are gone. Nothing here runs without a GPU: the tests run it on
// the fake driver (tests/runtime/fake_cuda), which checks the same rules.
//
// Note [Device-side waits]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A swap-in's compute must not read the buffer before its copy is done, and
// a swap-out's copy must not read it before the kernels that wrote it are.
// Waiting on the host (cuEventSynchronize) keeps the CPU from queuing any
// more kernels meanwhile, so the GPU idles once the queue drains; a stream
// waiting on the event (cuStreamWaitEvent) orders the same work on the GPU
// and lets the host run ahead, as the simulator assumes. Both sides share
// the GPU's primary context (torch's too), so events cross between its
// streams and ours: CopyEvent::native_handle gives a copy's end event to
// torch's stream, and device_wait makes a copy stream wait for an event
// recorded on torch's (libmemwall_exec_cuda.so's record_v1). The executor
// uses them on a GPU (src/exec/executor_copies.cc).
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "copy_checks.h"
#include "memwall/alloc/cuda_driver.h"
#include "memwall/runtime/copy_engine.h"

namespace memwall::runtime {

#ifdef MEMWALL_HAVE_CUDA
namespace {

using alloc::CudaDriver;

// The device's primary context, retained while anything uses it.
class CudaContext {
 public:
  CudaContext(const CudaDriver& loaded, CUdevice ordinal, CUcontext primary, std::string name)
      : driver(loaded), device(ordinal), context(primary), device_name(std::move(name)) {}
  ~CudaContext() { driver.primary_ctx_release(device); }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  void bind() const { check(driver.ctx_set_current(context), "cuCtxSetCurrent"); }
  // For destructors: no throwing.
  bool try_bind() const noexcept { return driver.ctx_set_current(context) == CUDA_SUCCESS; }
  void check(CUresult result, const char* call) const {
    if (result != CUDA_SUCCESS) {
      throw std::runtime_error("copy engine (cuda): " + alloc::cuda_failure(driver, call, result));
    }
  }

  const CudaDriver& driver;
  const CUdevice device;
  const CUcontext context;
  const std::string device_name;
};

// One CUDA event; destroyed with the last CopyEvent or record that holds it.
class CudaEvent final : public CopyEvent::Impl {
 public:
  explicit CudaEvent(std::shared_ptr<const CudaContext> context) : context_(std::move(context)) {
    context_->bind();
    context_->check(context_->driver.event_create(&event_, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~CudaEvent() override {
    if (context_->try_bind()) context_->driver.event_destroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  bool done() const override {
    context_->bind();
    const CUresult result = context_->driver.event_query(event_);
    if (result == CUDA_ERROR_NOT_READY) return false;
    context_->check(result, "cuEventQuery");
    return true;
  }
  void wait() const override {
    context_->bind();
    context_->check(context_->driver.event_synchronize(event_), "cuEventSynchronize");
  }
  CUevent get() const { return event_; }
  void* native() const override { return event_; }

 private:
  std::shared_ptr<const CudaContext> context_;
  CUevent event_ = nullptr;
};

class CudaHostRegistrar final : public HostRegistrar {
 public:
  explicit CudaHostRegistrar(std::shared_ptr<const CudaContext> context)
      : context_(std::move(context)) {}
  bool register_range(void* data, uint64_t bytes, std::string& why) override {
    if (!context_->try_bind()) {
      why = "cuCtxSetCurrent failed";
      return false;
    }
    const CUresult result =
        context_->driver.host_register(data, bytes, CU_MEMHOSTREGISTER_PORTABLE);
    if (result == CUDA_SUCCESS) return true;
    why = alloc::cuda_failure(context_->driver, "cuMemHostRegister", result);
    return false;
  }
  void unregister_range(void* data) override {
    if (context_->try_bind()) context_->driver.host_unregister(data);
  }

 private:
  std::shared_ptr<const CudaContext> context_;
};

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(std::shared_ptr<const CudaContext> context, int device_index)
      : context_(std::move(context)), device_index_(device_index) {
    context_->bind();
    for (CUstream& stream : streams_) {
      context_->check(context_->driver.stream_create(&stream, CU_STREAM_NON_BLOCKING),
                      "cuStreamCreate");
    }
  }
  ~CudaCopyEngine() override {
    if (!context_->try_bind()) return;
    for (CUstream stream : streams_) {
      if (stream == nullptr) continue;
      context_->driver.stream_synchronize(stream);
      context_->driver.stream_destroy(stream);
    }
  }
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  CopyEvent copy_async(void* dst, const void* src, uint64_t bytes,
                       CopyDirection direction) override {
    check_copy_arguments(dst, src, bytes);
    const int d = static_cast<int>(direction);
    const std::lock_guard lock(mutex_);  // submission order = stream order
    harvest_locked();
    auto start = std::make_shared<CudaEvent>(context_);
    auto end = std::make_shared<CudaEvent>(context_);
    const CudaDriver& driver = context_->driver;
    context_->check(driver.event_record(start->get(), streams_[d]), "cuEventRecord");
    if (direction == CopyDirection::kHostToDevice) {
      context_->check(
          driver.memcpy_htod_async(reinterpret_cast<CUdeviceptr>(dst), src, bytes, streams_[d]),
          "cuMemcpyHtoDAsync");
    } else {
      context_->check(
          driver.memcpy_dtoh_async(dst, reinterpret_cast<CUdeviceptr>(src), bytes, streams_[d]),
          "cuMemcpyDtoHAsync");
    }
    context_->check(driver.event_record(end->get(), streams_[d]), "cuEventRecord");
    pending_[d].push_back(Pending{bytes, std::move(start), end});
    return CopyEvent(std::move(end));
  }

  // Note [Device-side waits]: the wait goes on the stream before the next
  // copy's start event, so that busy time (start to end) leaves it out.
  bool device_wait(void* native_event, CopyDirection direction) override {
    if (native_event == nullptr) throw std::invalid_argument("device_wait: no event");
    const std::lock_guard lock(mutex_);  // before the copies submitted after it
    context_->bind();
    context_->check(context_->driver.stream_wait_event(streams_[static_cast<int>(direction)],
                                                       static_cast<CUevent>(native_event), 0),
                    "cuStreamWaitEvent");
    return true;
  }

  void synchronize() override {
    context_->bind();
    for (CUstream stream : streams_) {
      context_->check(context_->driver.stream_synchronize(stream), "cuStreamSynchronize");
    }
    const std::lock_guard lock(mutex_);
    harvest_locked();
  }

  CopyStats stats() const override {
    const std::lock_guard lock(mutex_);
    harvest_locked();
    return stats_;
  }

  std::string name() const override { return "cuda (" + context_->device_name + ")"; }

  void reference_copy(void* dst, const void* src, uint64_t bytes,
                      CopyDirection direction) override {
    check_copy_arguments(dst, src, bytes);
    context_->bind();
    if (direction == CopyDirection::kHostToDevice) {
      context_->check(context_->driver.memcpy_htod(reinterpret_cast<CUdeviceptr>(dst), src, bytes),
                      "cuMemcpyHtoD");
    } else {
      context_->check(context_->driver.memcpy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
                      "cuMemcpyDtoH");
    }
  }

  std::unique_ptr<alloc::Device> make_device(uint64_t capacity) override {
    std::string why;
    auto device = alloc::make_cuda_vmm(device_index_, capacity, &why);
    if (device == nullptr) throw std::runtime_error("copy engine (cuda): " + why);
    return device;
  }

  std::shared_ptr<HostRegistrar> host_registrar() const override {
    return std::make_shared<CudaHostRegistrar>(context_);
  }

 private:
  struct Pending {
    uint64_t bytes;
    std::shared_ptr<CudaEvent> start, end;
  };

  // Counts the copies whose events completed, oldest first per direction.
  void harvest_locked() const {
    for (int d = 0; d < 2; ++d) {
      auto& queue = pending_[d];
      while (!queue.empty() && queue.front().end->done()) {
        float ms = 0;
        context_->check(context_->driver.event_elapsed_time(&ms, queue.front().start->get(),
                                                            queue.front().end->get()),
                        "cuEventElapsedTime");
        ++stats_.copies[d];
        stats_.bytes[d] += queue.front().bytes;
        stats_.busy_seconds[d] += static_cast<double>(ms) / 1e3;
        queue.pop_front();
      }
    }
  }

  std::shared_ptr<const CudaContext> context_;
  const int device_index_;
  CUstream streams_[2] = {nullptr, nullptr};  // by CopyDirection
  mutable std::mutex mutex_;
  mutable std::deque<Pending> pending_[2];
  mutable CopyStats stats_;
};

}  // namespace

std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device_index, std::string* why) {
  std::string reason;
  auto unavailable = [&](std::string text) -> std::unique_ptr<CopyEngine> {
    if (why != nullptr) *why = std::move(text);
    return nullptr;
  };
  CUdevice device = 0;
  const CudaDriver* driver = alloc::load_cuda_device(device_index, device, reason);
  if (driver == nullptr) return unavailable(reason);
  CUcontext context = nullptr;
  char name[256] = {};
  if (const CUresult r = driver->device_get_name(name, sizeof name - 1, device);
      r != CUDA_SUCCESS) {
    return unavailable(alloc::cuda_failure(*driver, "cuDeviceGetName", r));
  }
  if (const CUresult r = driver->primary_ctx_retain(&context, device); r != CUDA_SUCCESS) {
    return unavailable(alloc::cuda_failure(*driver, "cuDevicePrimaryCtxRetain", r));
  }
  auto shared = std::make_shared<const CudaContext>(*driver, device, context, name);
  try {
    return std::make_unique<CudaCopyEngine>(std::move(shared), device_index);
  } catch (const std::runtime_error& e) {
    return unavailable(e.what());
  }
}

#else

std::unique_ptr<CopyEngine> make_cuda_copy_engine(int /*device_index*/, std::string* why) {
  if (why != nullptr) *why = "memwall was built without the CUDA toolkit";
  return nullptr;
}

#endif

}  // namespace memwall::runtime
