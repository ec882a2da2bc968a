// Smoke test of libfake_cuda.so (fake_libcuda.cc), and a record of how it
// behaves: dlopens the library named by argv[1], resolves the entry points by
// their versioned names as memwall does, and checks the fake's semantics and
// error cases. Standalone (no gtest):
//   g++ -std=c++20 -I/usr/local/cuda/include smoke.cc -o smoke -ldl -lpthread
//   ./smoke ./libfake_cuda.so
// Exits 0 when every check passed.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

std::atomic<int> g_failures{0};  // CHECKs run on several threads

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "smoke.cc:%d: FAILED: %s\n", __LINE__, #cond); \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)
#define EXPECT(call, code)                                                                      \
  do {                                                                                          \
    const int got_ = static_cast<int>(call);                                                    \
    if (got_ != static_cast<int>(code)) {                                                       \
      std::fprintf(stderr, "smoke.cc:%d: FAILED: %s returned %d, expected %s (%d)\n", __LINE__, \
                   #call, got_, #code, static_cast<int>(code));                                 \
      ++g_failures;                                                                             \
    }                                                                                           \
  } while (0)
#define OK(call) EXPECT(call, CUDA_SUCCESS)

struct Api {
  decltype(&cuGetErrorString) get_error_string;
  decltype(&cuInit) init;
  decltype(&cuDeviceGetCount) device_get_count;
  decltype(&cuDeviceGet) device_get;
  decltype(&cuDeviceGetName) device_get_name;
  decltype(&cuDeviceTotalMem) device_total_mem;
  decltype(&cuDevicePrimaryCtxRetain) ctx_retain;
  decltype(&cuDevicePrimaryCtxRelease) ctx_release;
  decltype(&cuCtxSetCurrent) ctx_set_current;
  decltype(&cuMemGetAllocationGranularity) granularity;
  decltype(&cuMemAddressReserve) reserve;
  decltype(&cuMemAddressFree) address_free;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuMemMap) map;
  decltype(&cuMemUnmap) unmap;
  decltype(&cuMemSetAccess) set_access;
  decltype(&cuStreamCreate) stream_create;
  decltype(&cuStreamDestroy) stream_destroy;
  decltype(&cuStreamSynchronize) stream_sync;
  decltype(&cuEventCreate) event_create;
  decltype(&cuEventDestroy) event_destroy;
  decltype(&cuEventRecord) event_record;
  decltype(&cuEventQuery) event_query;
  decltype(&cuEventSynchronize) event_sync;
  decltype(&cuEventElapsedTime) elapsed;     // resolved as "cuEventElapsedTime"
  decltype(&cuEventElapsedTime) elapsed_v2;  // "cuEventElapsedTime_v2"
  decltype(&cuMemcpyHtoDAsync) htod_async;
  decltype(&cuMemcpyDtoHAsync) dtoh_async;
  decltype(&cuMemcpyHtoD) htod;
  decltype(&cuMemcpyDtoH) dtoh;
  decltype(&cuMemHostRegister) host_register;
  decltype(&cuMemHostUnregister) host_unregister;
  unsigned long long (*registered_bytes)();
  unsigned long long (*async_copies)(int);
  void (*fail)(const char*, int, int);
  int (*live_objects)();
  void (*set_copy_delay_us)(unsigned);
};

template <class F>
void resolve(void* library, F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(library, name));
  if (slot == nullptr) {
    std::fprintf(stderr, "smoke: %s is not exported\n", name);
    std::exit(1);
  }
}

Api load(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "smoke: dlopen(%s): %s\n", path, dlerror());
    std::exit(1);
  }
  // memwall must fall back to dlsym of the versioned names.
  CHECK(dlsym(library, "cuGetProcAddress") == nullptr);
  CHECK(dlsym(library, "cuGetProcAddress_v2") == nullptr);
  Api a{};
  resolve(library, a.get_error_string, "cuGetErrorString");
  resolve(library, a.init, "cuInit");
  resolve(library, a.device_get_count, "cuDeviceGetCount");
  resolve(library, a.device_get, "cuDeviceGet");
  resolve(library, a.device_get_name, "cuDeviceGetName");
  resolve(library, a.device_total_mem, "cuDeviceTotalMem_v2");
  resolve(library, a.ctx_retain, "cuDevicePrimaryCtxRetain");
  resolve(library, a.ctx_release, "cuDevicePrimaryCtxRelease_v2");
  resolve(library, a.ctx_set_current, "cuCtxSetCurrent");
  resolve(library, a.granularity, "cuMemGetAllocationGranularity");
  resolve(library, a.reserve, "cuMemAddressReserve");
  resolve(library, a.address_free, "cuMemAddressFree");
  resolve(library, a.create, "cuMemCreate");
  resolve(library, a.release, "cuMemRelease");
  resolve(library, a.map, "cuMemMap");
  resolve(library, a.unmap, "cuMemUnmap");
  resolve(library, a.set_access, "cuMemSetAccess");
  resolve(library, a.stream_create, "cuStreamCreate");
  resolve(library, a.stream_destroy, "cuStreamDestroy_v2");
  resolve(library, a.stream_sync, "cuStreamSynchronize");
  resolve(library, a.event_create, "cuEventCreate");
  resolve(library, a.event_destroy, "cuEventDestroy_v2");
  resolve(library, a.event_record, "cuEventRecord");
  resolve(library, a.event_query, "cuEventQuery");
  resolve(library, a.event_sync, "cuEventSynchronize");
  resolve(library, a.elapsed, "cuEventElapsedTime");
  resolve(library, a.elapsed_v2, "cuEventElapsedTime_v2");
  resolve(library, a.htod_async, "cuMemcpyHtoDAsync_v2");
  resolve(library, a.dtoh_async, "cuMemcpyDtoHAsync_v2");
  resolve(library, a.htod, "cuMemcpyHtoD_v2");
  resolve(library, a.dtoh, "cuMemcpyDtoH_v2");
  resolve(library, a.host_register, "cuMemHostRegister_v2");
  resolve(library, a.host_unregister, "cuMemHostUnregister");
  resolve(library, a.registered_bytes, "fake_cuda_registered_bytes");
  resolve(library, a.async_copies, "fake_cuda_async_copies");
  resolve(library, a.fail, "fake_cuda_fail");
  resolve(library, a.live_objects, "fake_cuda_live_objects");
  resolve(library, a.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  return a;
}

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGran = 2 * kMiB;

CUmemAllocationProp props(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUmemAccessDesc read_write(int device) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

void fill(std::vector<unsigned char>& bytes, unsigned seed) {
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31 + seed);
}

// Initialization, devices, contexts.
CUcontext init_and_contexts(const Api& a) {
  const char* text = nullptr;
  OK(a.get_error_string(CUDA_ERROR_INVALID_VALUE, &text));  // works before cuInit
  CHECK(text != nullptr && std::strcmp(text, "invalid argument") == 0);
  EXPECT(a.get_error_string(static_cast<CUresult>(1000), &text), CUDA_ERROR_INVALID_VALUE);
  int count = 0;
  EXPECT(a.device_get_count(&count), CUDA_ERROR_NOT_INITIALIZED);
  CUcontext ctx = nullptr;
  EXPECT(a.ctx_retain(&ctx, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT(a.ctx_set_current(nullptr), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT(a.init(1), CUDA_ERROR_INVALID_VALUE);
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  EXPECT(a.init(0), CUDA_ERROR_NO_DEVICE);
  EXPECT(a.device_get_count(&count), CUDA_ERROR_NOT_INITIALIZED);
  setenv("FAKE_CUDA_DEVICES", "2", 1);
  setenv("FAKE_CUDA_MEMORY", "67108864", 1);  // 64 MiB
  OK(a.init(0));
  OK(a.init(0));
  OK(a.device_get_count(&count));
  CHECK(count == 2);
  CUdevice device = -1;
  OK(a.device_get(&device, 1));
  CHECK(device == 1);
  EXPECT(a.device_get(&device, 2), CUDA_ERROR_INVALID_DEVICE);
  EXPECT(a.device_get(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  size_t total = 0;
  OK(a.device_total_mem(&total, 0));
  CHECK(total == 64 * kMiB);
  char name[64];
  OK(a.device_get_name(name, sizeof name, 0));
  CHECK(std::strcmp(name, "Fake CUDA Device") == 0);
  OK(a.device_get_name(name, 5, 0));
  CHECK(std::strcmp(name, "Fake") == 0);
  EXPECT(a.device_get_name(name, 0, 0), CUDA_ERROR_INVALID_VALUE);

  // No current context yet: a device query answers, every call below fails.
  size_t granularity = 0;
  const CUmemAllocationProp prop = props(0);
  OK(a.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUstream stream = nullptr;
  EXPECT(a.stream_create(&stream, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT(a.ctx_release(0), CUDA_ERROR_INVALID_CONTEXT);  // count 0
  OK(a.ctx_retain(&ctx, 0));
  CUcontext again = nullptr;
  OK(a.ctx_retain(&again, 0));
  CHECK(ctx == again && ctx != nullptr);
  CUcontext other = nullptr;
  OK(a.ctx_retain(&other, 1));
  CHECK(other != ctx);
  OK(a.ctx_release(1));
  EXPECT(a.ctx_set_current(other), CUDA_ERROR_INVALID_CONTEXT);  // released to zero
  EXPECT(a.ctx_set_current(reinterpret_cast<CUcontext>(&count)), CUDA_ERROR_INVALID_CONTEXT);
  OK(a.ctx_set_current(ctx));
  OK(a.ctx_release(0));  // one reference left
  // A thread with a context bound whose count drops to zero loses it.
  std::thread([&] {
    CUcontext mine = nullptr;
    OK(a.ctx_retain(&mine, 1));
    OK(a.ctx_set_current(mine));
    CUstream s1 = nullptr;
    OK(a.stream_create(&s1, CU_STREAM_NON_BLOCKING));
    OK(a.stream_destroy(s1));
    OK(a.ctx_release(1));
    EXPECT(a.stream_create(&s1, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
  }).join();
  return ctx;
}

struct Device {  // 8 MiB reserved, 4 x 2 MiB mapped read-write
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle handles[4] = {};
};

Device vmm(const Api& a) {
  const CUmemAllocationProp prop = props(0);
  size_t granularity = 0;
  OK(a.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CHECK(granularity == kGran);
  CUmemAllocationProp bad = prop;
  bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  EXPECT(a.granularity(&granularity, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
         CUDA_ERROR_INVALID_VALUE);
  bad = prop;
  bad.location.type = CU_MEM_LOCATION_TYPE_HOST;
  EXPECT(a.granularity(&granularity, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
         CUDA_ERROR_INVALID_VALUE);

  Device d;
  EXPECT(a.reserve(&d.base, kGran + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  OK(a.reserve(&d.base, 4 * kGran, 0, 0, 0));
  CHECK(d.base % kGran == 0);
  CUdeviceptr spare = 0;
  OK(a.reserve(&spare, 2 * kGran, 4 * kGran, 0, 0));
  CHECK(spare % (4 * kGran) == 0);

  EXPECT(a.create(&d.handles[0], kGran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  for (auto& handle : d.handles) OK(a.create(&handle, kGran, &prop, 0));
  // 64 MiB in all: 8 are taken, 28 more chunks fit, the 29th does not.
  std::vector<CUmemGenericAllocationHandle> filler(28);
  for (auto& handle : filler) OK(a.create(&handle, kGran, &prop, 0));
  CUmemGenericAllocationHandle one_too_many = 0;
  EXPECT(a.create(&one_too_many, kGran, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  // Physical memory goes when no mapping uses it: a released, mapped handle
  // still counts until unmapped.
  OK(a.map(spare, kGran, 0, filler[0], 0));
  for (auto handle : filler) OK(a.release(handle));
  EXPECT(a.release(filler[1]), CUDA_ERROR_INVALID_VALUE);                          // twice
  EXPECT(a.map(spare + kGran, kGran, 0, filler[1], 0), CUDA_ERROR_INVALID_VALUE);  // released
  std::vector<CUmemGenericAllocationHandle> refill(27);
  for (auto& handle : refill) OK(a.create(&handle, kGran, &prop, 0));
  EXPECT(a.create(&one_too_many, kGran, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT(a.address_free(spare, 2 * kGran), CUDA_ERROR_INVALID_VALUE);  // still mapped
  OK(a.unmap(spare, kGran));
  OK(a.create(&one_too_many, kGran, &prop, 0));
  OK(a.release(one_too_many));
  for (auto handle : refill) OK(a.release(handle));
  EXPECT(a.address_free(spare, kGran), CUDA_ERROR_INVALID_VALUE);  // not the whole reservation
  OK(a.address_free(spare, 2 * kGran));

  EXPECT(a.map(d.base + 4096, kGran, 0, d.handles[0], 0), CUDA_ERROR_INVALID_VALUE);  // unaligned
  EXPECT(a.map(d.base, kGran, kGran, d.handles[0], 0), CUDA_ERROR_INVALID_VALUE);     // offset
  EXPECT(a.map(d.base + 4 * kGran, kGran, 0, d.handles[0], 0), CUDA_ERROR_INVALID_VALUE);  // out
  EXPECT(a.map(d.base, 2 * kGran, 0, d.handles[0], 0), CUDA_ERROR_INVALID_VALUE);  // too big
  for (int i = 0; i < 4; ++i) OK(a.map(d.base + i * kGran, kGran, 0, d.handles[i], 0));
  EXPECT(a.map(d.base, kGran, 0, d.handles[1], 0), CUDA_ERROR_INVALID_VALUE);  // overlap
  const CUmemAccessDesc access = read_write(0);
  EXPECT(a.set_access(d.base, kGran / 2, &access, 1), CUDA_ERROR_INVALID_VALUE);  // part of one
  EXPECT(a.set_access(d.base, 5 * kGran, &access, 1), CUDA_ERROR_INVALID_VALUE);  // past them
  EXPECT(a.set_access(d.base, kGran, &access, 0), CUDA_ERROR_INVALID_VALUE);
  CUmemAccessDesc bad_access = access;
  bad_access.location.id = 7;
  EXPECT(a.set_access(d.base, kGran, &bad_access, 1), CUDA_ERROR_INVALID_DEVICE);
  OK(a.set_access(d.base, 4 * kGran, &access, 1));
  EXPECT(a.unmap(d.base, kGran / 2), CUDA_ERROR_INVALID_VALUE);  // part of a mapping
  // Device pointers are host pointers here: the mapping is usable.
  auto* p = reinterpret_cast<unsigned char*>(d.base);
  p[0] = 1;
  p[4 * kGran - 1] = 2;
  CHECK(p[0] == 1 && p[4 * kGran - 1] == 2);
  return d;
}

void free_device(const Api& a, Device& d) {
  OK(a.unmap(d.base, 4 * kGran));
  for (auto handle : d.handles) OK(a.release(handle));
  OK(a.address_free(d.base, 4 * kGran));
}

float elapsed_ms(const Api& a, CUevent start, CUevent end) {
  float ms = -1, ms_v2 = -2;
  OK(a.elapsed(&ms, start, end));
  OK(a.elapsed_v2(&ms_v2, start, end));
  CHECK(ms == ms_v2);
  return ms;
}

// Round trip of 6 MiB through two streams, events, elapsed time.
void round_trip(const Api& a, const Device& d) {
  const size_t bytes = 6 * kMiB;
  std::vector<unsigned char> src(bytes), dst(bytes);
  fill(src, 7);
  OK(a.host_register(src.data(), bytes, CU_MEMHOSTREGISTER_PORTABLE));
  CHECK(a.registered_bytes() == bytes);
  const unsigned long long pinned = a.async_copies(1), pageable = a.async_copies(0);
  CUstream up = nullptr, down = nullptr;
  OK(a.stream_create(&up, CU_STREAM_NON_BLOCKING));
  OK(a.stream_create(&down, CU_STREAM_DEFAULT));
  CUevent start = nullptr, uploaded = nullptr, end = nullptr;
  OK(a.event_create(&start, CU_EVENT_DEFAULT));
  OK(a.event_create(&uploaded, CU_EVENT_BLOCKING_SYNC));
  OK(a.event_create(&end, CU_EVENT_DEFAULT));
  OK(a.event_record(start, up));
  OK(a.htod_async(d.base + kGran / 2, src.data(), bytes, up));
  OK(a.event_record(uploaded, up));
  OK(a.event_sync(uploaded));  // no cross-stream waits in this API: the host orders them
  OK(a.dtoh_async(dst.data(), d.base + kGran / 2, bytes, down));
  OK(a.event_record(end, down));
  OK(a.stream_sync(down));
  CHECK(dst == src);
  OK(a.event_query(end));
  CHECK(elapsed_ms(a, start, end) >= 0);
  CHECK(a.async_copies(1) == pinned + 1);
  CHECK(a.async_copies(0) == pageable + 1);
  // Synchronous copies.
  fill(src, 9);
  OK(a.htod(d.base, src.data(), bytes));
  std::fill(dst.begin(), dst.end(), 0);
  OK(a.dtoh(dst.data(), d.base, bytes));
  CHECK(dst == src);
  OK(a.host_unregister(src.data()));
  CHECK(a.registered_bytes() == 0);
  for (CUevent e : {start, uploaded, end}) OK(a.event_destroy(e));
  OK(a.stream_destroy(up));
  OK(a.stream_destroy(down));
}

// With a copy delay: FIFO order, NOT_READY, re-recording, destroy with work pending,
// the legacy-stream wait of synchronous copies.
void ordering(const Api& a, const Device& d) {
  std::vector<unsigned char> first(kMiB), second(kMiB), back(kMiB);
  fill(first, 1);
  fill(second, 2);
  CUstream s1 = nullptr, s2 = nullptr;
  OK(a.stream_create(&s1, CU_STREAM_NON_BLOCKING));
  OK(a.stream_create(&s2, CU_STREAM_NON_BLOCKING));
  CUevent before = nullptr, after = nullptr;
  OK(a.event_create(&before, CU_EVENT_DEFAULT));
  OK(a.event_create(&after, CU_EVENT_DEFAULT));
  OK(a.event_query(after));     // never recorded
  a.set_copy_delay_us(100000);  // 100 ms: room for the checks below on a busy machine
  OK(a.event_record(before, s1));
  OK(a.htod_async(d.base, first.data(), kMiB, s1));
  OK(a.htod_async(d.base, second.data(), kMiB, s1));
  OK(a.event_record(after, s1));
  EXPECT(a.event_query(after), CUDA_ERROR_NOT_READY);
  float ms = 0;
  EXPECT(a.elapsed(&ms, before, after), CUDA_ERROR_NOT_READY);
  OK(a.event_sync(after));
  OK(a.event_query(after));
  CHECK(elapsed_ms(a, before, after) >= 190);  // two 100 ms copies
  OK(a.dtoh(back.data(), d.base, kMiB));
  CHECK(back == second);  // FIFO: the second copy landed last

  // Re-recording replaces the earlier record: `after` now waits on idle s2.
  OK(a.htod_async(d.base, first.data(), kMiB, s1));
  OK(a.event_record(after, s1));
  OK(a.event_record(after, s2));
  OK(a.event_sync(after));
  OK(a.event_query(after));
  EXPECT(a.event_query(before), CUDA_SUCCESS);
  OK(a.event_record(before, s1));
  EXPECT(a.event_query(before), CUDA_ERROR_NOT_READY);  // s1 still copying
  OK(a.stream_sync(s1));

  // A destroyed stream finishes its queue; its handle is dead at once.
  CUstream doomed = nullptr;
  OK(a.stream_create(&doomed, CU_STREAM_NON_BLOCKING));
  OK(a.htod_async(d.base, second.data(), kMiB, doomed));
  OK(a.event_record(after, doomed));
  const auto t0 = std::chrono::steady_clock::now();
  OK(a.stream_destroy(doomed));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50));
  EXPECT(a.stream_sync(doomed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.stream_destroy(doomed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.event_query(after), CUDA_ERROR_NOT_READY);
  OK(a.event_sync(after));
  OK(a.dtoh(back.data(), d.base, kMiB));
  CHECK(back == second);

  // A synchronous copy waits for the work queued on blocking streams.
  CUstream blocking = nullptr;
  OK(a.stream_create(&blocking, CU_STREAM_DEFAULT));
  OK(a.htod_async(d.base, first.data(), kMiB, blocking));
  OK(a.dtoh(back.data(), d.base, kMiB));
  CHECK(back == first);
  OK(a.stream_destroy(blocking));

  // An event destroyed with its record pending: fine.
  OK(a.htod_async(d.base, first.data(), kMiB, s2));
  OK(a.event_record(before, s2));
  OK(a.event_destroy(before));
  OK(a.stream_sync(s2));
  a.set_copy_delay_us(0);
  OK(a.event_destroy(after));
  OK(a.stream_destroy(s1));
  OK(a.stream_destroy(s2));
}

void errors(const Api& a, const Device& d) {
  std::vector<unsigned char> host(kMiB);
  CUstream stream = nullptr;
  EXPECT(a.stream_create(&stream, 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT(a.stream_create(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  OK(a.stream_create(&stream, CU_STREAM_NON_BLOCKING));
  // The legacy / per-thread streams are not supported.
  EXPECT(a.stream_sync(nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.htod_async(d.base, host.data(), kMiB, nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.htod_async(d.base, host.data(), kMiB, CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
  // Copies: mapped, accessible, whole ranges only; host pointers non-null.
  EXPECT(a.htod_async(d.base, nullptr, kMiB, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT(a.dtoh_async(nullptr, d.base, kMiB, stream), CUDA_ERROR_INVALID_VALUE);
  OK(a.htod_async(d.base, nullptr, 0, stream));
  EXPECT(a.htod_async(d.base + 4 * kGran - 4096, host.data(), 8192, stream),
         CUDA_ERROR_INVALID_VALUE);  // runs past the mapped range
  EXPECT(a.dtoh_async(host.data(), d.base - 4096, 8192, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT(a.htod(0x1000, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT(a.dtoh(host.data(), 0x1000, 16), CUDA_ERROR_INVALID_VALUE);
  // Mapped without access yet.
  const CUmemAllocationProp prop = props(0);
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  OK(a.reserve(&va, kGran, 0, 0, 0));
  OK(a.create(&handle, kGran, &prop, 0));
  OK(a.map(va, kGran, 0, handle, 0));
  EXPECT(a.htod_async(va, host.data(), 64, stream), CUDA_ERROR_INVALID_VALUE);
  CUmemAccessDesc read_only = read_write(0);
  read_only.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  OK(a.set_access(va, kGran, &read_only, 1));
  OK(a.dtoh_async(host.data(), va, 64, stream));
  EXPECT(a.htod_async(va, host.data(), 64, stream), CUDA_ERROR_INVALID_VALUE);  // read-only
  OK(a.stream_sync(stream));
  OK(a.unmap(va, kGran));
  EXPECT(a.unmap(va, kGran), CUDA_ERROR_INVALID_VALUE);  // not mapped any more
  EXPECT(a.dtoh_async(host.data(), va, 64, stream), CUDA_ERROR_INVALID_VALUE);
  OK(a.release(handle));
  OK(a.address_free(va, kGran));
  EXPECT(a.address_free(va, kGran), CUDA_ERROR_INVALID_VALUE);

  // Events.
  CUevent timed = nullptr, untimed = nullptr, never = nullptr;
  EXPECT(a.event_create(&timed, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  OK(a.event_create(&timed, CU_EVENT_DEFAULT));
  OK(a.event_create(&untimed, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC));
  OK(a.event_create(&never, CU_EVENT_DEFAULT));
  EXPECT(a.event_record(timed, nullptr), CUDA_ERROR_INVALID_HANDLE);
  OK(a.event_record(timed, stream));
  OK(a.event_record(untimed, stream));
  OK(a.stream_sync(stream));
  float ms = 0;
  EXPECT(a.elapsed(&ms, timed, untimed), CUDA_ERROR_INVALID_HANDLE);  // DISABLE_TIMING
  EXPECT(a.elapsed_v2(&ms, untimed, timed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.elapsed(&ms, timed, never), CUDA_ERROR_INVALID_HANDLE);  // never recorded
  EXPECT(a.elapsed(nullptr, timed, timed), CUDA_ERROR_INVALID_VALUE);
  CHECK(elapsed_ms(a, timed, timed) == 0);
  OK(a.event_destroy(never));
  EXPECT(a.event_destroy(never), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.event_query(never), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.event_sync(never), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(a.event_record(never, stream), CUDA_ERROR_INVALID_HANDLE);
  OK(a.event_destroy(timed));
  OK(a.event_destroy(untimed));

  // Host registration.
  std::vector<unsigned char> pinned(3 * 4096);
  EXPECT(a.host_register(nullptr, 4096, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT(a.host_register(pinned.data(), 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT(a.host_register(pinned.data(), 4096, 0x10), CUDA_ERROR_INVALID_VALUE);
  OK(a.host_register(pinned.data() + 4096, 4096,
                     CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY));
  EXPECT(a.host_register(pinned.data(), 4097, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT(a.host_register(pinned.data() + 8191, 2, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  OK(a.host_register(pinned.data(), 4096, 0));  // adjacent
  OK(a.host_register(pinned.data() + 8192, 4096, CU_MEMHOSTREGISTER_IOMEMORY));
  CHECK(a.registered_bytes() == 3 * 4096);
  // An async copy counts as registered only when its host side lies in one range.
  const unsigned long long pinned_copies = a.async_copies(1), pageable = a.async_copies(0);
  OK(a.dtoh_async(pinned.data() + 4096, d.base, 4096, stream));
  OK(a.dtoh_async(pinned.data(), d.base, 8192, stream));
  OK(a.stream_sync(stream));
  CHECK(a.async_copies(1) == pinned_copies + 1);
  CHECK(a.async_copies(0) == pageable + 1);
  EXPECT(a.host_unregister(pinned.data() + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  for (int i = 0; i < 3; ++i) OK(a.host_unregister(pinned.data() + i * 4096));
  EXPECT(a.host_unregister(pinned.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  CHECK(a.registered_bytes() == 0);

  // Fail injection: the nth call from now fails, once.
  a.fail("cuMemcpyHtoDAsync_v2", 2, CUDA_ERROR_LAUNCH_FAILED);
  OK(a.htod_async(d.base, host.data(), 64, stream));
  EXPECT(a.htod_async(d.base, host.data(), 64, stream), CUDA_ERROR_LAUNCH_FAILED);
  OK(a.htod_async(d.base, host.data(), 64, stream));
  a.fail("cuEventElapsedTime", 1, CUDA_ERROR_UNKNOWN);
  a.fail("cuStreamCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
  a.fail("cuStreamCreate", 0, 0);  // disarmed
  CUstream extra = nullptr;
  OK(a.stream_create(&extra, 0));
  OK(a.stream_destroy(extra));
  EXPECT(a.elapsed(&ms, nullptr, nullptr), CUDA_ERROR_UNKNOWN);
  EXPECT(a.elapsed(&ms, nullptr, nullptr), CUDA_ERROR_INVALID_HANDLE);
  a.fail("cuInit", 1, CUDA_ERROR_UNKNOWN);
  EXPECT(a.init(0), CUDA_ERROR_UNKNOWN);
  a.fail(nullptr, 0, 0);
  OK(a.init(0));
  OK(a.stream_sync(stream));
  OK(a.stream_destroy(stream));
}

// Threads: each with its own stream and range; the context must be current.
void threads(const Api& a, CUcontext ctx, const Device& d) {
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&a, ctx, &d, t] {
      std::vector<unsigned char> src(kMiB), dst(kMiB);
      fill(src, static_cast<unsigned>(t));
      CUstream stream = nullptr;
      EXPECT(a.stream_create(&stream, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
      OK(a.ctx_set_current(ctx));
      OK(a.stream_create(&stream, CU_STREAM_NON_BLOCKING));
      const CUdeviceptr at = d.base + t * kGran;
      for (int round = 0; round < 20; ++round) {
        OK(a.htod_async(at, src.data(), kMiB, stream));
        OK(a.dtoh_async(dst.data(), at, kMiB, stream));
      }
      OK(a.stream_sync(stream));
      CHECK(dst == src);
      OK(a.stream_destroy(stream));
    });
  }
  for (auto& w : workers) w.join();
}

// A copy whose memory was unmapped before it ran: a sticky illegal address,
// until the primary context is released to zero.
void sticky(const Api& a, CUcontext ctx) {
  const CUmemAllocationProp prop = props(0);
  const CUmemAccessDesc access = read_write(0);
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  OK(a.reserve(&va, kGran, 0, 0, 0));
  OK(a.create(&handle, kGran, &prop, 0));
  OK(a.map(va, kGran, 0, handle, 0));
  OK(a.set_access(va, kGran, &access, 1));
  CUstream stream = nullptr;
  OK(a.stream_create(&stream, CU_STREAM_NON_BLOCKING));
  std::vector<unsigned char> host(4096);
  a.set_copy_delay_us(30000);
  OK(a.dtoh_async(host.data(), va, host.size(), stream));
  OK(a.unmap(va, kGran));  // too early: the copy has not run
  EXPECT(a.stream_sync(stream), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT(a.release(handle), CUDA_ERROR_ILLEGAL_ADDRESS);
  a.set_copy_delay_us(0);
  OK(a.ctx_release(0));  // the last reference: a fresh context after
  CUcontext again = nullptr;
  OK(a.ctx_retain(&again, 0));
  CHECK(again == ctx);
  OK(a.ctx_set_current(again));
  OK(a.release(handle));
  OK(a.address_free(va, kGran));
  OK(a.stream_destroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s path/to/libfake_cuda.so\n", argv[0]);
    return 2;
  }
  const Api a = load(argv[1]);
  const CUcontext ctx = init_and_contexts(a);
  Device d = vmm(a);
  round_trip(a, d);
  ordering(a, d);
  errors(a, d);
  threads(a, ctx, d);
  sticky(a, ctx);
  free_device(a, d);
  CHECK(a.live_objects() == 1);  // the context
  OK(a.ctx_release(0));
  CHECK(a.live_objects() == 0);
  CUstream late = nullptr;
  EXPECT(a.stream_create(&late, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
  if (g_failures != 0) {
    std::fprintf(stderr, "smoke: %d check(s) FAILED\n", g_failures.load());
    return 1;
  }
  std::printf("smoke: all checks passed\n");
  return 0;
}
