// The run's device (executor_impl.h): the emulated one (Note [Emulated
// device]) or a GPU (Note [The CUDA run] in cuda_run.cc): what a CUDA run
// refuses, its set-up, device memory (buffers' storages, the arena's
// offsets) and its figures, and its kernels' times (Note [Kernel timing on
// a GPU]).
#include "executor_impl.h"

#include <thread>

#include <fmt/ranges.h>

namespace memwall::exec::detail {

void Executor::check_device() const {
  if (options_.device == "emulated") return;
  if (options_.device != "cuda") {
    bad_input("unknown device \"{}\": the executor runs on \"emulated\" or \"cuda\"",
              options_.device);
  }
  // Note [The CUDA run]: what is not written for the GPU yet.
  if (!plan_.offsets.empty()) {
    bad_input(
        "the plan places its buffers at a layout's offsets, which a CUDA run does not do yet "
        "(the plan's arena on the CUDA VMM device, docs/exec.md): run a plan that fits the "
        "device allocator (memwall plan without --layout)");
  }
  if (options_.ranks > 1) {
    bad_input("a CUDA run is one process on one GPU; data-parallel ranks run on the emulated device");
  }
  if (session_) {
    bad_input(
        "memwall.Trainer's sessions run on the emulated device; on a GPU use `memwall run "
        "--device cuda`");
  }
}

void Executor::set_up_cuda(RunResult& result) {
  cuda_ = std::make_unique<CudaRun>(plan_.budget, options_.policy);
  std::string why;
  engine_ = runtime::make_cuda_copy_engine(0, &why);
  if (!engine_) bad_input("--device cuda: the CUDA copy engine cannot start: {}", why);
  result.device = engine_->name();
  device_bytes_ = cuda_->bytes();
  // The pool's pages registered with the driver: the engine's copies of
  // them run at the link's speed, and asynchronously.
  host_ = std::make_unique<runtime::HostPool>(host_capacity(), /*pin=*/true,
                                              engine_->host_registrar());
}

uint64_t Executor::device_live_bytes() const {
  return cuda_ ? cuda_->stats().live_bytes : memory_->live_bytes();
}

void Executor::measure_device(StepMeasure& m) {
  if (cuda_) {
    const MemwallExecCudaStatsV2 s = cuda_->stats();
    m.device_peak_bytes = s.peak_bytes;
    m.device_peak_allocated_bytes = s.peak_allocated_bytes;
    peak_reserved_ = std::max(peak_reserved_, s.peak_reserved_bytes);
    m.device_peak_reserved_bytes = peak_reserved_;
    m.arena_bytes = 0;
    return;
  }
  m.device_peak_bytes = memory_->peak_bytes();
  m.device_peak_allocated_bytes = memory_->peak_allocated_bytes();
  m.device_peak_reserved_bytes = memory_->stats().peak_reserved_bytes;
  m.arena_bytes = memory_->arena_high_water();
}

// A device op's kernels, queued between marks `from` and `to`; its compute
// span, when tracing, is the last event.
void Executor::timed_op(OpId op, uint64_t from, uint64_t to, bool timed, RunResult& result) {
  TimedOp t{.op = op, .from = from, .to = to, .timed = timed};
  if (tracing_ && !result.events.empty() && result.events.back().lane == kCompute) {
    t.event = result.events.size() - 1;
  }
  timed_ops_.push_back(t);
}

// Note [Kernel timing on a GPU]: once the iteration's work is done.
void Executor::resolve_timed_ops(RunResult& result) {
  double device_s = 0;
  for (const TimedOp& t : timed_ops_) {
    const double seconds = cuda_->elapsed(t.from, t.to);
    device_s += seconds;
    if (t.timed && !kernel_times_.empty()) kernel_times_[t.op].push_back(seconds);
    if (t.event) {
      TraceEvent& e = result.events[*t.event];
      e.start_s = cuda_->elapsed(iteration_mark_, t.from);
      e.end_s = e.start_s + seconds;
    }
  }
  kernel_s_ += device_s;
  timed_ops_.clear();
  cuda_->clear_marks();
}

c10::Storage Executor::scratch_storage(uint64_t bytes, BufferId b) {
  try {
    if (cuda_) return cuda_->storage(bytes);
    return c10::Storage(c10::Storage::use_byte_size_t(), bytes, memory_->allocate_aside(bytes),
                        memory_.get(), false);
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory("scratch state for {} ({}): {}", b, graph_.buffers[b].name,
                  e.what_without_backtrace());
  }
}

std::optional<uint64_t> Executor::begin_stay(BufferId b) {
  if (!has_arena()) return std::nullopt;
  Slot& s = slots_[b];
  if (s.stay_began == serial_) return s.stay_at;
  s.stay_at = stay_offset(plan_, b, s.stays++);
  s.stay_began = serial_;
  return s.stay_at;
}

// Note [Offsets per stay]: a stay placed where an outgoing copy still reads
// (the real copy slower than the simulated one) waits for that copy, as a
// GPU allocator waits for a stream's event before it reuses a block.
namespace {

// Whether `storage` (device memory) overlaps [lo, hi).
bool overlaps(const c10::Storage& storage, const char* lo, const char* hi) {
  const auto* p = static_cast<const char*>(storage.data());
  return p != nullptr && p < hi && lo < p + storage.nbytes();
}

}  // namespace

void Executor::make_room(uint64_t offset, uint64_t bytes) {
  if (!has_arena() || bytes == 0) return;
  const auto* lo = static_cast<const char*>(memory_->arena_address(offset));
  bool waited = false;
  for (const Leaving& l : leaving_) {
    // A host buffer leaving has no storage.
    if (static_cast<bool>(l.storage) && overlaps(l.storage, lo, lo + bytes)) {
      wait(l.until);
      waited = true;
    }
  }
  if (waited) retire_finished();
}

// The buffers whose device copies overlap [offset, offset + bytes) of the
// arena, for a message: " (held by buffer 7 (name), a leaving copy)".
std::string Executor::holders(std::optional<uint64_t> offset, uint64_t bytes) const {
  if (!offset || !has_arena()) return "";
  const auto* lo = static_cast<const char*>(memory_->arena_address(*offset));
  std::vector<std::string> held;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (static_cast<bool>(slots_[i].device) && overlaps(slots_[i].device, lo, lo + bytes)) {
      held.push_back(fmt::format("buffer {} ({})", i, graph_.buffers[i].name));
    }
  }
  for (const Leaving& l : leaving_) {
    if (static_cast<bool>(l.storage) && overlaps(l.storage, lo, lo + bytes)) {
      held.emplace_back("a leaving copy");
    }
  }
  if (held.empty()) return " (held by none of the plan's buffers)";
  return fmt::format(" (held by {})", fmt::join(held, ", "));
}

// Note [Late releases]
// ~~~~~~~~~~~~~~~~~~~~
// Memory the plan has freed can still be held for a moment by another
// thread's last reference to a tensor over it. gloo's worker did so with
// the device gradient it all-reduced (fixed at its root: collectives work
// on host staging copies, executor_comm.cc); as a guard against another
// thread doing the same, a stay whose offset is taken is retried for up
// to ~0.1 s before the run fails, as a GPU allocator waits for a stream's
// event before it reuses a block. The failure names what holds the range.
c10::Storage Executor::device_storage(uint64_t bytes, const char* why, BufferId b,
                                      std::optional<uint64_t> offset) {
  constexpr int kTries = 20;
  for (int attempt = 0;; ++attempt) {
    try {
      if (cuda_) return cuda_->storage(bytes);
      if (offset && bytes > 0 && has_arena()) {
        make_room(*offset, bytes);
        return c10::Storage(c10::Storage::use_byte_size_t(), bytes,
                            memory_->allocate_at(*offset, bytes), memory_.get(), false);
      }
      return c10::Storage(c10::Storage::use_byte_size_t(), bytes, memory_.get(), false);
    } catch (const c10::OutOfMemoryError& e) {
      if (!offset || !has_arena() || attempt + 1 == kTries) {
        out_of_memory("{} {} ({}): {}{}", why, b, graph_.buffers[b].name,
                      e.what_without_backtrace(), holders(offset, bytes));
      }
      retire_finished();
      std::this_thread::sleep_for(std::chrono::microseconds(100 << std::min(attempt, 6)));
    }
  }
}

}  // namespace memwall::exec::detail
