// memwall.Trainer's C++ half: an executor session (memwall/exec/session.h)
// in-process. The states and batches cross as (pointer, bytes) of tensors
// the Python side holds for the call; the session's states come back as
// DLPack capsules ("dltensor") that torch.from_dlpack turns into tensors
// sharing the session's memory (Note [Session views] in src/exec/session.cc).
#include <Python.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "memwall/base/error.h"
#include "memwall/exec/session.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/calibration.h"
#include "memwall/plan/plan.h"

namespace nb = nanobind;

namespace memwall::python {
namespace {

// A tensor's bytes the caller holds for the call: (pointer, bytes).
std::span<const std::byte> bytes_at(uintptr_t address, uint64_t bytes) {
  return {reinterpret_cast<const std::byte*>(address), static_cast<size_t>(bytes)};
}

nb::object run_failed_type;     // memwall_core.RunFailed
nb::object out_of_memory_type;  // memwall_core.OutOfMemory

void raise_for(exec::Status status, const std::string& error) {
  switch (status) {
    case exec::Status::kOk:
      return;
    case exec::Status::kBadInput:
      throw Error(error);
    case exec::Status::kOutOfMemory:
      PyErr_SetString(out_of_memory_type.ptr(), error.c_str());
      throw nb::python_error();
    case exec::Status::kRunFailed:
      break;
  }
  PyErr_SetString(run_failed_type.ptr(), error.c_str());
  throw nb::python_error();
}

class Session {
 public:
  // `states`: (buffer id, name, address, bytes) of every persistent buffer.
  Session(const std::string& graph_json, const std::string& plan_json,
          const std::vector<std::tuple<int64_t, std::string, uintptr_t, uint64_t>>& states,
          const nb::bytes& rng, const std::string& policy,
          const std::vector<std::string>& nvme_dirs, uint64_t host_bytes, bool time_kernels,
          int rank, int ranks, const std::string& store, const std::string& store_prefix) {
    const Graph graph = graph_from_json_text(graph_json);
    const Plan plan = plan_from_json_text(plan_json);
    check_plan_graph(plan, graph);
    validate_plan(plan, graph);
    exec::StepValues values;
    values.source = "the model's states";
    for (const auto& [id, name, address, bytes] : states) {
      values.state.add(id, name, bytes_at(address, bytes));
    }
    values.rng = {static_cast<const std::byte*>(rng.data()), rng.size()};
    exec::RunOptions options;
    options.policy = plan.offsets.empty() ? policy : "stitching";
    options.nvme_dirs = nvme_dirs;
    options.host_bytes = host_bytes;
    options.time_kernels = time_kernels;
    options.rank = rank;
    options.ranks = ranks;
    options.store = store;
    options.store_prefix = store_prefix;
    std::string error;
    exec::Status status;
    {
      nb::gil_scoped_release unlocked;
      status = exec::open_session(graph, plan, values, options, session_, error);
    }
    raise_for(status, error);
  }

  // `inputs`: (name, address, bytes) of every input buffer. Returns the
  // step's measures by name.
  nb::dict step(const std::vector<std::tuple<std::string, uintptr_t, uint64_t>>& inputs) {
    exec::ValueSet batch;
    for (const auto& [name, address, bytes] : inputs) batch.add(-1, name, bytes_at(address, bytes));
    exec::StepMeasure m;
    std::string error;
    exec::Status status;
    {
      nb::gil_scoped_release unlocked;
      status = open().step(batch, m, error);
    }
    raise_for(status, error);
    nb::dict d;
    d["loss"] = m.loss;
    d["device_peak_bytes"] = m.device_peak_bytes;
    d["device_peak_allocated_bytes"] = m.device_peak_allocated_bytes;
    d["host_peak_bytes"] = m.host_peak_bytes;
    d["h2d_bytes"] = m.h2d_bytes;
    d["d2h_bytes"] = m.d2h_bytes;
    d["nvme_read_bytes"] = m.nvme_read_bytes;
    d["nvme_write_bytes"] = m.nvme_write_bytes;
    d["step_time_s"] = m.step_time_s;
    d["kernel_time_s"] = m.kernel_time_s;
    d["wait_time_s"] = m.wait_time_s;
    d["overhead_s"] = m.overhead_s;
    d["outputs_moved"] = m.outputs_moved;
    d["arena_bytes"] = m.arena_bytes;
    return d;
  }

  // A capsule "dltensor" of the buffer's bytes where they are, or None.
  nb::object view(int64_t buffer) {
    void* managed = open().view(buffer);
    if (managed == nullptr) return nb::none();
    PyObject* capsule = PyCapsule_New(managed, "dltensor", [](PyObject* self) {
      // Not consumed by torch.from_dlpack (which renames it): ours to free.
      if (PyCapsule_IsValid(self, "dltensor")) {
        auto* t = static_cast<DLManagedTensorHead*>(PyCapsule_GetPointer(self, "dltensor"));
        if (t != nullptr && t->deleter != nullptr) t->deleter(t);
      }
    });
    if (capsule == nullptr) throw nb::python_error();
    return nb::steal(capsule);
  }

  void read(int64_t buffer, uintptr_t address, uint64_t bytes) {
    std::span<std::byte> out{reinterpret_cast<std::byte*>(address), static_cast<size_t>(bytes)};
    std::string error;
    raise_for(open().read(buffer, out, error), error);
  }

  void write(int64_t buffer, uintptr_t address, uint64_t bytes) {
    std::string error;
    raise_for(open().write(buffer, bytes_at(address, bytes), error), error);
  }

  std::vector<double> kernel_seconds() { return open().kernel_seconds(); }

  void set_setting(const std::string& name, double value) {
    std::string error;
    raise_for(open().set_setting(name, value, error), error);
  }

  std::vector<std::string> notes() const {
    return session_ ? session_->notes() : std::vector<std::string>{};
  }
  uint64_t nvme_reserved_bytes() const { return session_ ? session_->nvme_reserved_bytes() : 0; }
  bool closed() const { return !session_; }
  // Views taken keep the session's memory until they go.
  void close() { session_.reset(); }

 private:
  // dlpack.h's legacy DLManagedTensor as far as its deleter: the fields
  // before it are DLTensor's (data, device, ndim, dtype, shape, strides,
  // byte_offset) and the manager context.
  struct DLManagedTensorHead {
    void* data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t* shape;
    int64_t* strides;
    uint64_t byte_offset;
    void* manager_ctx;
    void (*deleter)(DLManagedTensorHead*);
  };
  exec::Session& open() {
    if (!session_) throw Error("the training session is closed");
    return *session_;
  }
  std::unique_ptr<exec::Session> session_;
};

// A profile (the JSON `memwall calibrate --out` writes) with a graph's
// kernels as one keep-all session measured them (Note [Measured kernels]
// in memwall/hw/hardware.h): `memwall calibrate --graph` without the
// copy-load rounds, whose contention stays the profile's.
std::string profile_with_kernels(const std::string& graph_json,
                                 const std::vector<double>& kernel_seconds, double step_s,
                                 double overhead_s, const std::string& gpu,
                                 const std::string& gpu_file) {
  const Graph graph = graph_from_json_text(graph_json);
  if (kernel_seconds.size() != graph.ops.size()) {
    fail("{} kernel times for a graph of {} ops", kernel_seconds.size(), graph.ops.size());
  }
  Hardware hw = hardware_named(gpu, gpu_file);
  const KernelRound round{
      .kernel_seconds = kernel_seconds, .step_s = step_s, .overhead_s = overhead_s};
  KernelMeasure measured = fold_kernel_rounds(graph, {round});
  measured.contention = hw.copy_contention;
  add_measured_kernels(hw, measured);
  return hardware_to_json(hw).dump(2);
}

}  // namespace

void add_session(nb::module_& m) {
  m.def("profile_with_kernels", &profile_with_kernels, nb::arg("graph_json"),
        nb::arg("kernel_seconds"), nb::arg("step_s"), nb::arg("overhead_s"), nb::arg("gpu"),
        nb::arg("gpu_file") = "",
        "A profile's JSON with a graph's kernels measured by a keep-all session added");
  run_failed_type = nb::borrow(PyErr_NewException("memwall_core.RunFailed", nullptr, nullptr));
  out_of_memory_type =
      nb::borrow(PyErr_NewException("memwall_core.OutOfMemory", run_failed_type.ptr(), nullptr));
  m.attr("RunFailed") = run_failed_type;
  m.attr("OutOfMemory") = out_of_memory_type;
  nb::class_<Session>(m, "Session")
      .def(nb::init<const std::string&, const std::string&,
                    const std::vector<std::tuple<int64_t, std::string, uintptr_t, uint64_t>>&,
                    const nb::bytes&, const std::string&, const std::vector<std::string>&, uint64_t,
                    bool, int, int, const std::string&, const std::string&>(),
           nb::arg("graph_json"), nb::arg("plan_json"), nb::arg("states"), nb::arg("rng"),
           nb::arg("policy") = "stitching", nb::arg("nvme_dirs") = std::vector<std::string>{},
           nb::arg("host_bytes") = 0, nb::arg("time_kernels") = false, nb::arg("rank") = 0,
           nb::arg("ranks") = 1, nb::arg("store") = "", nb::arg("store_prefix") = "",
           "An executor session over a plan, its states placed from (id, name, address, "
           "bytes) each")
      .def("step", &Session::step, nb::arg("inputs"),
           "One step on the batch's (name, address, bytes) each; the step's measures")
      .def("view", &Session::view, nb::arg("buffer"),
           "A DLPack capsule of a state's bytes where they are, or None (on NVMe)")
      .def("read", &Session::read, nb::arg("buffer"), nb::arg("address"), nb::arg("bytes"))
      .def("write", &Session::write, nb::arg("buffer"), nb::arg("address"), nb::arg("bytes"))
      .def("kernel_seconds", &Session::kernel_seconds,
           "With time_kernels: each op's median call in seconds (-1: not timed)")
      .def("set_setting", &Session::set_setting, nb::arg("name"), nb::arg("value"),
           "The value later steps read for a tracked optimizer setting (\"group0.lr\")")
      .def("notes", &Session::notes)
      .def("nvme_reserved_bytes", &Session::nvme_reserved_bytes)
      .def("closed", &Session::closed)
      .def("close", &Session::close);
}

}  // namespace memwall::python
