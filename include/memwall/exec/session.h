// A training session: the executor set up once over a plan, then one step
// after another, each on a batch the caller brings (memwall.Trainer in
// python/memwall/training.py). Between steps the model's states stay where
// the plan keeps them, in the executor's device memory, host pool or NVMe,
// and the caller sees them through views of that memory, not copies.
//
//   std::unique_ptr<exec::Session> s;  std::string error;
//   exec::open_session(graph, plan, values, options, s, error);  // values: the states, rng
//   exec::ValueSet batch;  batch.add(-1, "input", bytes);  ...    // every input, by name
//   exec::StepMeasure m;
//   s->step(batch, m, error);
//   void* view = s->view(buffer_id);  // a DLManagedTensor*, or nullptr on NVMe
//
// Names no torch type: views are DLPack tensors (dlpack.h's legacy
// DLManagedTensor, uint8[bytes]), which a caller hands to
// torch.from_dlpack. Note [Session views] in src/exec/session.cc.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memwall/exec/executor.h"
#include "memwall/exec/values.h"
#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall::exec {

class Session {
 public:
  virtual ~Session() = default;
  // One iteration of the plan on `inputs`: each of the graph's input
  // buffers by name, exactly its bytes (the bytes are read during the
  // call only). A failed step leaves the session broken: every later call
  // fails, naming the first failure.
  virtual Status step(const ValueSet& inputs, StepMeasure& measure, std::string& error) = 0;
  // A persistent buffer's bytes where they are now (on the device, else in
  // the host pool) as a DLManagedTensor* of uint8[bytes] that shares them
  // and keeps the session's memory alive until its deleter runs; nullptr
  // when the buffer is only on NVMe or `buffer` is not persistent. Valid
  // until the next step, which may move the buffer.
  virtual void* view(int64_t buffer) = 0;
  // Copies a persistent buffer's bytes out of, or into, every copy the
  // session holds of it (device, host, NVMe): `bytes` must be its size.
  virtual Status read(int64_t buffer, std::span<std::byte> bytes, std::string& error) = 0;
  virtual Status write(int64_t buffer, std::span<const std::byte> bytes, std::string& error) = 0;
  // Lines for the user that the session collected (stale swap files removed).
  virtual std::vector<std::string> notes() const = 0;
  // Swap space reserved on NVMe (0: none).
  virtual uint64_t nvme_reserved_bytes() const = 0;
  // With options.time_kernels: per op id, the median seconds of its call
  // over the steps after the first (Note [Kernel timing]); -1 for ops not
  // timed. Empty without.
  virtual std::vector<double> kernel_seconds() = 0;
  // The value later steps read for an optimizer setting the trace tracked
  // by `name` ("group0.lr": a learning-rate schedule, Note [Tracked
  // settings] in python/memwall/tracer/calls.py); bad input for a name no
  // op reads. Until set, the traced value.
  virtual Status set_setting(const std::string& name, double value, std::string& error) = 0;
};

// The library's entry point (dlsym by name, memwall/exec/library.h). The
// session copies `graph`, `plan` and `options`; `values` (every persistent
// buffer's starting bytes and the generator's state; no inputs: each step
// brings its own) are read during the call only. options.steps,
// check_eager, record_trace and time_kernels are ignored.
using OpenSessionFunction = Status (*)(const Graph& graph, const Plan& plan,
                                       const StepValues& values, const RunOptions& options,
                                       std::unique_ptr<Session>& session, std::string& error);
inline constexpr const char* kOpenSessionSymbol = "memwall_exec_open_session_v3";

// Loads the executor (memwall/exec/library.h) and opens a session. Throws
// Error when the library cannot be loaded.
Status open_session(const Graph& graph, const Plan& plan, const StepValues& values,
                    const RunOptions& options, std::unique_ptr<Session>& session,
                    std::string& error);

}  // namespace memwall::exec
