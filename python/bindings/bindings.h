// The Python extension memwall_core's parts, one function per feature,
// each adding its functions to the module (python/bindings/CMakeLists.txt).
#pragma once

#include <nanobind/nanobind.h>

namespace memwall::python {

// inspect(graph_json, gpu, gpu_file, by_layer): memwall/report/inspection.h.
void add_estimate(nanobind::module_& m);

}  // namespace memwall::python
