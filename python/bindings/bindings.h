// The Python extension memwall_core's parts, one function per feature,
// each adding its functions to the module (python/bindings/CMakeLists.txt).
#pragma once

#include <string>

#include <nanobind/nanobind.h>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall::python {

// The profile a caller names: a built-in by name, or a profile file (with
// `gpu` picking one of an array, as --gpu-file does).
Hardware hardware_named(const std::string& gpu, const std::string& gpu_file);

// A graph's JSON text read for `hw`: the profile's measured kernels given
// to its ops (memwall/planner/model_source.h, apply_profile_kernels), its
// notes on Python's stderr as "memwall: note: ..." lines.
Graph graph_for(const std::string& graph_json, const Hardware& hw);

// inspect(graph_json, gpu, gpu_file, by_layer): memwall/report/inspection.h.
void add_estimate(nanobind::module_& m);
// plan(graph_json, gpu, ...) and simulate(graph_json, plan_json, gpu):
// memwall/planner/plan_to_run.h, plan_summary.h, memwall/report/simulation.h.
void add_plan(nanobind::module_& m);
// Session(graph_json, plan_json, states, rng, ...): an executor session,
// memwall/exec/session.h (memwall.Trainer); RunFailed and OutOfMemory.
void add_session(nanobind::module_& m);

}  // namespace memwall::python
