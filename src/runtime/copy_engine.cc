#include "memwall/runtime/copy_engine.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "copy_checks.h"

namespace memwall::runtime {
namespace {

// A worker's completion flag.
class WorkerEvent final : public CopyEvent::Impl {
 public:
  bool done() const override {
    const std::lock_guard lock(mutex_);
    return done_;
  }
  void wait() const override {
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [this] { return done_; });
  }
  void finish() {
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    finished_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool done_ = false;
};

struct CopyJob {
  void* dst;
  const void* src;
  uint64_t bytes;
  std::shared_ptr<WorkerEvent> event;
};

// One stream: a worker thread running its jobs in order.
class Stream {
 public:
  Stream() : worker_([this] { run(); }) {}
  ~Stream() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void push(CopyJob job) {
    {
      const std::lock_guard lock(mutex_);
      queue_.push_back(std::move(job));
      ++submitted_;
    }
    wake_.notify_all();
  }

  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return completed_ == submitted_; });
  }

  void totals(uint64_t& copies, uint64_t& bytes, double& busy) const {
    const std::lock_guard lock(mutex_);
    copies = completed_;
    bytes = bytes_;
    busy = busy_seconds_;
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      CopyJob job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      if (job.bytes > 0) std::memcpy(job.dst, job.src, job.bytes);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // The counters, then the event, both under the stream's lock: whoever
      // sees the event done (or the stream drained) also sees the copy
      // counted in stats().
      lock.lock();
      ++completed_;
      bytes_ += job.bytes;
      busy_seconds_ += seconds;
      job.event->finish();
      if (completed_ == submitted_) idle_.notify_all();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<CopyJob> queue_;
  bool stopping_ = false;
  uint64_t submitted_ = 0, completed_ = 0, bytes_ = 0;
  double busy_seconds_ = 0;
  std::thread worker_;  // last: starts after the members it uses
};

class EmulatedCopyEngine final : public CopyEngine {
 public:
  CopyEvent copy_async(void* dst, const void* src, uint64_t bytes,
                       CopyDirection direction) override {
    check_copy_arguments(dst, src, bytes);
    auto event = std::make_shared<WorkerEvent>();
    streams_[static_cast<int>(direction)].push(CopyJob{dst, src, bytes, event});
    return CopyEvent(std::move(event));
  }

  void synchronize() override {
    for (Stream& s : streams_) s.drain();
  }

  CopyStats stats() const override {
    CopyStats out;
    for (int d = 0; d < 2; ++d)
      streams_[d].totals(out.copies[d], out.bytes[d], out.busy_seconds[d]);
    return out;
  }

  std::string name() const override { return "emulated (host threads)"; }

  void reference_copy(void* dst, const void* src, uint64_t bytes,
                      CopyDirection /*direction*/) override {
    check_copy_arguments(dst, src, bytes);
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }

  std::unique_ptr<alloc::Device> make_device(uint64_t capacity) override {
    // Populated: memory ready when mapped, as cuMemMap leaves it (Note
    // [Populated mappings] in alloc/host_vmm.cc).
    return alloc::make_host_vmm(capacity, alloc::kDefaultGranularity, /*populate=*/true);
  }

 private:
  Stream streams_[2];  // by CopyDirection
};

}  // namespace

std::unique_ptr<CopyEngine> make_emulated_copy_engine() {
  return std::make_unique<EmulatedCopyEngine>();
}

std::unique_ptr<CopyEngine> make_copy_engine(std::string* why) {
  std::string reason;
  const char* choice = std::getenv("MEMWALL_DEVICE");
  if (choice != nullptr && std::string_view(choice) == "emulated") {
    reason = "MEMWALL_DEVICE=emulated";
  } else if (auto cuda = make_cuda_copy_engine(0, &reason)) {
    if (why != nullptr) why->clear();
    return cuda;
  }
  if (why != nullptr) *why = reason + ": emulated device";
  return make_emulated_copy_engine();
}

}  // namespace memwall::runtime
