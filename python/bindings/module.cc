// memwall_core: the C++ modules, in-process, for the package python/memwall
// (memwall/native.py). memwall::Error (bad input: the one line a command
// prints before exit code 2) arrives as memwall_core.Error with that line.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "memwall/base/error.h"

NB_MODULE(memwall_core, m) {
  m.doc() = "memwall's C++ modules for the Python package memwall (python/bindings)";
  nanobind::exception<memwall::Error>(m, "Error");
  memwall::python::add_estimate(m);
  memwall::python::add_plan(m);
  memwall::python::add_session(m);
}
