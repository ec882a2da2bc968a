#include "memwall/runtime/nvme_engine.h"

#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "memwall/runtime/crc32c.h"
#include "memwall/runtime/extent_allocator.h"
#include "memwall/runtime/nvme_faults.h"
#include "memwall/runtime/swap_dir.h"

namespace memwall::runtime {

struct NvmeRequest {
  bool write = false;
  Extent extent;
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  uint64_t len = 0;
  uint64_t nblocks = 0;  // blocks holding the caller's bytes
  uint64_t next = 0;     // next block to issue
  uint64_t inflight = 0;
  uint64_t completed = 0;
  bool done = false;
  std::string error;  // the first error; the request fails with it
};

namespace {

uint64_t nvme_round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

// One block operation in flight, owning one bounce buffer.
struct NvmeSlot {
  uint8_t* buf = nullptr;
  std::shared_ptr<NvmeRequest> req;  // null when the slot is free
  uint64_t block = 0;                // global block index
  uint64_t index = 0;                // block index within the request
  uint32_t valid = 0;                // the caller's bytes in this block
  uint32_t io_len = 0;               // valid rounded up to the sector
  uint32_t done = 0;                 // bytes transferred so far
  uint32_t crc = 0;                  // writes: CRC32C of the valid bytes
  int retries = 0;
  int crc_retries = 0;
  NvmeFault fault = NvmeFault::kNone;
};

// Note [CRC layout]: the CRC32C of each block's valid bytes (not its
// padding) lives in an in-memory table indexed by global block, not in a
// trailer on disk: a trailer would make the payload of a block smaller than
// the I/O unit, so tensors of exactly N MiB would need an extra block, and
// the table is 12 bytes per MiB. The table lives as long as the engine,
// which is as long as the swap files themselves (they are closed with it).
struct NvmeBlockCrc {
  uint32_t crc = 0;
  uint32_t valid = 0;
  bool written = false;
};

struct NvmeEngine::Impl {
  NvmeOptions opt;
  NvmeFaultPlan faults;
  std::vector<std::unique_ptr<SwapFile>> files;
  uint64_t blocks_per_file = 0;
  std::shared_ptr<BounceAllocator> bounce;
  uint8_t* bounce_mem = nullptr;
  size_t bounce_bytes = 0;
  io_uring ring{};
  bool ring_ok = false;
  std::vector<NvmeSlot> slots;
  std::vector<unsigned> free_slots;
  std::deque<std::shared_ptr<NvmeRequest>> pending;
  std::vector<NvmeBlockCrc> crcs;
  std::unordered_map<uint64_t, uint64_t> lengths;  // first block -> bytes written
  std::unique_ptr<ExtentAllocator> extents;
  NvmeStats stats;
  uint64_t inflight = 0;
  uint64_t op_counter = 0;
  bool corrupt_next_read = false;
  bool closing = false;
  mutable std::mutex mu;

  void setup(NvmeOptions options);
  ~Impl();

  std::pair<size_t, uint64_t> locate(uint64_t block) const {
    return {block % files.size(), block / files.size() * opt.block_size};
  }
  std::string where(const NvmeSlot& s) const {
    auto [file, offset] = locate(s.block);
    return "file " + files[file]->path() + ", offset " + std::to_string(offset + s.done) +
           ", length " + std::to_string(s.io_len - s.done);
  }
  void issue(unsigned idx);
  void fill();
  void submit();
  void complete(unsigned idx, int res);
  void fail(unsigned idx, const std::string& message);
  void finish(unsigned idx);
  void reap();
  void drive(const NvmeRequest& req);
  std::shared_ptr<NvmeRequest> start(bool write, const Extent& e, const void* src, void* dst,
                                     uint64_t len);
};

void NvmeEngine::Impl::setup(NvmeOptions options) {
  opt = std::move(options);
  if (opt.dirs.empty()) throw NvmeError("nvme: no swap directory given (NvmeOptions::dirs)");
  if (opt.capacity == 0) throw NvmeError("nvme: capacity is 0 bytes; give the swap space to use");
  if (opt.block_size == 0 || opt.block_size % kNvmeSector != 0 || opt.block_size > (1u << 30)) {
    throw NvmeError("nvme: block size " + std::to_string(opt.block_size) +
                    " is not a multiple of 4096 between 4096 and 1 GiB");
  }
  if (opt.queue_depth == 0 || opt.queue_depth > 4096) {
    throw NvmeError("nvme: queue depth " + std::to_string(opt.queue_depth) +
                    " is out of range 1..4096");
  }
  if (opt.files_per_dir == 0 || opt.files_per_dir > 64) {
    throw NvmeError("nvme: files per directory " + std::to_string(opt.files_per_dir) +
                    " is out of range 1..64");
  }
  if (opt.max_retries < 0) throw NvmeError("nvme: max_retries is negative");
  std::string spec;
  if (opt.faults) {
    spec = *opt.faults;
  } else if (const char* env = std::getenv("MEMWALL_NVME_FAULTS")) {
    spec = env;
  }
  try {
    faults = parse_nvme_faults(spec);
    for (const auto& dir : opt.dirs) check_swap_dir(dir);
  } catch (const std::exception& e) {
    throw NvmeError(e.what());
  }
  StaleSwapFiles stale;
  for (const auto& dir : opt.dirs) {
    StaleSwapFiles here = remove_stale_swap_files(dir);
    stale.paths.insert(stale.paths.end(), here.paths.begin(), here.paths.end());
    stale.bytes += here.bytes;
  }
  stats.note = stale_swap_note(stale);

  size_t nfiles = opt.dirs.size() * opt.files_per_dir;
  uint64_t blocks = (opt.capacity + opt.block_size - 1) / opt.block_size;
  blocks_per_file = (blocks + nfiles - 1) / nfiles;
  try {
    for (const auto& dir : opt.dirs) {
      for (unsigned i = 0; i < opt.files_per_dir; ++i) {
        files.push_back(std::make_unique<SwapFile>(dir, blocks_per_file * opt.block_size,
                                                   opt.direct, faults.no_direct));
        if (opt.direct && !files.back()->direct() && !stats.buffered) {
          stats.buffered = true;
          stats.warning += "O_DIRECT refused in '" + dir + "': buffered I/O; ";
        }
      }
    }
  } catch (const std::runtime_error& e) {
    throw NvmeError(e.what());
  }
  if (!opt.direct) stats.buffered = true;
  crcs.resize(blocks_per_file * nfiles);
  extents = std::make_unique<ExtentAllocator>(blocks_per_file * nfiles);

  bounce = opt.bounce_allocator ? opt.bounce_allocator : make_mmap_bounce_allocator();
  bounce_bytes = static_cast<size_t>(opt.queue_depth) * opt.block_size;
  try {
    bounce_mem = static_cast<uint8_t*>(bounce->allocate(bounce_bytes));
  } catch (const std::runtime_error& e) {
    throw NvmeError(e.what());
  }
  slots.resize(opt.queue_depth);
  for (unsigned i = 0; i < opt.queue_depth; ++i) {
    slots[i].buf = bounce_mem + static_cast<size_t>(i) * opt.block_size;
    free_slots.push_back(opt.queue_depth - 1 - i);
  }

  int r = io_uring_queue_init(opt.queue_depth, &ring, 0);
  if (r < 0) {
    throw NvmeError("nvme: io_uring_queue_init(" + std::to_string(opt.queue_depth) +
                    ") failed: " + std::strerror(-r));
  }
  ring_ok = true;
  std::vector<int> fds;
  for (const auto& f : files) fds.push_back(f->fd());
  r = io_uring_register_files(&ring, fds.data(), static_cast<unsigned>(fds.size()));
  stats.registered_files = r == 0;
  if (r < 0) stats.warning += std::string("registered files refused: ") + std::strerror(-r) + "; ";
  std::vector<iovec> iov(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) iov[i] = {slots[i].buf, opt.block_size};
  // Registration pins the bounce buffers once, instead of on every
  // operation; it counts against RLIMIT_MEMLOCK, and without it the engine
  // still works with plain READ/WRITE.
  r = io_uring_register_buffers(&ring, iov.data(), static_cast<unsigned>(iov.size()));
  stats.registered_buffers = r == 0;
  if (r < 0) {
    stats.warning += std::string("registered buffers refused: ") + std::strerror(-r) + "; ";
  }
}

NvmeEngine::Impl::~Impl() {
  if (ring_ok) {
    std::lock_guard lock(mu);
    closing = true;
    for (auto& req : pending) {
      if (req->error.empty()) req->error = "nvme: engine destroyed before the request ran";
    }
    pending.clear();
    // The kernel may still write into bounce buffers (and read from them):
    // wait for every operation before they go.
    bool drained = true;
    try {
      while (inflight > 0) reap();
    } catch (const NvmeError&) {
      drained = false;  // the ring is broken: keep the buffers rather than risk them
    }
    io_uring_queue_exit(&ring);
    if (!drained) bounce_mem = nullptr;
  }
  if (bounce_mem) bounce->deallocate(bounce_mem, bounce_bytes);
}

void NvmeEngine::Impl::issue(unsigned idx) {
  NvmeSlot& s = slots[idx];
  const bool write = s.req->write;
  ++stats.operations;
  s.fault = faults.take(++op_counter);
  // Note [Corrupt faults]: corrupt@N models a read returning a bad block; if
  // operation N is a write, the next read takes the fault instead.
  if (s.fault == NvmeFault::kCorrupt && write) {
    corrupt_next_read = true;
    s.fault = NvmeFault::kNone;
  } else if (!write && s.fault == NvmeFault::kNone && corrupt_next_read) {
    corrupt_next_read = false;
    s.fault = NvmeFault::kCorrupt;
  }
  if (s.fault != NvmeFault::kNone) ++stats.faults_injected;

  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (!sqe) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
    if (!sqe) throw NvmeError("nvme: submission queue full (internal error)");
  }
  auto [file, offset] = locate(s.block);
  offset += s.done;
  uint8_t* p = s.buf + s.done;
  unsigned n = s.io_len - s.done;
  int fd = stats.registered_files ? static_cast<int>(file) : files[file]->fd();
  if (stats.registered_buffers) {
    if (write) {
      io_uring_prep_write_fixed(sqe, fd, p, n, offset, static_cast<int>(idx));
    } else {
      io_uring_prep_read_fixed(sqe, fd, p, n, offset, static_cast<int>(idx));
    }
  } else if (write) {
    io_uring_prep_write(sqe, fd, p, n, offset);
  } else {
    io_uring_prep_read(sqe, fd, p, n, offset);
  }
  if (stats.registered_files) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(static_cast<uintptr_t>(idx)));
}

void NvmeEngine::Impl::fill() {
  while (!free_slots.empty() && !pending.empty()) {
    auto req = pending.front();
    if (!req->error.empty() || req->next == req->nblocks) {
      pending.pop_front();
      continue;
    }
    unsigned idx = free_slots.back();
    free_slots.pop_back();
    NvmeSlot& s = slots[idx];
    s.req = req;
    s.index = req->next++;
    s.block = req->extent.first_block + s.index;
    s.done = 0;
    s.retries = 0;
    s.crc_retries = 0;
    uint64_t offset = s.index * opt.block_size;
    if (req->write) {
      s.valid = static_cast<uint32_t>(std::min(opt.block_size, req->len - offset));
      s.io_len = static_cast<uint32_t>(nvme_round_up(s.valid, kNvmeSector));
      // Note [Bounce padding]: the tail block is padded with zeros up to the
      // sector in the bounce buffer, never read past the caller's buffer;
      // its true length is in the CRC table.
      std::memcpy(s.buf, req->src + offset, s.valid);
      std::memset(s.buf + s.valid, 0, s.io_len - s.valid);
      s.crc = crc32c(s.buf, s.valid);
      crcs[s.block].written = false;
    } else {
      s.valid = crcs[s.block].valid;
      s.io_len = static_cast<uint32_t>(nvme_round_up(s.valid, kNvmeSector));
    }
    ++req->inflight;
    ++inflight;
    issue(idx);
    // Note [Submit as prepared]: each block goes to the drive as soon as
    // its bounce copy and CRC are done, not after the whole batch of free
    // slots is prepared, so the drive does not idle while this thread
    // copies (at depth 8, a batch's copies took longer than a block's I/O).
    submit();
  }
}

void NvmeEngine::Impl::submit() {
  const int r = io_uring_submit(&ring);
  if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
    throw NvmeError(std::string("nvme: io_uring_submit failed: ") + std::strerror(-r));
  }
}

void NvmeEngine::Impl::fail(unsigned idx, const std::string& message) {
  NvmeRequest& req = *slots[idx].req;
  if (req.error.empty()) req.error = message;
  finish(idx);
}

void NvmeEngine::Impl::finish(unsigned idx) {
  NvmeSlot& s = slots[idx];
  auto req = std::move(s.req);
  --req->inflight;
  --inflight;
  free_slots.push_back(idx);
  if (req->inflight == 0 && (!req->error.empty() || req->completed == req->nblocks)) {
    req->done = true;
    if (req->error.empty()) {
      if (req->write) {
        lengths[req->extent.first_block] = req->len;
        stats.bytes_written += req->len;
      } else {
        stats.bytes_read += req->len;
      }
    }
  }
}

void NvmeEngine::Impl::complete(unsigned idx, int res) {
  NvmeSlot& s = slots[idx];
  NvmeRequest& req = *s.req;
  const char* what = req.write ? "write" : "read";
  NvmeFault fault = s.fault;
  s.fault = NvmeFault::kNone;
  if (fault == NvmeFault::kEio) res = -EIO;
  if (fault == NvmeFault::kEnospc) res = -ENOSPC;
  if (fault == NvmeFault::kShort && res > 0) {
    res = static_cast<int>(static_cast<uint64_t>(res) / 2 / kNvmeSector * kNvmeSector);
  }
  if (fault == NvmeFault::kCorrupt && res > 0) s.buf[0] ^= 1;
  if (!req.error.empty() || closing) {
    // Another block of the request failed, or the engine is going away:
    // nothing more to do with this one.
    if (closing && req.error.empty()) req.error = "nvme: engine destroyed during the request";
    finish(idx);
    return;
  }
  if (res < 0) {
    int err = -res;
    bool transient = err == EIO || err == EINTR || err == EAGAIN;
    if (transient && s.retries < opt.max_retries) {
      ++s.retries;
      ++stats.retries;
      issue(idx);
      return;
    }
    fail(idx, std::string("nvme: ") + what + " failed: " + std::strerror(err) + " after " +
                  std::to_string(s.retries) + " retries (" + where(s) + ")");
    return;
  }
  uint32_t before = s.done;
  s.done += static_cast<uint32_t>(res);
  if (s.done < s.io_len) {
    // Short transfer: resubmit the rest, from the last sector boundary so
    // that O_DIRECT's alignment holds.
    ++stats.short_completions;
    s.done -= static_cast<uint32_t>(s.done % kNvmeSector);
    if (s.done <= before) {
      if (s.retries >= opt.max_retries) {
        fail(idx, std::string("nvme: ") + what + " made no progress after " +
                      std::to_string(s.retries) + " retries (" + where(s) + ")");
        return;
      }
      ++s.retries;
      ++stats.retries;
    }
    issue(idx);
    return;
  }
  if (req.write) {
    crcs[s.block] = {s.crc, s.valid, true};
  } else {
    uint32_t got = crc32c(s.buf, s.valid);
    if (got != crcs[s.block].crc) {
      ++stats.crc_mismatches;
      s.done = 0;
      if (s.crc_retries < opt.max_retries) {
        ++s.crc_retries;
        ++stats.retries;
        issue(idx);
        return;
      }
      char crc_text[64];
      std::snprintf(crc_text, sizeof crc_text, "stored %08x, read %08x", crcs[s.block].crc, got);
      fail(idx, "nvme: CRC32C mismatch in block " + std::to_string(s.block) + " after " +
                    std::to_string(s.crc_retries + 1) + " reads, " + crc_text + " (" + where(s) +
                    ")");
      return;
    }
    uint64_t offset = s.index * opt.block_size;
    std::memcpy(req.dst + offset, s.buf, std::min<uint64_t>(s.valid, req.len - offset));
  }
  ++req.completed;
  finish(idx);
}

// Submits what is queued and processes at least one completion.
void NvmeEngine::Impl::reap() {
  submit();  // retries and resubmissions issued by complete()
  io_uring_cqe* cqe = nullptr;
  int r = io_uring_wait_cqe(&ring, &cqe);
  if (r == -EINTR || r == -EAGAIN) return;
  if (r < 0) throw NvmeError(std::string("nvme: io_uring_wait_cqe failed: ") + std::strerror(-r));
  do {
    auto idx = static_cast<unsigned>(reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe)));
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    complete(idx, res);
    fill();  // the freed slot takes its next block now (Note [Submit as prepared])
  } while (io_uring_peek_cqe(&ring, &cqe) == 0);
}

void NvmeEngine::Impl::drive(const NvmeRequest& req) {
  while (!req.done) {
    fill();
    if (inflight == 0) throw NvmeError("nvme: request neither done nor in flight (internal error)");
    reap();
  }
}

std::shared_ptr<NvmeRequest> NvmeEngine::Impl::start(bool write, const Extent& e, const void* src,
                                                     void* dst, uint64_t len) {
  const char* what = write ? "write" : "read";
  if (e.blocks == 0 || e.first_block >= crcs.size() || e.blocks > crcs.size() - e.first_block) {
    throw NvmeError(std::string("nvme: ") + what + " of an invalid extent [" +
                    std::to_string(e.first_block) + ", +" + std::to_string(e.blocks) + ")");
  }
  uint64_t room = e.blocks * opt.block_size;
  if (len == 0 || len > room) {
    throw NvmeError(std::string("nvme: ") + what + " of " + std::to_string(len) +
                    " bytes into an extent of " + std::to_string(room) + " bytes");
  }
  if (!write) {
    auto it = lengths.find(e.first_block);
    uint64_t have = it == lengths.end() ? 0 : it->second;
    if (len > have) {
      throw NvmeError("nvme: read of " + std::to_string(len) + " bytes from extent at block " +
                      std::to_string(e.first_block) + " which holds " + std::to_string(have));
    }
  } else {
    lengths.erase(e.first_block);  // unknown until this write is complete
  }
  auto req = std::make_shared<NvmeRequest>();
  req->write = write;
  req->extent = e;
  req->len = len;
  req->src = static_cast<const uint8_t*>(src);
  req->dst = static_cast<uint8_t*>(dst);
  req->nblocks = (len + opt.block_size - 1) / opt.block_size;
  pending.push_back(req);
  fill();
  int r = io_uring_submit(&ring);
  if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
    throw NvmeError(std::string("nvme: io_uring_submit failed: ") + std::strerror(-r));
  }
  return req;
}

NvmeEngine::NvmeEngine(NvmeOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->setup(std::move(options));
}

NvmeEngine::~NvmeEngine() = default;

Extent NvmeEngine::allocate(uint64_t bytes) {
  std::lock_guard lock(impl_->mu);
  uint64_t bs = impl_->opt.block_size;
  if (bytes == 0) throw NvmeError("nvme: allocation of 0 bytes");
  uint64_t blocks = (bytes + bs - 1) / bs;
  auto first = impl_->extents->allocate(blocks);
  if (!first) {
    throw NvmeError(
        "nvme: no room for " + std::to_string(bytes) + " bytes (" + std::to_string(blocks) +
        " blocks): " + std::to_string(impl_->extents->free_blocks()) + " of " +
        std::to_string(impl_->extents->total_blocks()) + " blocks free, longest free run " +
        std::to_string(impl_->extents->largest_free_run()));
  }
  return {*first, blocks};
}

void NvmeEngine::free(const Extent& e) {
  std::lock_guard lock(impl_->mu);
  try {
    impl_->extents->free(e.first_block, e.blocks);
  } catch (const std::logic_error& err) {
    throw NvmeError(err.what());
  }
  impl_->lengths.erase(e.first_block);
  for (uint64_t b = e.first_block; b < e.first_block + e.blocks; ++b) impl_->crcs[b] = {};
}

NvmeHandle NvmeEngine::write_async(const Extent& e, const void* src, uint64_t len) {
  std::lock_guard lock(impl_->mu);
  return NvmeHandle(impl_->start(true, e, src, nullptr, len));
}

NvmeHandle NvmeEngine::read_async(const Extent& e, void* dst, uint64_t len) {
  std::lock_guard lock(impl_->mu);
  return NvmeHandle(impl_->start(false, e, nullptr, dst, len));
}

void NvmeEngine::wait(NvmeHandle& handle) {
  if (!handle.request_) throw NvmeError("nvme: wait on an empty handle");
  auto req = std::move(handle.request_);
  std::string error;
  {
    std::lock_guard lock(impl_->mu);
    impl_->drive(*req);
    error = req->error;
  }
  if (!error.empty()) throw NvmeError(error);
}

void NvmeEngine::write(const Extent& e, const void* src, uint64_t len) {
  NvmeHandle h = write_async(e, src, len);
  wait(h);
}

void NvmeEngine::read(const Extent& e, void* dst, uint64_t len) {
  NvmeHandle h = read_async(e, dst, len);
  wait(h);
}

Extent NvmeEngine::write(const void* src, uint64_t len) {
  Extent e = allocate(len);
  try {
    write(e, src, len);
  } catch (...) {
    free(e);
    throw;
  }
  return e;
}

uint64_t NvmeEngine::length(const Extent& e) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->lengths.find(e.first_block);
  return it == impl_->lengths.end() ? 0 : it->second;
}

NvmeStats NvmeEngine::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

uint64_t NvmeEngine::block_size() const { return impl_->opt.block_size; }

uint64_t NvmeEngine::total_blocks() const { return impl_->crcs.size(); }

uint64_t NvmeEngine::free_blocks() const {
  std::lock_guard lock(impl_->mu);
  return impl_->extents->free_blocks();
}

std::vector<std::string> NvmeEngine::files() const {
  std::vector<std::string> out;
  for (const auto& f : impl_->files) out.push_back(f->path());
  return out;
}

std::vector<int> NvmeEngine::file_descriptors() const {
  std::vector<int> out;
  for (const auto& f : impl_->files) out.push_back(f->fd());
  return out;
}

std::pair<size_t, uint64_t> NvmeEngine::locate(uint64_t block) const {
  return impl_->locate(block);
}

}  // namespace memwall::runtime
