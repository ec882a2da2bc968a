// A training session over the executor (memwall/exec/session.h): set up
// once, then a step per batch the caller brings, the model's states kept
// where the plan keeps them between steps.
//
// Note [Session views]
// ~~~~~~~~~~~~~~~~~~~~
// memwall.Trainer points each Parameter (and each optimizer state) at the
// session's own copy of its bytes: a DLPack view of the device storage, or
// of the host pool's buffer, so the model is not held twice. A view holds
// the device storage it shows (a c10::Storage reference) and the session
// (a shared_ptr), so memory a view shows is never freed under it. Because
// a held storage is not given back when a step frees it, and the plan
// counts on that memory, the caller drops its views before each step and
// takes new ones after (a step may move a buffer: swapped out and in
// again, or to another offset). A tensor kept from before a step therefore
// fails the step when the plan needs its memory (out of memory at its
// offset), rather than reading or writing memory the step gave to another
// buffer.
#include "memwall/exec/session.h"

#include <ATen/dlpack.h>

#include "executor_impl.h"

namespace memwall::exec::detail {

std::span<std::byte> Executor::resident_bytes(BufferId b, c10::Storage* device) {
  Slot& s = slots_[b];
  const uint64_t bytes = graph_.buffers[b].bytes;
  if (static_cast<bool>(s.device)) {
    if (device != nullptr) *device = s.device;
    return {static_cast<std::byte*>(s.device.mutable_data()), bytes};
  }
  if (s.host) return {static_cast<std::byte*>(s.host.data()), bytes};
  return {};
}

void Executor::read_state(BufferId b, std::span<std::byte> out) {
  engine_->synchronize();
  c10::Storage device;
  if (const std::span<std::byte> here = resident_bytes(b, &device); !here.empty()) {
    // Note [Device bytes]: the device's copy, else the host pool's.
    (static_cast<bool>(device) ? device_bytes_ : kHostBytes).copy(out.data(), here.data(),
                                                                  out.size());
    return;
  }
  Slot& s = slots_[b];
  if (!s.nvme)
    run_failed("buffer {} ({}) is nowhere: not a persistent one", b, graph_.buffers[b].name);
  read_nvme(*s.nvme, out.data(), out.size());
}

// Every copy: a plan may drop the device copy of a state it has on the
// host already, and read the host copy back later.
void Executor::write_state(BufferId b, std::span<const std::byte> in) {
  engine_->synchronize();
  Slot& s = slots_[b];
  if (static_cast<bool>(s.device)) device_bytes_.copy(s.device.mutable_data(), in.data(), in.size());
  if (s.host) std::memcpy(s.host.data(), in.data(), in.size());
  if (s.nvme) write_nvme(s, in.data(), in.size());
}

}  // namespace memwall::exec::detail

namespace memwall::exec {
namespace {

// The session's state, shared with its views (Note [Session views]).
struct Shared {
  Graph graph;
  Plan plan;
  RunOptions options;
  RunResult result;
  std::string broken;  // the first failure's line
  // Last, so destroyed first: it refers to the members above.
  std::unique_ptr<detail::Executor> executor;
};

struct View {
  // Before `device`, so released after it: the storage goes back to the
  // session's device memory while that still exists.
  std::shared_ptr<Shared> session;
  c10::Storage device;  // the device storage shown, if it is one
  int64_t shape[1] = {0};
  DLManagedTensor tensor{};
};

// The status of a session call: its errors as one line each.
template <typename Call>
Status guarded(Shared& s, std::string& error, Call&& call) {
  if (!s.broken.empty()) {
    error = "the session failed before: " + s.broken;
    return Status::kRunFailed;
  }
  try {
    call();
    return Status::kOk;
  } catch (...) {
    const Status status = detail::status_of_current_exception(error, /*out_of_memory_apart=*/true);
    // Bad input found before a step began leaves the session as it was;
    // anything else broke it.
    if (status != Status::kBadInput || (s.executor && s.executor->released())) s.broken = error;
    return status;
  }
}

class SessionImpl final : public Session {
 public:
  explicit SessionImpl(std::shared_ptr<Shared> shared) : s_(std::move(shared)) {}
  ~SessionImpl() override {
    if (s_->executor && s_->broken.empty()) {
      try {
        s_->executor->end();
      } catch (...) {
        // Memory goes back with the executor: nothing left to tell anyone.
      }
    }
  }

  Status step(const ValueSet& inputs, StepMeasure& measure, std::string& error) override {
    return guarded(*s_, error, [&] { measure = s_->executor->step(inputs, s_->result); });
  }

  void* view(int64_t buffer) override {
    if (!persistent(buffer) || !s_->broken.empty()) return nullptr;
    auto v = std::make_unique<View>();
    const std::span<std::byte> bytes =
        s_->executor->resident_bytes(static_cast<BufferId>(buffer), &v->device);
    if (bytes.data() == nullptr) return nullptr;
    v->session = s_;
    v->shape[0] = static_cast<int64_t>(bytes.size());
    DLTensor& t = v->tensor.dl_tensor;
    t.data = bytes.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLUInt, 8, 1};
    t.shape = v->shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    v->tensor.manager_ctx = v.get();
    v->tensor.deleter = [](DLManagedTensor* self) { delete static_cast<View*>(self->manager_ctx); };
    return &v.release()->tensor;
  }

  Status read(int64_t buffer, std::span<std::byte> bytes, std::string& error) override {
    return guarded(*s_, error, [&] {
      check_size(buffer, bytes.size());
      s_->executor->read_state(static_cast<BufferId>(buffer), bytes);
    });
  }

  Status write(int64_t buffer, std::span<const std::byte> bytes, std::string& error) override {
    return guarded(*s_, error, [&] {
      check_size(buffer, bytes.size());
      s_->executor->write_state(static_cast<BufferId>(buffer), bytes);
    });
  }

  std::vector<std::string> notes() const override { return s_->result.notes; }
  uint64_t nvme_reserved_bytes() const override { return s_->result.nvme_reserved_bytes; }
  std::vector<double> kernel_seconds() override {
    if (!s_->options.time_kernels || !s_->broken.empty()) return {};
    return s_->executor->median_kernel_times();
  }
  Status set_setting(const std::string& name, double value, std::string& error) override {
    return guarded(*s_, error, [&] { s_->executor->set_setting(name, value); });
  }

 private:
  bool persistent(int64_t buffer) const {
    return buffer >= 0 && static_cast<size_t>(buffer) < s_->graph.buffers.size() &&
           is_persistent(s_->graph.buffers[static_cast<size_t>(buffer)].kind);
  }
  void check_size(int64_t buffer, size_t bytes) const {
    if (!persistent(buffer)) bad_input("buffer {} is not one of the model's states", buffer);
    const Buffer& b = s_->graph.buffers[static_cast<size_t>(buffer)];
    if (bytes != b.bytes) bad_input("{} has {} bytes, not {}", b.name, b.bytes, bytes);
  }

  std::shared_ptr<Shared> s_;
};

Status open(const Graph& graph, const Plan& plan, const StepValues& values,
            const RunOptions& options, std::unique_ptr<Session>& session, std::string& error) {
  auto shared = std::make_shared<Shared>();
  shared->graph = graph;
  shared->plan = plan;
  shared->options = options;
  shared->options.steps = 0;
  shared->options.check_eager = false;
  shared->options.record_trace = false;
  const Status status = guarded(*shared, error, [&] {
    shared->executor = std::make_unique<detail::Executor>(
        shared->graph, shared->plan, detail::ValuesFrom{.memory = &values}, shared->options,
        /*session=*/true);
    shared->executor->begin(shared->result);
  });
  if (status == Status::kOk) session = std::make_unique<SessionImpl>(std::move(shared));
  return status;
}

}  // namespace
}  // namespace memwall::exec

extern "C" __attribute__((visibility("default"))) memwall::exec::Status
memwall_exec_open_session_v3(const memwall::Graph& graph, const memwall::Plan& plan,
                             const memwall::exec::StepValues& values,
                             const memwall::exec::RunOptions& options,
                             std::unique_ptr<memwall::exec::Session>& session, std::string& error) {
  return memwall::exec::open(graph, plan, values, options, session, error);
}
