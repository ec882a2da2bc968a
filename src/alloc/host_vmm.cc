// HostVMM: CUDA's virtual memory model on host memory.
//
// Note [HostVMM]
// ~~~~~~~~~~~~~~
// Physical chunks are slots of ONE memfd: chunk k is the file range
// [k*G, (k+1)*G). One file rather than one memfd per chunk because a process
// has ~1024 descriptors by default and a 40 GB device is 20,480 chunks of
// 2 MiB; slots of one sparse file cost one descriptor and no memory until
// touched. The file is sized to the capacity up front (sparse), so creating a
// chunk is only bookkeeping: a free-slot list, with capacity enforced by
// counting slots in use. Releasing a chunk punches a hole (FALLOC_FL_PUNCH_HOLE
// | FALLOC_FL_KEEP_SIZE) so its pages return to the kernel and a later chunk
// in the same slot reads zeros, as fresh cuMemCreate memory would. Free
// slots are kept as runs and handed out as runs (Note [Chunk runs]); a run
// is consecutive slots, i.e. one contiguous piece of the file.
//
// Note [Populated mappings]: a fresh mapping of a slot has no page-table
// entries, so the first touch of each 4 KiB page traps into the kernel, even
// when the slot's pages are resident. A stitching allocator remaps chunks
// whenever it stitches, and an executed remat plan on a tight budget paid
// ~6,000 such faults per gpt-mini step: 1.37x the simulator's step on the
// 2-vCPU VM, where a GPU's cuMemMap leaves memory ready to use. With
// `populate`, map fills the page tables at once (MAP_POPULATE): that step
// came to 0.97x. Off by default: the allocator's tests and benchmarks map
// memory they never touch.
//
// A reserved range is a PROT_NONE, MAP_NORESERVE anonymous mapping; map
// replaces granules of it with one MAP_FIXED|MAP_SHARED mapping of the run's
// slots, and unmap puts PROT_NONE anonymous memory back, so the range stays reserved
// (no other mmap can land in it) exactly like cuMemUnmap leaves the VA range
// of cuMemAddressReserve. Two mappings of one slot would alias, which is legal
// (CUDA allows it too) but the policies never do it.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "budgeted_device.h"

namespace memwall::alloc {
namespace {

[[noreturn]] void fail_errno(const std::string& what) {
  throw Error("host-vmm: " + what + ": " + std::strerror(errno));
}

class HostVmm final : public BudgetedDevice {
 public:
  HostVmm(uint64_t capacity, uint64_t granularity, bool populate)
      : BudgetedDevice("host-vmm", capacity, granularity,
                       static_cast<uint64_t>(sysconf(_SC_PAGESIZE))),
        populate_(populate) {
    fd_ = memfd_create("memwall-host-vmm", MFD_CLOEXEC);
    if (fd_ < 0) fail_errno("memfd_create");
    if (ftruncate(fd_, static_cast<off_t>(this->capacity())) != 0) {
      const int saved = errno;
      close(fd_);
      errno = saved;
      fail_errno("ftruncate to the capacity of " + std::to_string(this->capacity()) + " bytes");
    }
  }
  ~HostVmm() override { close(fd_); }

  std::string_view name() const override { return "host-vmm"; }
  bool host_accessible() const override { return true; }

  uintptr_t reserve(uint64_t bytes) override {
    void* base =
        mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) fail_errno("reserving " + std::to_string(bytes) + " bytes");
    return reinterpret_cast<uintptr_t>(base);
  }
  void unreserve(uintptr_t base, uint64_t bytes) override {
    if (munmap(reinterpret_cast<void*>(base), bytes) != 0) fail_errno("munmap");
  }

  bool create_chunks(uint64_t count, std::vector<ChunkRun>& runs) override {
    if (count == 0) return true;
    if (!take_budget(count)) return false;
    std::lock_guard lock(mutex_);
    // Freed slots first, newest first; then fresh ones, which stay within
    // the file: every slot below next_slot_ is in use or in free_runs_.
    while (count != 0 && !free_runs_.empty()) {
      ChunkRun& last = free_runs_.back();
      const uint64_t take = std::min(count, last.count);
      runs.push_back({last.first + last.count - take, take});
      last.count -= take;
      if (last.count == 0) free_runs_.pop_back();
      count -= take;
    }
    if (count != 0) {
      runs.push_back({next_slot_, count});
      next_slot_ += count;
    }
    return true;
  }
  void release_chunks(ChunkRun run) override {
    // Give the pages back; the slots read zeros when reused.
    if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  static_cast<off_t>(run.first * granularity()),
                  static_cast<off_t>(run.count * granularity())) != 0) {
      fail_errno("punching chunks " + std::to_string(run.first) + " to " +
                 std::to_string(run.first + run.count - 1));
    }
    std::lock_guard lock(mutex_);
    free_runs_.push_back(run);
    return_budget(run.count);
  }

  void map_chunks(uintptr_t address, ChunkRun run) override {
    void* at = mmap(reinterpret_cast<void*>(address), run.count * granularity(),
                    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | (populate_ ? MAP_POPULATE : 0),
                    fd_, static_cast<off_t>(run.first * granularity()));
    if (at == MAP_FAILED) fail_errno("mapping chunks from " + std::to_string(run.first));
  }
  void unmap(uintptr_t address, uint64_t bytes) override {
    void* at = mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (at == MAP_FAILED) fail_errno("unmapping " + std::to_string(bytes) + " bytes");
  }

 private:
  int fd_ = -1;
  bool populate_ = false;
  std::mutex mutex_;  // guards the slot bookkeeping
  uint64_t next_slot_ = 0;
  std::vector<ChunkRun> free_runs_;
};

}  // namespace

std::unique_ptr<Device> make_host_vmm(uint64_t capacity, uint64_t granularity, bool populate) {
  return std::make_unique<HostVmm>(capacity, granularity, populate);
}

}  // namespace memwall::alloc
