// libfake_cuda.so: a fake CUDA driver over host memory, with the real driver's checks, for
// memwall's tests on machines without a GPU (loaded through $MEMWALL_CUDA_DRIVER).
//  - VMM: reservations are PROT_NONE anonymous mmaps; allocations are memfds, mapped
//    MAP_FIXED|MAP_SHARED without access by cuMemMap and mprotected by cuMemSetAccess.
//  - A stream is a worker thread running its copies and event markers in FIFO order, all
//    asynchronously (pageable copies too: stricter than the driver). No legacy stream (0,
//    CU_STREAM_LEGACY, CU_STREAM_PER_THREAD: CUDA_ERROR_INVALID_HANDLE), but synchronous
//    copies first wait for the work queued on blocking (flags 0) streams, as the driver's do.
//  - A queued copy whose device range lost its mapping or access before it ran is skipped
//    and makes CUDA_ERROR_ILLEGAL_ADDRESS sticky until the primary context is released to
//    zero (which destroys nothing). Stream and event handles are never-reused ids.
// Environment: FAKE_CUDA_DEVICES (1-4; "0": cuInit gives CUDA_ERROR_NO_DEVICE) and
// FAKE_CUDA_MEMORY (bytes per device; 1 GiB).
// Exports: link with -Wl,--version-script=fake_libcuda.map (this folder): exactly the cu*
// and fake_cuda_* functions here (-fvisibility=hidden would leave libstdc++'s inline and
// template functions exported); no cuGetProcAddress, so memwall dlsyms versioned names.
#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#undef cuEventElapsedTime  // both cuEventElapsedTime and _v2 are exported
#define FAKE_API extern "C" __attribute__((visibility("default")))
#define D(p) reinterpret_cast<void*>(p)

namespace {

using Clock = std::chrono::steady_clock;
using Lock = std::unique_lock<std::mutex>;
constexpr size_t kGranularity = size_t{2} << 20;
constexpr int kMaxDevices = 4;
constexpr uintptr_t kStreamBase = uintptr_t{0x5700} << 32, kEventBase = uintptr_t{0xE700} << 32;

// clang-format off
using Record = std::optional<Clock::time_point>;  // a cuEventRecord: when it completed
struct Op {  // a queued copy (its device side rechecked when it runs), an event marker,
  void* dst; const void* src; size_t bytes; uintptr_t device; int device_prot;  // or a wait
  std::shared_ptr<Record> record, waits_for;  // waits_for: cuStreamWaitEvent's record
};
struct Event { unsigned flags; std::shared_ptr<Record> record; };  // record null: never recorded
struct Handle { int fd, device, mappings; size_t size; bool released; };  // an allocation
struct Mapping { size_t size; unsigned long long handle; int prot; };
constexpr std::pair<CUresult, const char*> kTexts[] = {  // what cuGetErrorString knows
    {CUDA_SUCCESS, "no error"}, {CUDA_ERROR_INVALID_VALUE, "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "out of memory"}, {CUDA_ERROR_UNKNOWN, "unknown error"},
    {CUDA_ERROR_NOT_INITIALIZED, "initialization error"}, {CUDA_ERROR_NOT_READY, "device not ready"},
    {CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"}, {CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_CONTEXT, "invalid device context"}, {CUDA_ERROR_NOT_SUPPORTED, "operation not supported"},
    {CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"}};
// clang-format on
struct Stream {
  unsigned flags = 0;
  std::deque<Op> queue;
  std::condition_variable cv;  // work queued, or destroyed
  uint64_t submitted = 0, completed = 0;
  int waiters = 0;  // threads waiting on it: it is not deleted meanwhile
  bool destroyed = false, finished = false;
  std::thread worker;
};
struct State {
  std::mutex mu;                    // guards everything below
  std::condition_variable done_cv;  // some queued op completed
  bool initialized = false;
  int devices = 1, ctx_refs[kMaxDevices] = {};
  uint64_t memory = uint64_t{1} << 30, used[kMaxDevices] = {};
  CUresult sticky = CUDA_SUCCESS;
  uintptr_t next_id = 1;
  std::map<uintptr_t, std::unique_ptr<Stream>> streams;  // destroyed ones until joined
  std::map<uintptr_t, Event> events;
  std::map<unsigned long long, Handle> handles;
  std::map<uintptr_t, size_t> reservations, registered;  // start -> bytes
  std::map<uintptr_t, Mapping> mappings;
  uint64_t registered_bytes = 0, async_copies[2] = {};
  std::map<std::string, std::pair<int, int>> failures;  // entry -> (nth, code)
  unsigned copy_delay_us = 0;
};

// Never destroyed: at exit, shut_down (and workers) may run after static destructors.
State& g_state = *new State;
char g_contexts[kMaxDevices];  // the primary context of device d: &g_contexts[d]
thread_local CUcontext t_current = nullptr;

int context_device(const State& s, CUcontext ctx) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(ctx) - reinterpret_cast<uintptr_t>(g_contexts);
  return d < static_cast<uintptr_t>(s.devices) ? static_cast<int>(d) : -1;
}
// -1, or the code an armed fake_cuda_fail makes this call return.
int injected(State& s, const char* entry) {
  auto it = s.failures.empty() ? s.failures.end() : s.failures.find(entry);
  if (it == s.failures.end() || --it->second.first > 0) return -1;
  const int code = it->second.second;
  return s.failures.erase(it), code;
}
CUresult need_context(const State& s) {
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  const int d = context_device(s, t_current);
  return d < 0 || s.ctx_refs[d] == 0 ? CUDA_ERROR_INVALID_CONTEXT : s.sticky;
}
bool device_ok(const State& s, CUdevice d) { return d >= 0 && d < s.devices; }
// For the device queries: initialized, an output pointer, a valid device.
CUresult check_out(const State& s, const void* out, CUdevice d) {
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return device_ok(s, d) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
#define RETURN_IF_ERROR(expr) \
  if (CUresult r_ = (expr); r_ != CUDA_SUCCESS) return r_
// Takes the lock, applies fake_cuda_fail, and with `ctx` checks the current context.
#define ENTER(entry, ctx)                                                              \
  State& s = g_state;                                                                  \
  Lock lock(s.mu);                                                                     \
  if (int code_ = injected(s, entry); code_ >= 0) return static_cast<CUresult>(code_); \
  RETURN_IF_ERROR(ctx ? need_context(s) : CUDA_SUCCESS)

bool prop_ok(const State& s, const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && device_ok(s, prop->location.id);
}
// Whether [p, p + n) lies in contiguous mappings allowing `prot`; `whole`: exactly those.
bool covered(const State& s, uintptr_t p, size_t n, int prot, bool whole) {
  auto it = s.mappings.upper_bound(p);
  if (n == 0 || p + n < p || it == s.mappings.begin()) return false;
  if (--it; whole && it->first != p) return false;
  for (uintptr_t at = it->first;; ++it) {
    if (it == s.mappings.end() || it->first != at || (it->second.prot & prot) != prot) return false;
    at += it->second.size;
    if (at >= p + n) return !whole || at == p + n;
  }
}
bool overlaps_mapping(const State& s, uintptr_t p, size_t n) {
  auto it = s.mappings.lower_bound(p);
  if (it != s.mappings.end() && it->first < p + n) return true;
  return it != s.mappings.begin() && std::prev(it)->first + std::prev(it)->second.size > p;
}
// Whether [p, p + n) lies wholly in one of `ranges` (start -> bytes).
bool inside(const std::map<uintptr_t, size_t>& ranges, uintptr_t p, size_t n) {
  auto it = ranges.upper_bound(p);
  if (it == ranges.begin() || p + n < p) return false;
  return --it, p + n <= it->first + it->second;
}
void free_if_unused(State& s, unsigned long long id) {
  Handle& h = s.handles.at(id);
  if (!h.released || h.mappings > 0) return;
  close(h.fd);
  s.used[h.device] -= h.size;
  s.handles.erase(id);
}
Stream* find_stream(State& s, CUstream stream) {
  auto it = s.streams.find(reinterpret_cast<uintptr_t>(stream));
  return it == s.streams.end() || it->second->destroyed ? nullptr : it->second.get();
}
Event* find_event(State& s, CUevent event) {
  auto it = s.events.find(reinterpret_cast<uintptr_t>(event));
  return it == s.events.end() ? nullptr : &it->second;
}
void enqueue(Stream* st, Op op) {
  st->queue.push_back(std::move(op));
  ++st->submitted;
  st->cv.notify_one();
}
// Waits (lock held) until every op queued so far on `targets` has completed.
void wait_streams(State& s, Lock& lock, const std::vector<Stream*>& targets) {
  std::vector<uint64_t> until;
  for (Stream* st : targets) until.push_back((++st->waiters, st->submitted));
  for (size_t i = 0; i < targets.size(); ++i) {
    s.done_cv.wait(lock, [&] { return targets[i]->completed >= until[i]; });
    --targets[i]->waiters;
  }
}
void run_worker(Stream* st) {
  State& s = g_state;
  Lock lock(s.mu);
  for (;;) {
    st->cv.wait(lock, [&] { return !st->queue.empty() || st->destroyed; });
    if (st->queue.empty()) break;  // destroyed and drained
    Op op = std::move(st->queue.front());
    st->queue.pop_front();
    if (op.waits_for != nullptr) {
      s.done_cv.wait(lock, [&] { return op.waits_for->has_value(); });
    } else if (op.record != nullptr) {
      *op.record = Clock::now();
    } else {  // a copy
      s.done_cv.wait_for(lock, std::chrono::microseconds(s.copy_delay_us), [] { return false; });
      // A GPU would fault on memory unmapped (or made inaccessible) since.
      bool ok = s.sticky == CUDA_SUCCESS && covered(s, op.device, op.bytes, op.device_prot, false);
      if (!ok && s.sticky == CUDA_SUCCESS) s.sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
      lock.unlock();
      if (ok) std::memcpy(op.dst, op.src, op.bytes);
      lock.lock();
    }
    ++st->completed;
    s.done_cv.notify_all();
  }
  st->finished = true;
  s.done_cv.notify_all();
}
// Joins the workers of destroyed streams that have finished, and forgets them.
void reap(State& s) {
  for (auto it = s.streams.begin(); it != s.streams.end();) {
    Stream& st = *it->second;
    it = st.finished && st.waiters == 0 ? (st.worker.join(), s.streams.erase(it)) : std::next(it);
  }
}
// Checks one copy, then queues it on *stream or (stream null) runs it.
CUresult do_copy(const char* entry, void* dst, const void* src, size_t bytes, bool to_device,
                 const CUstream* stream) {
  ENTER(entry, true);
  Stream* st = stream != nullptr ? find_stream(s, *stream) : nullptr;
  if (stream != nullptr && st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (bytes == 0) return CUDA_SUCCESS;
  const void* host = to_device ? src : dst;
  const auto device = reinterpret_cast<uintptr_t>(to_device ? dst : src);
  const int prot = to_device ? PROT_READ | PROT_WRITE : PROT_READ;
  if (host == nullptr || !covered(s, device, bytes, prot, false)) return CUDA_ERROR_INVALID_VALUE;
  if (st != nullptr) {
    ++s.async_copies[inside(s.registered, reinterpret_cast<uintptr_t>(host), bytes) ? 1 : 0];
    enqueue(st, Op{dst, src, bytes, device, prot, nullptr, nullptr});
    return CUDA_SUCCESS;
  }
  std::vector<Stream*> blocking;  // the legacy stream waits for these
  for (auto& [id, other] : s.streams) {
    if (other->flags == CU_STREAM_DEFAULT) blocking.push_back(other.get());
  }
  wait_streams(s, lock, blocking);
  lock.unlock();
  std::memcpy(dst, src, bytes);
  return CUDA_SUCCESS;
}
CUresult elapsed(const char* entry, float* ms, CUevent start, CUevent end) {
  ENTER(entry, true);
  const Event* a = find_event(s, start);
  const Event* b = find_event(s, end);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) != 0) return CUDA_ERROR_INVALID_HANDLE;
  if (a->record == nullptr || b->record == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!*a->record || !*b->record) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(**b->record - **a->record).count();
  return CUDA_SUCCESS;
}
// Workers must not outlive the library: each drains its queue, then is joined.
__attribute__((destructor)) void shut_down() {
  Lock lock(g_state.mu);
  std::vector<Stream*> all;
  for (auto& [id, st] : g_state.streams) all.push_back(st.get());
  for (Stream* st : all) st->destroyed = true, st->cv.notify_one();
  lock.unlock();
  for (Stream* st : all) st->worker.join();
}

}  // namespace

// ---- Errors, initialization, devices, contexts ------------------------------
FAKE_API CUresult cuGetErrorString(CUresult error, const char** text) {
  ENTER("cuGetErrorString", false);
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = nullptr;
  for (const auto& [code, message] : kTexts) *text = code == error ? message : *text;
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
FAKE_API CUresult cuInit(unsigned int flags) {
  ENTER("cuInit", false);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (s.initialized) return CUDA_SUCCESS;  // the environment is read once, when it works
  const char* devices = std::getenv("FAKE_CUDA_DEVICES");
  const char* memory = std::getenv("FAKE_CUDA_MEMORY");
  const long n = devices != nullptr && *devices != '\0' ? std::strtol(devices, nullptr, 10) : 1;
  if (n <= 0) return CUDA_ERROR_NO_DEVICE;
  s.devices = static_cast<int>(std::min<long>(n, kMaxDevices));
  if (memory != nullptr && *memory != '\0') s.memory = std::strtoull(memory, nullptr, 10);
  s.initialized = true;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetCount(int* count) {
  ENTER("cuDeviceGetCount", false);
  RETURN_IF_ERROR(check_out(s, count, 0));
  *count = s.devices;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  ENTER("cuDeviceGet", false);
  RETURN_IF_ERROR(check_out(s, device, ordinal));
  *device = ordinal;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  ENTER("cuDeviceTotalMem_v2", false);
  RETURN_IF_ERROR(check_out(s, bytes, device));
  *bytes = s.memory;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  ENTER("cuDeviceGetName", false);
  RETURN_IF_ERROR(check_out(s, len > 0 ? name : nullptr, device));
  std::snprintf(name, static_cast<size_t>(len), "%s", "Fake CUDA Device");
  return CUDA_SUCCESS;
}
// One context per device, reference-counted.
FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  ENTER("cuDevicePrimaryCtxRetain", false);
  RETURN_IF_ERROR(check_out(s, ctx, device));
  ++s.ctx_refs[device];
  *ctx = reinterpret_cast<CUcontext>(&g_contexts[device]);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  ENTER("cuDevicePrimaryCtxRelease_v2", false);
  RETURN_IF_ERROR(check_out(s, &s, device));
  if (s.ctx_refs[device] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--s.ctx_refs[device] == 0) s.sticky = CUDA_SUCCESS;  // a fresh context next time
  return CUDA_SUCCESS;
}
// Binds `ctx` (retained) or, null, nothing to the calling thread.
FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER("cuCtxSetCurrent", false);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  const int d = context_device(s, ctx);
  if (ctx != nullptr && (d < 0 || s.ctx_refs[d] == 0)) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = ctx;
  return CUDA_SUCCESS;
}

// ---- Virtual memory management ----------------------------------------------
FAKE_API CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                const CUmemAllocationProp* prop,
                                                CUmemAllocationGranularity_flags option) {
  // A device query: the driver documents no INVALID_CONTEXT for it, and
  // memwall asks before it has retained a context.
  ENTER("cuMemGetAllocationGranularity", false);
  if (granularity == nullptr || !prop_ok(s, prop)) return CUDA_ERROR_INVALID_VALUE;
  if (option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}
// `addr` is only a hint (ignored); the range is aligned to the granularity.
FAKE_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                      CUdeviceptr /*addr*/, unsigned long long flags) {
  ENTER("cuMemAddressReserve", true);
  if (ptr == nullptr || size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != 0 || (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t align = std::max(alignment, kGranularity);
  void* raw =
      mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + align - 1) & ~(align - 1);
  if (base > start) munmap(raw, base - start);
  munmap(D(base + size), start + align - base);  // never 0 bytes
  s.reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}
// Exactly one reservation, with nothing mapped in it.
FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  ENTER("cuMemAddressFree", true);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_mapping(s, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  munmap(D(ptr), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}
// Counts against FAKE_CUDA_MEMORY until freed (released and unmapped).
FAKE_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                              const CUmemAllocationProp* prop, unsigned long long flags) {
  ENTER("cuMemCreate", true);
  if (handle == nullptr || !prop_ok(s, prop) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  const int device = prop->location.id;
  if (s.used[device] + size > s.memory) return CUDA_ERROR_OUT_OF_MEMORY;
  const int fd = memfd_create("fake_cuda", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) return close(fd), CUDA_ERROR_OUT_OF_MEMORY;
  const unsigned long long id = s.next_id++;
  s.handles[id] = Handle{fd, device, 0, size, false};
  s.used[device] += size;
  *handle = id;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  ENTER("cuMemRelease", true);
  auto it = s.handles.find(handle);
  if (it == s.handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  free_if_unused(s, handle);
  return CUDA_SUCCESS;
}
// Inside one reservation, over no mapping, granularity-aligned, offset 0.
FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags) {
  ENTER("cuMemMap", true);
  auto it = s.handles.find(handle);
  if (it == s.handles.end() || it->second.released || offset != 0 || flags != 0 || size == 0 ||
      size > it->second.size || (ptr | size) % kGranularity != 0 ||
      !inside(s.reservations, ptr, size) || overlaps_mapping(s, ptr, size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* at = mmap(D(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, it->second.fd, 0);
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  s.mappings[ptr] = Mapping{size, handle, PROT_NONE};
  ++it->second.mappings;
  return CUDA_SUCCESS;
}
// Whole, contiguous mappings; the access is the union of the descriptors' (one host memory).
FAKE_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                 size_t count) {
  ENTER("cuMemSetAccess", true);
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccess_flags f = desc[i].flags;
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!device_ok(s, desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
    if (f > CU_MEM_ACCESS_FLAGS_PROT_READWRITE || f == 2) return CUDA_ERROR_INVALID_VALUE;
    prot |= (f & 1 ? PROT_READ : 0) | (f & 2 ? PROT_WRITE : 0);
  }
  if (!covered(s, ptr, size, PROT_NONE, true)) return CUDA_ERROR_INVALID_VALUE;
  for (auto it = s.mappings.find(ptr); it != s.mappings.end() && it->first < ptr + size; ++it) {
    if (mprotect(D(it->first), it->second.size, prot) != 0) return CUDA_ERROR_UNKNOWN;
    it->second.prot = prot;
  }
  return CUDA_SUCCESS;
}
// The range must be whole mappings, contiguous; it goes back to reserved.
FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  ENTER("cuMemUnmap", true);
  if (!covered(s, ptr, size, PROT_NONE, true)) return CUDA_ERROR_INVALID_VALUE;
  mmap(D(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  for (auto it = s.mappings.find(ptr); it != s.mappings.end() && it->first < ptr + size;) {
    const unsigned long long handle = it->second.handle;
    it = s.mappings.erase(it);
    --s.handles.at(handle).mappings;
    free_if_unused(s, handle);
  }
  return CUDA_SUCCESS;
}

// ---- Streams and events -----------------------------------------------------
FAKE_API CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  ENTER("cuStreamCreate", true);
  if (stream == nullptr || flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  reap(s);
  const uintptr_t id = kStreamBase + 16 * s.next_id++;
  Stream& st = *(s.streams[id] = std::make_unique<Stream>());
  st.flags = flags;
  st.worker = std::thread(run_worker, &st);
  *stream = reinterpret_cast<CUstream>(id);
  return CUDA_SUCCESS;
}
// Returns at once; the worker finishes the queued work, then goes away.
FAKE_API CUresult cuStreamDestroy_v2(CUstream stream) {
  ENTER("cuStreamDestroy_v2", true);
  Stream* st = find_stream(s, stream);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  st->destroyed = true;
  st->cv.notify_one();  // joined by a later cuStreamCreate, or at exit
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamSynchronize(CUstream stream) {
  ENTER("cuStreamSynchronize", true);
  Stream* st = find_stream(s, stream);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  wait_streams(s, lock, {st});
  return s.sticky;
}
FAKE_API CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  ENTER("cuEventCreate", true);
  constexpr unsigned kFlags = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING;
  if (event == nullptr || (flags & ~kFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  const uintptr_t id = kEventBase + 16 * s.next_id++;
  s.events[id] = Event{flags, nullptr};
  *event = reinterpret_cast<CUevent>(id);
  return CUDA_SUCCESS;
}
// A pending record still completes (its marker holds it).
FAKE_API CUresult cuEventDestroy_v2(CUevent event) {
  ENTER("cuEventDestroy_v2", true);
  const bool erased = s.events.erase(reinterpret_cast<uintptr_t>(event)) == 1;
  return erased ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
// Queues a marker; the event now stands for it (an earlier record is forgotten).
FAKE_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  ENTER("cuEventRecord", true);
  Event* ev = find_event(s, event);
  Stream* st = find_stream(s, stream);
  if (ev == nullptr || st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  ev->record = std::make_shared<Record>();
  enqueue(st, Op{nullptr, nullptr, 0, 0, 0, ev->record, nullptr});
  return CUDA_SUCCESS;
}
// Later work on `stream` waits for the event's last record (none: no wait).
FAKE_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  ENTER("cuStreamWaitEvent", true);
  const Event* ev = find_event(s, event);
  Stream* st = find_stream(s, stream);
  if (ev == nullptr || st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (ev->record != nullptr) enqueue(st, Op{nullptr, nullptr, 0, 0, 0, nullptr, ev->record});
  return CUDA_SUCCESS;
}
// Success when never recorded or its last record completed.
FAKE_API CUresult cuEventQuery(CUevent event) {
  ENTER("cuEventQuery", true);
  const Event* ev = find_event(s, event);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return ev->record == nullptr || *ev->record ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
FAKE_API CUresult cuEventSynchronize(CUevent event) {
  ENTER("cuEventSynchronize", true);
  const Event* ev = find_event(s, event);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Record> record = ev->record;
  s.done_cv.wait(lock, [&] { return record == nullptr || record->has_value(); });
  return s.sticky;
}
FAKE_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return elapsed("cuEventElapsedTime", ms, start, end);
}
FAKE_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return elapsed("cuEventElapsedTime_v2", ms, start, end);
}

// ---- Copies and page-locked host memory -------------------------------------
FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream st) {
  return do_copy("cuMemcpyHtoDAsync_v2", D(dst), src, n, true, &st);
}
FAKE_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream st) {
  return do_copy("cuMemcpyDtoHAsync_v2", dst, D(src), n, false, &st);
}
FAKE_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return do_copy("cuMemcpyHtoD_v2", D(dst), src, n, true, nullptr);
}
FAKE_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return do_copy("cuMemcpyDtoH_v2", dst, D(src), n, false, nullptr);
}
// Byte ranges; any overlap with a registered one is refused.
FAKE_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  ENTER("cuMemHostRegister_v2", true);
  constexpr unsigned kFlags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                              CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (p == nullptr || bytes == 0 || at + bytes < at) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~kFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto next = s.registered.lower_bound(at);
  if ((next != s.registered.end() && next->first < at + bytes) ||
      (next != s.registered.begin() && std::prev(next)->first + std::prev(next)->second > at)) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  s.registered[at] = bytes;
  s.registered_bytes += bytes;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMemHostUnregister(void* p) {
  ENTER("cuMemHostUnregister", true);
  auto it = s.registered.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.registered.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  s.registered_bytes -= it->second;
  s.registered.erase(it);
  return CUDA_SUCCESS;
}

// ---- Test hooks ---------------------------------------------------------------
// Bytes currently registered with cuMemHostRegister.
FAKE_API unsigned long long fake_cuda_registered_bytes(void) {
  Lock lock(g_state.mu);
  return g_state.registered_bytes;
}
// Async copies so far with their host side wholly in one registered range (1) or not (0).
FAKE_API unsigned long long fake_cuda_async_copies(int registered) {
  Lock lock(g_state.mu);
  return g_state.async_copies[registered != 0 ? 1 : 0];
}
// The nth call (1-based, from now) to `entry` (an exported name) returns `code` without
// doing its work. nth 0 disarms `entry`; a null entry disarms all.
FAKE_API void fake_cuda_fail(const char* entry, int nth, int code) {
  Lock lock(g_state.mu);
  if (entry == nullptr) return g_state.failures.clear();
  if (nth <= 0) return (void)g_state.failures.erase(entry);
  g_state.failures[entry] = {nth, code};
}
// Streams + events + allocations not freed + reservations + primary context references.
FAKE_API int fake_cuda_live_objects(void) {
  const State& s = g_state;
  Lock lock(g_state.mu);
  size_t live = s.events.size() + s.handles.size() + s.reservations.size();
  for (auto& [id, st] : s.streams) live += st->destroyed ? 0 : 1;
  for (int refs : s.ctx_refs) live += static_cast<size_t>(refs);
  return static_cast<int>(live);
}
// Each queued copy sleeps this long on its stream's worker before copying.
FAKE_API void fake_cuda_set_copy_delay_us(unsigned us) {
  Lock lock(g_state.mu);
  g_state.copy_delay_us = us;
}
