// The executor's copies (executor_impl.h): swaps between device, host and
// NVMe through the runtime's engines, frees.
#include "executor_impl.h"

namespace memwall::exec::detail {

void Executor::swap_out(BufferId b, Tier to, RunResult& result) {
  Slot& s = slots_[b];
  const uint64_t bytes = graph_.buffers[b].bytes;
  if (!static_cast<bool>(s.device)) {
    if (to == Tier::kNvme && s.host) {  // host -> NVMe write-back
      wait(s.host_ready);
      const double t = now_s();
      s.nvme = write_nvme(s, s.host.data(), bytes);
      span(result, kNvmeWrite, t, now_s());
      s.host.reset();
      return;
    }
    run_failed("{}: swap_out of {} ({}), which is not on the device", where(), b,
               graph_.buffers[b].name);
  }
  if (cuda_) {
    // Note [Device-side waits] (src/runtime/cuda_copy_engine.cc): the copy
    // stream reads what its swap-in and the kernels queued on torch's
    // stream wrote, once they ran; the host goes on.
    copy_after(s.arrived, runtime::CopyDirection::kDeviceToHost);
    if (!engine_->device_wait(cuda_->record(), runtime::CopyDirection::kDeviceToHost)) {
      const Clock::time_point t = Clock::now();
      cuda_->synchronize();
      wait_s_ += seconds_since(t);
    }
  } else {
    wait(s.arrived);
  }
  runtime::HostBuffer h = host_buffer(bytes, b);
  const double issued = now_s();
  const runtime::CopyEvent copied =
      engine_->copy_async(h.data(), s.device.data(), bytes, runtime::CopyDirection::kDeviceToHost);
  span(result, kD2H, issued, issued, copied);
  if (to == Tier::kNvme) {
    wait(copied);
    const double t = now_s();
    s.nvme = write_nvme(s, h.data(), bytes);
    span(result, kNvmeWrite, t, now_s());
    s.device = c10::Storage();
    return;  // the bounce buffer goes with h
  }
  leaving_.push_back({std::move(s.device), runtime::HostBuffer(), copied});
  s.device = c10::Storage();
  s.host = std::move(h);
  s.host_ready = copied;
}

// Note [Device-side waits]: on a GPU, torch's stream waits for a copy's
// event on the device; false where it cannot (the emulated device, a copy
// done or none), the caller then waits on the host if it must.
bool Executor::torch_stream_waits_for(const runtime::CopyEvent& e) {
  if (!cuda_ || e.native_handle() == nullptr || e.done()) return false;
  cuda_->stream_wait(e.native_handle());
  return true;
}

// The copies of `direction` submitted next start after `e` (another
// stream's copy): on the device where the engine can, else on the host.
void Executor::copy_after(const runtime::CopyEvent& e, runtime::CopyDirection direction) {
  if (e.done()) return;
  if (e.native_handle() != nullptr && engine_->device_wait(e.native_handle(), direction)) return;
  wait(e);
}

// The copy is gone; its extent stays the buffer's (Note [NVMe reservation]).
void Executor::drop_nvme(Slot& s) { s.nvme.reset(); }

// Writes a buffer's bytes to NVMe, in place of an older copy (a model
// state written back after its CPU step).
runtime::Extent Executor::write_nvme(Slot& s, const void* data, uint64_t bytes) {
  const Clock::time_point t = Clock::now();
  try {
    runtime::Extent e = store_on_nvme(s, data, bytes);
    waited_on_nvme(t);
    return e;
  } catch (const std::exception& e) {
    run_failed("{}: NVMe write failed: {}", where(), e.what());
  }
}

void Executor::read_nvme(const runtime::Extent& extent, void* data, uint64_t bytes) {
  if (bytes == 0) return;
  const Clock::time_point t = Clock::now();
  try {
    nvme().read(extent, data, bytes);
  } catch (const std::exception& e) {
    run_failed("{}: NVMe read failed: {}", where(), e.what());
  }
  waited_on_nvme(t);
}

// NVMe operations run synchronously: busy and waited on alike.
void Executor::waited_on_nvme(Clock::time_point start) {
  const double seconds = seconds_since(start);
  wait_s_ += seconds;
  nvme_s_ += seconds;
}

void Executor::swap_in(BufferId b, RunResult& result) {
  Slot& s = slots_[b];
  const Buffer& buf = graph_.buffers[b];
  const bool persistent = is_persistent(buf.kind);
  s.device = device_storage(buf.bytes, "swap_in of", b, begin_stay(b));
  if (s.host) {
    wait(s.host_ready);
    const double issued = now_s();
    s.arrived = engine_->copy_async(s.device.mutable_data(), s.host.data(), buf.bytes,
                                    runtime::CopyDirection::kHostToDevice);
    span(result, kH2D, issued, issued, s.arrived);
    if (!persistent) {
      leaving_.push_back({c10::Storage(), std::move(s.host), s.arrived});
      s.host.reset();
    }
    return;
  }
  if (!s.nvme) {
    run_failed("{}: swap_in of {} ({}), which has no copy", where(), b, buf.name);
  }
  runtime::HostBuffer bounce = host_buffer(buf.bytes, b);
  const double read = now_s();
  read_nvme(*s.nvme, bounce.data(), buf.bytes);
  const double issued = now_s();
  span(result, kNvmeRead, read, issued);
  s.arrived = engine_->copy_async(s.device.mutable_data(), bounce.data(), buf.bytes,
                                  runtime::CopyDirection::kHostToDevice);
  span(result, kH2D, issued, issued, s.arrived);
  leaving_.push_back({c10::Storage(), std::move(bounce), s.arrived});
  if (!persistent) drop_nvme(s);
}

void Executor::nvme_to_host(BufferId b, RunResult& result) {
  Slot& s = slots_[b];
  const Buffer& buf = graph_.buffers[b];
  if (!s.nvme) run_failed("{}: {} ({}) is not on NVMe", where(), b, buf.name);
  s.host = host_buffer(buf.bytes, b);
  const double t = now_s();
  read_nvme(*s.nvme, s.host.data(), buf.bytes);
  span(result, kNvmeRead, t, now_s());
  s.host_ready = runtime::CopyEvent();
  if (!is_persistent(buf.kind)) drop_nvme(s);
}

void Executor::free_buffer(BufferId b) {
  Slot& s = slots_[b];
  if (static_cast<bool>(s.device)) {
    // On a GPU the free is ordered after torch's stream (Note [Stream-ordered
    // frees]), which then waits for the swap-in's copy.
    if (!torch_stream_waits_for(s.arrived)) wait(s.arrived);
    s.device = c10::Storage();
    return;
  }
  s.host.reset();
  drop_nvme(s);
}

runtime::NvmeEngine& Executor::nvme() {
  if (!nvme_) {
    runtime::NvmeOptions o;
    o.dirs = options_.nvme_dirs;
    if (o.dirs.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      o.dirs.push_back(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
    }
    // Note [NVMe reservation] in src/plan/nvme_reservation.cc.
    const NvmeReservation r =
        nvme_reservation(graph_, plan_, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
    o.block_size = r.block_bytes;
    o.capacity = r.reserved_bytes();
    if (o.capacity == 0) run_failed("the plan puts no buffer on NVMe, yet one goes there");
    if (!options_.nvme_faults.empty()) o.faults = options_.nvme_faults;
    try {
      nvme_ = std::make_unique<runtime::NvmeEngine>(o);
    } catch (const std::exception& e) {
      run_failed("the NVMe engine cannot start: {}", e.what());
    }
    const runtime::NvmeStats stats = nvme_->stats();
    if (!stats.note.empty()) result_->notes.push_back(stats.note);
    result_->nvme_reserved_bytes = nvme_->total_blocks() * nvme_->block_size();
  }
  return *nvme_;
}

// Note [NVMe reservation]: a buffer's writes all go to the extent its
// first one took, never freed, so the extents fill the reservation from
// the front and always fit. An empty buffer needs no I/O.
runtime::Extent Executor::store_on_nvme(Slot& s, const void* data, uint64_t bytes) {
  s.nvme.reset();
  if (bytes == 0) return {};
  runtime::NvmeEngine& engine = nvme();
  if (!s.nvme_home) s.nvme_home = engine.allocate(bytes);
  engine.write(*s.nvme_home, data, bytes);
  return *s.nvme_home;
}

}  // namespace memwall::exec::detail
