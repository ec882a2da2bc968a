// The runtime engines measured (memwall/runtime/probes.h).
#include "memwall/runtime/probes.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/runtime/bounce_buffer.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/cpu_optimizer.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/nvme_engine.h"
#include "probe_fail.h"

namespace memwall::runtime {
namespace {

double gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

// Warms up with one call (faulting in the pages), then the best of `repeats`.
template <typename F>
double best_gbps(uint64_t bytes, int repeats, F&& once) {
  once();
  return gbps(bytes, best_seconds(repeats, once));
}

}  // namespace

// The copy engine with `bytes` on its device and in its pinned pool (the
// host side filled), for the copy probes; `what` names the probe in errors.
// Not in the anonymous namespace: CopyLoad::State holds one.
struct CopyRig {
  std::unique_ptr<CopyEngine> engine;
  std::shared_ptr<HostRegistrar> registrar;
  std::unique_ptr<alloc::Device> device;
  std::unique_ptr<alloc::Allocator> allocator;
  std::unique_ptr<HostPool> pool;
  HostBuffer host;
  alloc::Allocation on_device;

  CopyRig(uint64_t bytes, const char* what) {
    std::string why;
    engine = make_copy_engine(&why);
    registrar = engine->host_registrar();
    // Room for the copy and the allocator's rounding (2 MiB granules).
    device = engine->make_device(bytes + (uint64_t{64} << 20));
    allocator = alloc::make_allocator("stitching", *device, {});
    pool = std::make_unique<HostPool>(bytes + (uint64_t{1} << 20), true, registrar);
    host = pool->allocate(bytes);
    std::memset(host.data(), 1, bytes);
    on_device = allocator->allocate(bytes, 0);
    if (!on_device) probe_fail("the device could not hold {} bytes for the {}", bytes, what);
  }
  ~CopyRig() { allocator->free(on_device.ptr); }
  CopyRig(const CopyRig&) = delete;
  CopyRig& operator=(const CopyRig&) = delete;
};

NvmeRates measure_nvme_engine(const std::string& dir, uint64_t size, uint64_t block,
                              uint64_t tensor, int depth) {
  auto pool =
      std::make_shared<HostPool>(static_cast<uint64_t>(depth) * block + (uint64_t{1} << 20));
  NvmeOptions o;
  o.dirs = {dir};
  o.capacity = size;
  o.block_size = block;
  o.queue_depth = static_cast<unsigned>(depth);
  o.faults = "";
  o.bounce_allocator = make_pool_bounce_allocator(pool);
  NvmeEngine engine(o);
  NvmeRates rates;
  if (engine.stats().buffered || !engine.stats().registered_buffers) {
    rates.warning = engine.stats().warning;
  }
  rates.note = engine.stats().note;
  std::vector<uint8_t> buf(tensor);
  std::mt19937_64 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<Extent> extents;
  for (uint64_t done = 0; done + tensor <= size; done += tensor) {
    extents.push_back(engine.allocate(tensor));
  }
  const auto timed = [&](bool write) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<NvmeHandle> handles;
    for (const auto& e : extents) {
      handles.push_back(write ? engine.write_async(e, buf.data(), tensor)
                              : engine.read_async(e, buf.data(), tensor));
    }
    for (auto& h : handles) engine.wait(h);
    return gbps(extents.size() * tensor,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  rates.write_gbps = timed(true);
  rates.read_gbps = timed(false);
  return rates;
}

namespace {

// Note [Copy latency]
// ~~~~~~~~~~~~~~~~~~~
// The cost model times a copy as latency + bytes / bandwidth (h2d_time).
// The bandwidth comes from 256 MiB copies, where latency is lost; the
// latency is measured here, as the executor pays it: a copy issued, its
// completion waited for. On the emulated device that is a worker thread
// woken and a condition variable signalled back, 10-100 us on this 2-vCPU
// VM against the 10 us of a PCIe round trip that built-in GPUs assume;
// a plan of many small swaps (gpt-mini's vDNN: 68 copies of 0.3 MiB on
// average) pays it each time the worker was idle (the simulator charges it
// only then: a copy queued behind another runs as soon as that one ends).
// The median of 101 round trips, each way in turn (the first of each
// discarded: it may fault pages in).
double copy_latency(CopyEngine& engine, void* device, void* host) {
  constexpr uint64_t kBytes = 64;
  constexpr int kRounds = 101;
  std::vector<double> seconds;
  seconds.reserve(2 * kRounds);
  for (int r = 0; r <= kRounds; ++r) {
    for (const auto direction : {CopyDirection::kHostToDevice, CopyDirection::kDeviceToHost}) {
      const bool in = direction == CopyDirection::kHostToDevice;
      const auto t0 = std::chrono::steady_clock::now();
      engine.copy_async(in ? device : host, in ? host : device, kBytes, direction).wait();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) seconds.push_back(s);
    }
  }
  return median(std::move(seconds));
}

}  // namespace

CopyRates measure_copies(uint64_t bytes, int repeats) {
  CopyRig rig(bytes, "copy probe");
  CopyEngine& engine = *rig.engine;
  void* const device = rig.on_device.ptr;
  void* const host = rig.host.data();
  CopyRates rates;
  rates.engine = engine.name();
  rates.reference = rig.registrar != nullptr ? "cuMemcpyHtoD/DtoH" : "memcpy";
  if (rig.registrar != nullptr && rig.pool->stats().registered_bytes == 0) {
    rates.warning = "the pinned pool is not registered with the driver (" +
                    rig.pool->registration_error() + "): copies are staged";
  }
  const auto h2d = CopyDirection::kHostToDevice;
  const auto d2h = CopyDirection::kDeviceToHost;
  rates.h2d_gbps =
      best_gbps(bytes, repeats, [&] { engine.copy_async(device, host, bytes, h2d).wait(); });
  rates.d2h_gbps =
      best_gbps(bytes, repeats, [&] { engine.copy_async(host, device, bytes, d2h).wait(); });
  rates.reference_h2d_gbps =
      best_gbps(bytes, repeats, [&] { engine.reference_copy(device, host, bytes, h2d); });
  rates.reference_d2h_gbps =
      best_gbps(bytes, repeats, [&] { engine.reference_copy(host, device, bytes, d2h); });
  rates.latency_s = copy_latency(engine, device, host);
  return rates;
}

struct CopyLoad::State {
  explicit State(uint64_t block) : rig(block, "copy load"), bytes(block) {}
  CopyRig rig;
  uint64_t bytes;
  std::atomic<bool> running{false};
  std::thread worker;
  CopyLoadStats stats;  // the worker's, read after join
  std::string error;    // the worker's, read after join

  // One copy, waited for (a failed copy stops the load with its error
  // instead of being counted), then a pause as long as the copy took.
  void copy_and_pause(bool to_device, CopyLoadStats& into) {
    void* dst = rig.on_device.ptr;
    void* src = rig.host.data();
    auto direction = CopyDirection::kHostToDevice;
    if (!to_device) {
      std::swap(dst, src);
      direction = CopyDirection::kDeviceToHost;
    }
    const auto t0 = std::chrono::steady_clock::now();
    rig.engine->copy_async(dst, src, bytes, direction).wait();
    const auto took = std::chrono::steady_clock::now() - t0;
    into.busy_s += std::chrono::duration<double>(took).count();
    ++into.copies;
    std::this_thread::sleep_for(took);
  }

  template <typename Continue>
  CopyLoadStats run(Continue&& more) {
    CopyLoadStats s;
    const auto t0 = std::chrono::steady_clock::now();
    for (bool to_device = true; more(); to_device = !to_device) copy_and_pause(to_device, s);
    s.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }
};

CopyLoad::CopyLoad(uint64_t block_bytes) : state_(std::make_unique<State>(block_bytes)) {
  CopyLoadStats ignored;  // fault in both sides
  state_->copy_and_pause(true, ignored);
  state_->copy_and_pause(false, ignored);
}

CopyLoad::~CopyLoad() {
  if (state_->worker.joinable()) {  // not stop(): no error may leave a destructor
    state_->running = false;
    state_->worker.join();
  }
}

CopyLoadStats CopyLoad::alone(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  return state_->run([&] { return std::chrono::steady_clock::now() < end; });
}

void CopyLoad::start() {
  State& s = *state_;
  s.running = true;
  s.stats = {};
  s.worker = std::thread([&s] {
    try {
      s.stats = s.run([&s] { return s.running.load(std::memory_order_relaxed); });
    } catch (const std::exception& e) {
      s.error = e.what();
    }
  });
}

CopyLoadStats CopyLoad::stop() {
  State& s = *state_;
  s.running = false;
  s.worker.join();
  if (!s.error.empty()) probe_fail("the copy load failed: {}", s.error);
  return s.stats;
}

double cpu_adam_seconds(int64_t n, unsigned threads, bool bf16_copy, int repeats) {
  const auto size = static_cast<size_t>(n);
  std::vector<float> param(size, 0.5f), grad(size, 0.01f), m(size, 0.0f), v(size, 0.0f);
  std::vector<uint16_t> half(bf16_copy ? size : 0);
  const AdamWState state{param, grad, m, v};
  const HalfCopy out{bf16_copy ? HalfType::bf16 : HalfType::none, half};
  const StepOptions options{.threads = threads};
  int64_t step = 1;
  adamw_step({}, step++, state, out, options);  // touch every page
  return best_seconds(repeats, [&] { adamw_step({}, step++, state, out, options); });
}

}  // namespace memwall::runtime
