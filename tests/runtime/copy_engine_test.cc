// Note [Emulated device copies]: device memory from memwall's own device
// allocator (HostVMM), host memory from the pinned pool; copies ordered per
// direction, both directions concurrent, every byte where it belongs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/host_pool.h"

namespace memwall::runtime {
namespace {

constexpr uint64_t kCopyMiB = 1 << 20;

TEST(CopyEngine, RoundTripsThroughTheEmulatedDeviceAndThePinnedPool) {
  auto device = alloc::make_host_vmm(64 * kCopyMiB);
  ASSERT_NE(device, nullptr);
  auto allocator = alloc::make_allocator("stitching", *device, {});
  HostPool pool(64 * kCopyMiB);
  auto engine = make_emulated_copy_engine();
  std::mt19937 rng(3);
  for (const uint64_t size : {uint64_t{1}, uint64_t{4097}, 3 * kCopyMiB + 17}) {
    HostBuffer src = pool.allocate(size), back = pool.allocate(size);
    for (uint64_t i = 0; i < size; ++i) static_cast<uint8_t*>(src.data())[i] = rng() & 0xFF;
    alloc::Allocation on_device = allocator->allocate(size, 0);
    ASSERT_NE(on_device.ptr, nullptr);
    CopyEvent up =
        engine->copy_async(on_device.ptr, src.data(), size, CopyDirection::kHostToDevice);
    up.wait();
    EXPECT_TRUE(up.done());
    engine->copy_async(back.data(), on_device.ptr, size, CopyDirection::kDeviceToHost).wait();
    EXPECT_EQ(std::memcmp(src.data(), back.data(), size), 0) << size;
    allocator->free(on_device.ptr);
  }
  const CopyStats s = engine->stats();
  EXPECT_EQ(s.copies[0], 3u);
  EXPECT_EQ(s.copies[1], 3u);
  EXPECT_EQ(s.bytes[0], 1 + 4097 + 3 * kCopyMiB + 17);
}

TEST(CopyEngine, CopiesOfOneDirectionRunInSubmissionOrder) {
  auto engine = make_emulated_copy_engine();
  std::vector<uint8_t> a(kCopyMiB, 1), b(kCopyMiB, 2), dst(kCopyMiB, 0);
  // Both copies write dst; the later submitted must win, as on a stream.
  engine->copy_async(dst.data(), a.data(), kCopyMiB, CopyDirection::kHostToDevice);
  CopyEvent last = engine->copy_async(dst.data(), b.data(), kCopyMiB, CopyDirection::kHostToDevice);
  last.wait();
  EXPECT_EQ(dst.front(), 2);
  EXPECT_EQ(dst.back(), 2);
  engine->synchronize();
  EXPECT_EQ(engine->stats().copies[0], 2u);
}

TEST(CopyEngine, ManyConcurrentCopiesBothWaysAndBadInput) {
  auto engine = make_emulated_copy_engine();
  std::vector<std::vector<uint8_t>> src(64), dst(64);
  std::vector<CopyEvent> events;
  for (int i = 0; i < 64; ++i) {
    src[i].assign(4096 + static_cast<size_t>(i), static_cast<uint8_t>(i));
    dst[i].assign(src[i].size(), 0);
    events.push_back(
        engine->copy_async(dst[i].data(), src[i].data(), src[i].size(),
                           i % 2 ? CopyDirection::kHostToDevice : CopyDirection::kDeviceToHost));
  }
  engine->synchronize();
  for (int i = 0; i < 64; ++i) {
    EXPECT_TRUE(events[i].done());
    EXPECT_EQ(dst[i], src[i]) << i;
  }
  EXPECT_THROW(engine->copy_async(nullptr, src[0].data(), 8, CopyDirection::kHostToDevice),
               std::invalid_argument);
  EXPECT_THROW(
      engine->copy_async(src[0].data() + 4, src[0].data(), 8, CopyDirection::kHostToDevice),
      std::invalid_argument);
  engine->copy_async(nullptr, nullptr, 0, CopyDirection::kHostToDevice).wait();  // empty copy
  // This suite runs with and without a GPU: the choice and its reason agree.
  std::string why;
  auto chosen = make_copy_engine(&why);
  if (why.empty()) {
    EXPECT_EQ(chosen->name().rfind("cuda (", 0), 0u) << chosen->name();
  } else {
    EXPECT_EQ(chosen->name(), "emulated (host threads)");
    EXPECT_NE(why.find(": emulated device"), std::string::npos) << why;
  }
}

TEST(CopyEngine, EmulatedReferenceCopyAndDevice) {
  auto engine = make_emulated_copy_engine();
  EXPECT_EQ(engine->host_registrar(), nullptr);  // nothing to register with
  auto device = engine->make_device(8 * kCopyMiB);
  ASSERT_NE(device, nullptr);
  EXPECT_TRUE(device->host_accessible());
  std::vector<uint8_t> a(5000, 7), b(5000, 0);
  engine->reference_copy(b.data(), a.data(), a.size(), CopyDirection::kHostToDevice);
  EXPECT_EQ(b, a);
  EXPECT_THROW(engine->reference_copy(nullptr, a.data(), 1, CopyDirection::kDeviceToHost),
               std::invalid_argument);
}

}  // namespace
}  // namespace memwall::runtime
