// The NVMe engine end to end on real files: round trips of awkward sizes,
// many requests in flight, striping, threads, files removed, bad input.
// Faults are in nvme_faults_test.cc.
#include "memwall/runtime/nvme_engine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "memwall/runtime/bounce_buffer.h"
#include "memwall/runtime/host_pool.h"
#include "runtime/nvme_test_util.h"

namespace memwall::runtime {
namespace {

using testing_nvme::random_bytes;
using testing_nvme::TempDir;

constexpr uint64_t kMiB = 1 << 20;

NvmeOptions small_options(const std::string& dir) {
  NvmeOptions o;
  o.dirs = {dir};
  o.capacity = 16 * kMiB;
  o.faults = "";
  return o;
}

const std::vector<uint64_t> kAwkwardSizes = {1,    511,      512,  4095,     4096,
                                             4097, kMiB - 1, kMiB, kMiB + 1, 3 * kMiB + 17};

void expect_round_trips(NvmeEngine& engine) {
  uint64_t seed = 1;
  for (uint64_t size : kAwkwardSizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    auto src = random_bytes(size, seed++);
    Extent e = engine.write(src.data(), size);
    EXPECT_EQ(engine.length(e), size);
    // A guard after the destination: the engine copies exactly `size` bytes.
    std::vector<uint8_t> dst(size + 64, 0xAB);
    engine.read(e, dst.data(), size);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), size), 0);
    for (size_t i = size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "overrun at " << i;
    engine.free(e);
  }
  EXPECT_EQ(engine.free_blocks(), engine.total_blocks());
}

TEST(NvmeEngine, RoundTripsAwkwardSizes) {
  TempDir dir;
  NvmeEngine engine(small_options(dir.path()));
  EXPECT_TRUE(engine.stats().registered_buffers) << engine.stats().warning;
  EXPECT_TRUE(engine.stats().registered_files) << engine.stats().warning;
  EXPECT_FALSE(engine.stats().buffered) << engine.stats().warning;
  expect_round_trips(engine);
  NvmeStats s = engine.stats();
  uint64_t total = 0;
  for (uint64_t size : kAwkwardSizes) total += size;
  EXPECT_EQ(s.bytes_written, total);
  EXPECT_EQ(s.bytes_read, total);
  EXPECT_EQ(s.retries, 0u);
  EXPECT_EQ(s.crc_mismatches, 0u);
}

TEST(NvmeEngine, BounceBuffersFromThePinnedPool) {
  TempDir dir;
  auto pool = std::make_shared<HostPool>(64 * kMiB);
  {
    NvmeOptions o = small_options(dir.path());
    o.queue_depth = 4;
    o.bounce_allocator = make_pool_bounce_allocator(pool);
    NvmeEngine engine(o);
    // One block-sized bounce buffer per request in flight, from the pool.
    EXPECT_EQ(pool->stats().in_use_bytes, 4 * kMiB);
    expect_round_trips(engine);
  }
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);  // every buffer went back
  EXPECT_THROW(make_pool_bounce_allocator(nullptr), std::invalid_argument);
}

TEST(NvmeEngine, RoundTripsSmallBlocks) {
  // 8 KiB blocks: every size above spans many blocks with an odd tail.
  TempDir dir;
  NvmeOptions o = small_options(dir.path());
  o.block_size = 8192;
  o.queue_depth = 4;
  NvmeEngine engine(o);
  expect_round_trips(engine);
}

TEST(NvmeEngine, ReadsAPrefix) {
  TempDir dir;
  NvmeEngine engine(small_options(dir.path()));
  auto src = random_bytes(kMiB + 100, 7);
  Extent e = engine.write(src.data(), src.size());
  std::vector<uint8_t> dst(kMiB + 1);
  engine.read(e, dst.data(), dst.size());
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), dst.size()), 0);
}

TEST(NvmeEngine, ManyRequestsInFlightStripedOverTwoFiles) {
  TempDir dir;
  NvmeOptions o = small_options(dir.path());
  o.files_per_dir = 2;
  o.queue_depth = 8;
  o.block_size = 64 * 1024;
  o.capacity = 32 * kMiB;
  NvmeEngine engine(o);
  ASSERT_EQ(engine.files().size(), 2u);
  EXPECT_EQ(engine.locate(0), std::make_pair(size_t{0}, uint64_t{0}));
  EXPECT_EQ(engine.locate(1), std::make_pair(size_t{1}, uint64_t{0}));
  EXPECT_EQ(engine.locate(2), std::make_pair(size_t{0}, uint64_t{64 * 1024}));

  constexpr int kRequests = 48;
  std::vector<std::vector<uint8_t>> srcs;
  std::vector<Extent> extents;
  std::vector<NvmeHandle> handles;
  for (int i = 0; i < kRequests; ++i) {
    srcs.push_back(random_bytes(1 + (static_cast<uint64_t>(i) * 37'813) % (400 * 1024), i));
    extents.push_back(engine.allocate(srcs.back().size()));
  }
  // All submitted before any wait: more requests than the queue depth.
  for (int i = 0; i < kRequests; ++i) {
    handles.push_back(engine.write_async(extents[i], srcs[i].data(), srcs[i].size()));
  }
  for (auto& h : handles) engine.wait(h);
  std::vector<std::vector<uint8_t>> dsts(kRequests);
  handles.clear();
  for (int i = 0; i < kRequests; ++i) {
    dsts[i].resize(srcs[i].size());
    handles.push_back(engine.read_async(extents[i], dsts[i].data(), dsts[i].size()));
  }
  // Waited in reverse: a wait completes other requests on the way.
  for (int i = kRequests - 1; i >= 0; --i) engine.wait(handles[i]);
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(dsts[i], srcs[i]) << "request " << i;

  // The striping is what the files hold: block 1 of the first multi-block
  // extent sits at its place in file 1.
  for (int i = 0; i < kRequests; ++i) {
    if (extents[i].blocks < 2) continue;
    auto [file, offset] = engine.locate(extents[i].first_block + 1);
    int fd = testing_nvme::reopen(engine, file, O_RDONLY);
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> raw(4096);
    ASSERT_EQ(pread(fd, raw.data(), raw.size(), static_cast<off_t>(offset)), 4096);
    close(fd);
    EXPECT_EQ(std::memcmp(raw.data(), srcs[i].data() + 64 * 1024, 4096), 0);
    break;
  }
}

TEST(NvmeEngine, StripesOverTwoDirectories) {
  TempDir a, b;
  NvmeOptions o = small_options(a.path());
  o.dirs.push_back(b.path());
  NvmeEngine engine(o);
  ASSERT_EQ(engine.files().size(), 2u);
  EXPECT_EQ(engine.files()[0].rfind(a.path() + "/memwall-swap-", 0), 0u) << engine.files()[0];
  EXPECT_EQ(engine.files()[1].rfind(b.path() + "/memwall-swap-", 0), 0u) << engine.files()[1];
  expect_round_trips(engine);
}

TEST(NvmeEngine, ThreadsShareOneEngine) {
  TempDir dir;
  NvmeOptions o = small_options(dir.path());
  o.block_size = 16 * 1024;
  o.queue_depth = 8;
  NvmeEngine engine(o);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        auto src = random_bytes(1 + (t * 8 + i) * 9'973 % (200 * 1024), t * 100 + i);
        Extent e = engine.write(src.data(), src.size());
        std::vector<uint8_t> dst(src.size());
        NvmeHandle h = engine.read_async(e, dst.data(), dst.size());
        engine.wait(h);
        if (dst != src) ++failures;
        engine.free(e);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(engine.free_blocks(), engine.total_blocks());
}

TEST(NvmeEngine, FilesAreUniqueAndNameless) {
  TempDir dir;
  auto src = random_bytes(3 * kMiB, 3);  // outlives the engine, as the contract asks
  {
    NvmeEngine one(small_options(dir.path()));
    NvmeEngine two(small_options(dir.path()));
    // Note [Swap files without names]: unlinked once created.
    EXPECT_TRUE(dir.entries().empty());
    ASSERT_EQ(one.files().size(), 1u);
    ASSERT_EQ(two.files().size(), 1u);
    EXPECT_NE(one.files()[0], two.files()[0]);
    std::string prefix = dir.path() + "/memwall-swap-" + std::to_string(getpid()) + "-";
    for (const auto& n : {one.files()[0], two.files()[0]}) EXPECT_EQ(n.rfind(prefix, 0), 0u) << n;
    struct stat st {};
    ASSERT_EQ(fstat(one.file_descriptors()[0], &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), 16 * kMiB);
    EXPECT_EQ(st.st_nlink, 0u);
    // Outstanding writes at destruction are waited for.
    Extent e = one.allocate(src.size());
    NvmeHandle h = one.write_async(e, src.data(), src.size());
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(NvmeEngine, BufferedFallbackWhenODirectIsRefused) {
  TempDir dir;
  NvmeOptions o = small_options(dir.path());
  o.faults = "nodirect";  // open(O_DIRECT) behaves as on a filesystem without it
  NvmeEngine engine(o);
  EXPECT_TRUE(engine.stats().buffered);
  EXPECT_NE(engine.stats().warning.find("O_DIRECT refused"), std::string::npos);
  expect_round_trips(engine);
}

TEST(NvmeEngine, TmpfsAndBufferedOption) {
  struct stat st {};
  if (stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0) {
    NvmeOptions o = small_options("/dev/shm");
    NvmeEngine engine(o);  // O_DIRECT or the fallback, as the kernel has it
    expect_round_trips(engine);
  }
  TempDir dir;
  NvmeOptions o = small_options(dir.path());
  o.direct = false;
  NvmeEngine engine(o);
  EXPECT_TRUE(engine.stats().buffered);
  expect_round_trips(engine);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const NvmeError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NvmeEngine, BadInputIsOneClearMessage) {
  TempDir dir;
  auto make = [&](auto edit) {
    return error_of([&] {
      NvmeOptions o = small_options(dir.path());
      edit(o);
      NvmeEngine engine(o);
    });
  };
  EXPECT_EQ(make([](NvmeOptions& o) { o.dirs.clear(); }),
            "nvme: no swap directory given (NvmeOptions::dirs)");
  EXPECT_EQ(make([&](NvmeOptions& o) { o.dirs = {dir.path() + "/missing"}; }),
            "nvme: swap directory '" + dir.path() + "/missing': No such file or directory");
  EXPECT_EQ(make([](NvmeOptions& o) { o.dirs = {"/dev/null"}; }),
            "nvme: swap directory '/dev/null' is not a directory");
  EXPECT_EQ(make([](NvmeOptions& o) { o.capacity = 0; }),
            "nvme: capacity is 0 bytes; give the swap space to use");
  EXPECT_EQ(make([](NvmeOptions& o) { o.queue_depth = 0; }),
            "nvme: queue depth 0 is out of range 1..4096");
  EXPECT_EQ(make([](NvmeOptions& o) { o.queue_depth = 100000; }),
            "nvme: queue depth 100000 is out of range 1..4096");
  EXPECT_EQ(make([](NvmeOptions& o) { o.block_size = 1000; }),
            "nvme: block size 1000 is not a multiple of 4096 between 4096 and 1 GiB");
  EXPECT_EQ(make([](NvmeOptions& o) { o.faults = "eio"; }).rfind("nvme: bad fault 'eio'", 0), 0u);
  if (geteuid() != 0) {  // root writes anywhere
    std::string ro = dir.path() + "/ro";
    ASSERT_EQ(mkdir(ro.c_str(), 0500), 0);
    EXPECT_EQ(make([&](NvmeOptions& o) { o.dirs = {ro}; }),
              "nvme: swap directory '" + ro + "' is not writable: Permission denied");
    rmdir(ro.c_str());
  }
  EXPECT_TRUE(dir.entries().empty());

  NvmeEngine engine(small_options(dir.path()));
  uint8_t byte = 1;
  Extent e = engine.allocate(1);
  EXPECT_EQ(error_of([&] { engine.read(e, &byte, 1); }),
            "nvme: read of 1 bytes from extent at block 0 which holds 0");
  EXPECT_EQ(error_of([&] { engine.write(e, &byte, kMiB + 1); }),
            "nvme: write of 1048577 bytes into an extent of 1048576 bytes");
  EXPECT_EQ(error_of([&] { engine.allocate(17 * kMiB); }),
            "nvme: no room for 17825792 bytes (17 blocks): 15 of 16 blocks free, longest free "
            "run 15");
  engine.free(e);
  EXPECT_EQ(error_of([&] { engine.free(e); }), "nvme: extent [0, +1) freed twice");
  EXPECT_EQ(error_of([&] { engine.allocate(0); }), "nvme: allocation of 0 bytes");
}

}  // namespace
}  // namespace memwall::runtime
