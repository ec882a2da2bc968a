// memwall.estimate's C++ half: a traced graph's figures on a hardware
// profile, as `memwall inspect` prints them (memwall/report/inspection.h).
#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/model_source.h"
#include "memwall/report/inspection.h"
#include "memwall/swap/optimizer_impl.h"

namespace memwall::python {

Hardware hardware_named(const std::string& gpu, const std::string& gpu_file) {
  if (gpu_file.empty()) return find_gpu(gpu);
  return read_hardware_file(gpu_file, gpu);
}

Graph graph_for(const std::string& graph_json, const Hardware& hw) {
  // As `memwall trace` writes it (Note [Optimizer as the device runs it]).
  Graph graph = optimizer_as_the_device_runs_it(graph_from_json_text(graph_json));
  std::vector<std::string> notes;
  apply_profile_kernels(hw, graph, notes);
  for (const std::string& line : notes) PySys_WriteStderr("memwall: note: %.900s\n", line.c_str());
  return graph;
}

namespace {

// (inspect --json's text, inspect's table) for a memwall.graph/1 text.
std::pair<std::string, std::string> inspect(const std::string& graph_json, const std::string& gpu,
                                            const std::string& gpu_file, bool by_layer) {
  const Hardware hw = hardware_named(gpu, gpu_file);
  const Inspection in = inspect_graph(graph_for(graph_json, hw), hw, by_layer);
  return {inspection_json(in).dump(), inspection_text(in)};
}

}  // namespace

void add_estimate(nanobind::module_& m) {
  m.def("inspect", &inspect, nanobind::arg("graph_json"), nanobind::arg("gpu"),
        nanobind::arg("gpu_file") = "", nanobind::arg("by_layer") = false,
        "A graph's memory breakdown, peaks, fit and estimated time on a GPU profile: "
        "(JSON text as `memwall inspect --json` prints it, the table as `memwall inspect`)");
}

}  // namespace memwall::python
