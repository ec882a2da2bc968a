// The CUDA copy engine (Note [CUDA copy engine]), the pinned pool's
// registration with the driver and the CUDA VMM allocator, run on the fake
// driver of tests/runtime/fake_cuda: a host-memory implementation of the
// driver entry points memwall uses that enforces the driver's rules
// (current context, mapped and accessible device ranges, registration
// bookkeeping, stream order, event states). It shows memwall calls the
// driver correctly; it says nothing of a real GPU's speed.
//
// With MEMWALL_TEST_REAL_CUDA=1 (scripts/gpu-check.sh on a GPU machine) the
// same tests run on the real driver, libcuda.so.1: what needs the fake's
// hooks (fault injection, delayed copies, its object and byte counts) is
// left out there and says so.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloc/alloc_test_util.h"
#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/host_pool.h"

#ifdef MEMWALL_FAKE_CUDA
#include <cuda.h>

// Whether these tests run on the real driver (MEMWALL_TEST_REAL_CUDA=1).
static bool on_real_driver() {
  static const bool real = [] {
    const char* chosen = std::getenv("MEMWALL_TEST_REAL_CUDA");
    return chosen != nullptr && std::string(chosen) == "1";
  }();
  return real;
}

// Before any test runs: memwall loads the driver once per process.
static const bool kFakeDriverChosen = [] {
  if (!on_real_driver()) ::setenv("MEMWALL_CUDA_DRIVER", MEMWALL_FAKE_CUDA, 1);
  return true;
}();

#define SKIP_ON_REAL_DRIVER(what)                                             \
  do {                                                                        \
    if (on_real_driver()) GTEST_SKIP() << (what) << " needs the fake driver"; \
  } while (0)

namespace memwall::runtime {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The fake driver's test hooks (tests/runtime/fake_cuda/fake_libcuda.cc).
struct FakeDriver {
  unsigned long long (*registered_bytes)() = nullptr;
  unsigned long long (*async_copies)(int registered) = nullptr;
  void (*fail)(const char* entry, int nth, int code) = nullptr;
  int (*live_objects)() = nullptr;
  void (*set_copy_delay_us)(unsigned us) = nullptr;
};

// The engine first (it loads the library), then the hooks from it.
const FakeDriver& fake() {
  static const FakeDriver hooks = [] {
    std::string why;
    (void)make_cuda_copy_engine(0, &why);
    void* library = dlopen(MEMWALL_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
    FakeDriver f;
    if (library == nullptr) return f;
    auto get = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(library, name));
    };
    get(f.registered_bytes, "fake_cuda_registered_bytes");
    get(f.async_copies, "fake_cuda_async_copies");
    get(f.fail, "fake_cuda_fail");
    get(f.live_objects, "fake_cuda_live_objects");
    get(f.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
    return f;
  }();
  return hooks;
}

class CudaCopyEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kFakeDriverChosen);
    std::string why;
    engine_ = make_cuda_copy_engine(0, &why);
    ASSERT_NE(engine_, nullptr) << why;
    if (!on_real_driver()) {
      ASSERT_NE(fake().live_objects, nullptr) << "the fake driver lacks its hooks";
    }
  }
  void TearDown() override {
    if (on_real_driver()) return;
    fake().set_copy_delay_us(0);
    fake().fail(nullptr, 0, 0);
  }
  std::unique_ptr<CopyEngine> engine_;
};

TEST_F(CudaCopyEngineTest, RoundTripsThroughVmmMemoryAndTheRegisteredPool) {
  if (on_real_driver()) {
    EXPECT_EQ(engine_->name().rfind("cuda (", 0), 0u) << engine_->name();
  } else {
    EXPECT_EQ(engine_->name(), "cuda (Fake CUDA Device)");
  }
  auto device = engine_->make_device(64 * kMiB);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->name(), "cuda-vmm");
  EXPECT_FALSE(device->host_accessible());
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const unsigned long long registered_before = on_real_driver() ? 0 : fake().async_copies(1);
  {
    HostPool pool(32 * kMiB, true, engine_->host_registrar());
    std::mt19937 rng(5);
    for (const uint64_t size : {uint64_t{1}, uint64_t{4097}, 3 * kMiB + 17}) {
      HostBuffer src = pool.allocate(size), back = pool.allocate(size);
      for (uint64_t i = 0; i < size; ++i) static_cast<uint8_t*>(src.data())[i] = rng() & 0xFF;
      const alloc::Allocation on_device = allocator->allocate(size, 0);
      ASSERT_NE(on_device.ptr, nullptr);
      engine_->copy_async(on_device.ptr, src.data(), size, CopyDirection::kHostToDevice).wait();
      CopyEvent down =
          engine_->copy_async(back.data(), on_device.ptr, size, CopyDirection::kDeviceToHost);
      down.wait();
      EXPECT_TRUE(down.done());
      EXPECT_EQ(std::memcmp(src.data(), back.data(), size), 0) << size;
      allocator->free(on_device.ptr);
    }
    const HostPoolStats ps = pool.stats();
    EXPECT_GT(ps.registered_bytes, 0u);
    EXPECT_EQ(ps.registered_bytes, ps.mapped_bytes);
    if (!on_real_driver()) {
      EXPECT_EQ(fake().registered_bytes(), ps.registered_bytes);
    }
    EXPECT_EQ(pool.registration_error(), "");
  }
  if (!on_real_driver()) {
    EXPECT_EQ(fake().registered_bytes(), 0u);                   // unregistered before unmapped
    EXPECT_EQ(fake().async_copies(1) - registered_before, 6u);  // all DMA-able
  }
  engine_->synchronize();
  const CopyStats s = engine_->stats();
  EXPECT_EQ(s.copies[0], 3u);
  EXPECT_EQ(s.copies[1], 3u);
  EXPECT_EQ(s.bytes[0], 1 + 4097 + 3 * kMiB + 17);
  EXPECT_EQ(s.bytes[1], s.bytes[0]);
}

TEST_F(CudaCopyEngineTest, StreamOrderEventsAndBusyTime) {
  SKIP_ON_REAL_DRIVER("delaying copies");
  auto device = engine_->make_device(16 * kMiB);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const alloc::Allocation on_device = allocator->allocate(kMiB, 0);
  std::vector<uint8_t> a(kMiB, 1), b(kMiB, 2), back(kMiB, 0);
  fake().set_copy_delay_us(20'000);
  // Both copies write the same device range; the later submitted must win.
  CopyEvent first =
      engine_->copy_async(on_device.ptr, a.data(), kMiB, CopyDirection::kHostToDevice);
  CopyEvent last = engine_->copy_async(on_device.ptr, b.data(), kMiB, CopyDirection::kHostToDevice);
  EXPECT_FALSE(last.done());  // asynchronous: 40 ms of copies are queued
  last.wait();
  EXPECT_TRUE(first.done());
  fake().set_copy_delay_us(0);
  engine_->copy_async(back.data(), on_device.ptr, kMiB, CopyDirection::kDeviceToHost).wait();
  EXPECT_EQ(back.front(), 2);
  EXPECT_EQ(back.back(), 2);
  const CopyStats s = engine_->stats();
  EXPECT_EQ(s.copies[0], 2u);
  EXPECT_GE(s.busy_seconds[0], 0.035);  // two delayed copies, timed by events
  allocator->free(on_device.ptr);
}

// Note [Device-side waits]: a copy back of a range still being copied in,
// on the other stream, waits for it on the device: the host submits both
// at once, without blocking, and reads what the first wrote.
TEST_F(CudaCopyEngineTest, ACopyWaitsOnTheDeviceForAnotherStreamsEvent) {
  SKIP_ON_REAL_DRIVER("delaying copies");
  auto device = engine_->make_device(16 * kMiB);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const alloc::Allocation on_device = allocator->allocate(kMiB, 0);
  std::vector<uint8_t> zeros(kMiB, 0), ones(kMiB, 1), back(kMiB, 7);
  engine_->copy_async(on_device.ptr, zeros.data(), kMiB, CopyDirection::kHostToDevice).wait();
  fake().set_copy_delay_us(50'000);
  const CopyEvent in =
      engine_->copy_async(on_device.ptr, ones.data(), kMiB, CopyDirection::kHostToDevice);
  ASSERT_NE(in.native_handle(), nullptr);
  ASSERT_TRUE(engine_->device_wait(in.native_handle(), CopyDirection::kDeviceToHost));
  const CopyEvent out =
      engine_->copy_async(back.data(), on_device.ptr, kMiB, CopyDirection::kDeviceToHost);
  EXPECT_FALSE(out.done());  // behind the 50 ms copy in, on the device
  out.wait();
  EXPECT_TRUE(in.done());
  EXPECT_EQ(back.front(), 1);
  EXPECT_EQ(back.back(), 1);
  fake().set_copy_delay_us(0);
  EXPECT_THROW(engine_->device_wait(nullptr, CopyDirection::kDeviceToHost), std::invalid_argument);
  // The emulated device has no events to wait on: its callers wait on the host.
  EXPECT_FALSE(make_emulated_copy_engine()->device_wait(in.native_handle(),
                                                        CopyDirection::kHostToDevice));
  EXPECT_EQ(make_emulated_copy_engine()
                ->copy_async(back.data(), ones.data(), 1, CopyDirection::kHostToDevice)
                .native_handle(),
            nullptr);
  allocator->free(on_device.ptr);
}

TEST_F(CudaCopyEngineTest, ReferenceCopyIsSynchronous) {
  auto device = engine_->make_device(8 * kMiB);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const alloc::Allocation on_device = allocator->allocate(5000, 0);
  std::vector<uint8_t> a(5000, 9), b(5000, 0);
  engine_->reference_copy(on_device.ptr, a.data(), a.size(), CopyDirection::kHostToDevice);
  engine_->reference_copy(b.data(), on_device.ptr, b.size(), CopyDirection::kDeviceToHost);
  EXPECT_EQ(a, b);
  allocator->free(on_device.ptr);
}

TEST_F(CudaCopyEngineTest, DriverFailuresAreOneLineErrors) {
  SKIP_ON_REAL_DRIVER("injecting driver failures");
  auto device = engine_->make_device(8 * kMiB);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const alloc::Allocation on_device = allocator->allocate(kMiB, 0);
  std::vector<uint8_t> host(kMiB, 3);
  fake().fail("cuMemcpyHtoDAsync_v2", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  try {
    engine_->copy_async(on_device.ptr, host.data(), kMiB, CopyDirection::kHostToDevice);
    ADD_FAILURE() << "the failed copy was not reported";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("copy engine (cuda): cuMemcpyHtoDAsync failed: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  // A host range is no device range: the driver refuses, the engine says so.
  std::vector<uint8_t> other(kMiB);
  EXPECT_THROW(engine_->copy_async(other.data(), host.data(), kMiB, CopyDirection::kHostToDevice),
               std::runtime_error);
  // The engine still works after both.
  engine_->copy_async(on_device.ptr, host.data(), kMiB, CopyDirection::kHostToDevice).wait();
  // A pool the driver will not register stays usable and says why.
  fake().fail("cuMemHostRegister_v2", 1, CUDA_ERROR_OUT_OF_MEMORY);
  HostPool pool(4 * kMiB, true, engine_->host_registrar());
  HostBuffer buffer = pool.allocate(kMiB);
  EXPECT_EQ(pool.stats().registered_bytes, 0u);
  EXPECT_NE(pool.registration_error().find("cuMemHostRegister failed"), std::string::npos)
      << pool.registration_error();
  engine_->copy_async(buffer.data(), on_device.ptr, kMiB, CopyDirection::kDeviceToHost).wait();
  EXPECT_EQ(static_cast<uint8_t*>(buffer.data())[kMiB - 1], 3);
  allocator->free(on_device.ptr);
}

TEST_F(CudaCopyEngineTest, ThreadsSubmittingAtOnce) {
  auto device = engine_->make_device(32 * kMiB);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  constexpr int kThreads = 4;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const alloc::Allocation on_device = allocator->allocate(kMiB, 0);
      std::vector<uint8_t> src(kMiB, static_cast<uint8_t>(t + 1)), back(kMiB, 0);
      for (int i = 0; i < 8; ++i) {
        // The two directions are two streams: nothing orders them but the wait.
        engine_->copy_async(on_device.ptr, src.data(), kMiB, CopyDirection::kHostToDevice).wait();
        engine_->copy_async(back.data(), on_device.ptr, kMiB, CopyDirection::kDeviceToHost).wait();
        if (back != src) ++wrong;
        (void)engine_->stats();
      }
      allocator->free(on_device.ptr);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  engine_->synchronize();
  EXPECT_EQ(engine_->stats().copies[1], uint64_t{kThreads} * 8);
}

// alloc's CUDA VMM backend on the fake driver: the device-level sequence of
// tests/alloc/device_test.cc (which skips without a driver), the budget,
// and each allocator policy with data checked through the copy engine.
TEST(CudaVmmOnFakeDriver, MapsChunksAndEveryPolicyHoldsItsData) {
  ASSERT_TRUE(kFakeDriverChosen);
  std::string why;
  auto device = alloc::make_cuda_vmm(0, 8 * kMiB, &why);
  ASSERT_NE(device, nullptr) << why;
  EXPECT_EQ(device->granularity(), 2 * kMiB);  // the fake's, and data-centre GPUs' (recommended)
  alloc::testing::map_two_chunks_out_of_order(*device);
  // 8 MiB is four chunks: a fifth is refused, not thrown.
  std::vector<alloc::ChunkRun> runs;
  EXPECT_FALSE(device->create_chunks(5, runs));
  ASSERT_TRUE(device->create_chunks(4, runs));
  for (const alloc::ChunkRun& run : runs) device->release_chunks(run);

  auto engine = make_cuda_copy_engine(0, &why);
  ASSERT_NE(engine, nullptr) << why;
  for (const char* policy : {"caching", "expandable", "stitching"}) {
    auto gpu = engine->make_device(64 * kMiB);
    auto allocator = alloc::make_allocator(policy, *gpu, {});
    std::mt19937 rng(11);
    std::vector<std::pair<alloc::Allocation, std::vector<uint8_t>>> live;
    for (int i = 0; i < 60; ++i) {
      if (!live.empty() && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        std::vector<uint8_t> back(live[k].second.size());
        engine
            ->copy_async(back.data(), live[k].first.ptr, back.size(), CopyDirection::kDeviceToHost)
            .wait();
        EXPECT_EQ(back, live[k].second) << policy;
        allocator->free(live[k].first.ptr);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      const uint64_t size = 1 + rng() % (3 * kMiB);
      const alloc::Allocation got = allocator->allocate(size, 0);
      if (!got) continue;  // out of the 64 MiB: the next frees make room
      std::vector<uint8_t> data(size, static_cast<uint8_t>(rng()));
      engine->copy_async(got.ptr, data.data(), size, CopyDirection::kHostToDevice).wait();
      live.emplace_back(got, std::move(data));
    }
    for (auto& [allocation, data] : live) allocator->free(allocation.ptr);
  }
}

TEST(CudaCopyEngine, EverythingIsReleased) {
  ASSERT_TRUE(kFakeDriverChosen);
  SKIP_ON_REAL_DRIVER("counting the driver's live objects");
  const int before = fake().live_objects();
  {
    auto engine = make_cuda_copy_engine(0);
    ASSERT_NE(engine, nullptr);
    auto device = engine->make_device(8 * kMiB);
    auto allocator = alloc::make_allocator("stitching", *device, {});
    HostPool pool(4 * kMiB, true, engine->host_registrar());
    HostBuffer host = pool.allocate(kMiB);
    const alloc::Allocation on_device = allocator->allocate(kMiB, 0);
    CopyEvent kept =
        engine->copy_async(on_device.ptr, host.data(), kMiB, CopyDirection::kHostToDevice);
    kept.wait();
    allocator->free(on_device.ptr);
    engine.reset();  // the event outlives the engine and still answers
    EXPECT_TRUE(kept.done());
  }
  EXPECT_EQ(fake().live_objects(), before);
  EXPECT_EQ(fake().registered_bytes(), 0u);
}

TEST(CudaCopyEngine, ChosenByDefaultUnlessTheEmulatedDeviceIsAsked) {
  ASSERT_TRUE(kFakeDriverChosen);
  std::string why = "unset";
  if (on_real_driver()) {
    EXPECT_EQ(make_copy_engine(&why)->name().rfind("cuda (", 0), 0u);
  } else {
    EXPECT_EQ(make_copy_engine(&why)->name(), "cuda (Fake CUDA Device)");
  }
  EXPECT_EQ(why, "");
  ::setenv("MEMWALL_DEVICE", "emulated", 1);
  EXPECT_EQ(make_copy_engine(&why)->name(), "emulated (host threads)");
  EXPECT_EQ(why, "MEMWALL_DEVICE=emulated: emulated device");
  ::unsetenv("MEMWALL_DEVICE");
  if (!on_real_driver()) {  // a real machine may have four GPUs
    EXPECT_EQ(make_cuda_copy_engine(3, &why), nullptr);
    EXPECT_EQ(why, "no CUDA device 3 (found 1)");
  }
}

}  // namespace
}  // namespace memwall::runtime

#else

TEST(CudaCopyEngine, SkippedWithoutTheToolkit) {
  GTEST_SKIP() << "memwall was built without the CUDA toolkit: no CUDA copy engine to test";
}

#endif
