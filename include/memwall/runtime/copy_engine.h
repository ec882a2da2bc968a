// Device<->host copies on their own streams, with completion events.
//
// Note [Emulated device copies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With a CUDA GPU, a copy is cudaMemcpyAsync on a copy stream and its
// event a CUDA event. Without one, the device is emulated on the host: its
// memory comes from memwall's device allocator (alloc's HostVMM, pointers
// usable on the CPU), and each direction is a worker thread that runs its
// copies in submission order, as a stream does. The API is the same either
// way, so the executor does not care which it runs on. Copies of one
// direction are ordered; the two directions run concurrently, as a GPU's
// two copy engines do. make_copy_engine() takes CUDA's when a driver and a
// GPU are present (the CUDA path arrives with a GPU session; today it
// reports why it is unavailable) and the emulated one otherwise.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace memwall::runtime {

enum class CopyDirection { kHostToDevice, kDeviceToHost };

// Completion of one copy. Cheap to copy (shared state).
class CopyEvent {
 public:
  CopyEvent() = default;
  bool done() const;
  void wait() const;  // blocks until the copy has finished; no-op for an empty event

  struct State {
    mutable std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
  };
  explicit CopyEvent(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

struct CopyStats {
  uint64_t copies[2] = {0, 0};  // by CopyDirection
  uint64_t bytes[2] = {0, 0};
  double busy_seconds[2] = {0, 0};  // time the direction's stream spent copying
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Enqueues a copy of `bytes` from `src` to `dst` on `direction`'s stream.
  // Both ranges must stay valid until the event is done. Throws
  // std::invalid_argument for null pointers with bytes > 0 or overlapping
  // ranges.
  virtual CopyEvent copy_async(void* dst, const void* src, uint64_t bytes,
                               CopyDirection direction) = 0;
  // Waits for every copy submitted so far.
  virtual void synchronize() = 0;
  virtual CopyStats stats() const = 0;
  virtual std::string name() const = 0;  // "emulated (host threads)", "cuda"
};

// The emulated device's engine (Note [Emulated device copies]).
std::unique_ptr<CopyEngine> make_emulated_copy_engine();

// CUDA's when a driver and GPU are present, else the emulated one; `why`
// (if given) receives the reason the CUDA engine was not used.
std::unique_ptr<CopyEngine> make_copy_engine(std::string* why = nullptr);

}  // namespace memwall::runtime
