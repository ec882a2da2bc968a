// Device<->host copies on their own streams, with completion events.
//
// Note [Emulated device copies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With a CUDA GPU, a copy is cuMemcpyHtoDAsync / cuMemcpyDtoHAsync on one
// of two copy streams and its completion a CUDA event (Note [CUDA copy
// engine] in cuda_copy_engine.cc). Without one, the device is emulated on
// the host: its memory comes from memwall's device allocator (alloc's
// HostVMM, pointers usable on the CPU), and each direction is a worker
// thread that runs its copies in submission order, as a stream does. The
// API is the same either way, so the executor does not care which it runs
// on: it takes its device memory from make_device(), its pinned pool's
// registrar from host_registrar(), and copies with copy_async(). Copies of
// one direction are ordered; the two directions run concurrently, as a
// GPU's two copy engines do. make_copy_engine() takes CUDA's when a driver
// and a GPU are present and the emulated one otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "memwall/alloc/device.h"
#include "memwall/runtime/host_pool.h"

namespace memwall::runtime {

enum class CopyDirection { kHostToDevice, kDeviceToHost };

// Completion of one copy. Cheap to copy (shared state).
class CopyEvent {
 public:
  // What an engine's events are: a worker's flag, a CUDA event.
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual bool done() const = 0;
    virtual void wait() const = 0;
    virtual void* native() const { return nullptr; }
  };

  CopyEvent() = default;
  explicit CopyEvent(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  // Throw std::runtime_error when the device reports the copy failed.
  bool done() const { return impl_ == nullptr || impl_->done(); }
  void wait() const {  // blocks until the copy has finished; no-op for an empty event
    if (impl_ != nullptr) impl_->wait();
  }
  // A CUDA engine's copy: its end event (a CUevent of the GPU's primary
  // context), for a stream of another library (torch's) to wait on with
  // cuStreamWaitEvent; null on the emulated device and for an empty event.
  void* native_handle() const { return impl_ == nullptr ? nullptr : impl_->native(); }

 private:
  std::shared_ptr<const Impl> impl_;
};

struct CopyStats {
  uint64_t copies[2] = {0, 0};  // completed, by CopyDirection
  uint64_t bytes[2] = {0, 0};
  double busy_seconds[2] = {0, 0};  // time the direction's stream spent copying
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Enqueues a copy of `bytes` from `src` to `dst` on `direction`'s stream
  // (device memory from make_device()'s allocations). Both ranges must stay
  // valid until the event is done. Throws std::invalid_argument for null
  // pointers with bytes > 0 or overlapping ranges, std::runtime_error when
  // the device refuses the copy.
  virtual CopyEvent copy_async(void* dst, const void* src, uint64_t bytes,
                               CopyDirection direction) = 0;
  // Waits for every copy submitted so far.
  virtual void synchronize() = 0;
  // Note [Device-side waits]: copies of `direction` submitted after this
  // call start only once `native_event` (a CUevent recorded on any stream
  // of the GPU's primary context: torch's, or this engine's other one) has
  // happened; the host does not block. False, doing nothing, where the
  // engine cannot (the emulated device): the caller waits on the host.
  virtual bool device_wait(void* /*native_event*/, CopyDirection /*direction*/) { return false; }
  virtual CopyStats stats() const = 0;
  virtual std::string name() const = 0;  // "emulated (host threads)", "cuda (NAME)"

  // The plain synchronous copy the engine is measured against: memcpy on
  // the emulated device, cuMemcpyHtoD / cuMemcpyDtoH on a GPU.
  virtual void reference_copy(void* dst, const void* src, uint64_t bytes,
                              CopyDirection direction) = 0;
  // The device memory this engine copies to and from, `capacity` bytes:
  // alloc's HostVMM on the emulated device, CUDA VMM on the GPU.
  virtual std::unique_ptr<alloc::Device> make_device(uint64_t capacity) = 0;
  // What a pinned pool feeding this engine registers its buffers with
  // (Note [Pinned host pool]); null when nothing needs registering.
  virtual std::shared_ptr<HostRegistrar> host_registrar() const { return nullptr; }
};

// The emulated device's engine (Note [Emulated device copies]).
std::unique_ptr<CopyEngine> make_emulated_copy_engine();

// The CUDA engine on GPU `device_index`; null, with `why`, when this build
// has no CUDA toolkit, the driver cannot be loaded or the GPU is missing.
std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device_index, std::string* why = nullptr);

// CUDA's (GPU 0) when a driver and GPU are present, else the emulated one;
// `why` (if given) receives the reason the CUDA engine was not used.
// MEMWALL_DEVICE=emulated chooses the emulated device even with a GPU.
std::unique_ptr<CopyEngine> make_copy_engine(std::string* why = nullptr);

}  // namespace memwall::runtime
