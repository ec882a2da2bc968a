// Shared by the tracer tests: whether torch is there, where the test
// models live, and the trace of a test script.
#pragma once

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "memwall/graph/error.h"
#include "memwall/importers/torch_trace.h"
#include "test_util.h"

namespace memwall::testing {

// True when the tracer's interpreter imports `modules` ("torch, torchvision").
inline bool tracer_imports(const std::string& modules) {
  const std::string cmd =
      importers::tracer_python() + " -c 'import " + modules + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// True when the tracer's interpreter imports torch and torchvision.
inline bool torch_available() {
  static const bool available = tracer_imports("torch, torchvision");
  return available;
}

#define MEMWALL_REQUIRE_TORCH()                                                         \
  do {                                                                                  \
    if (!::memwall::testing::torch_available()) {                                       \
      GTEST_SKIP() << "torch / torchvision are not importable by "                      \
                   << ::memwall::importers::tracer_python()                             \
                   << ": `make test` installs them in memwall's environment "           \
                      "(scripts/install-deps.sh --torch, best effort) and the install " \
                      "failed or did not run";                                          \
    }                                                                                   \
  } while (0)

// The one-line message trace_torch throws for `request`, or "" when it
// traces.
inline std::string trace_error(const importers::TorchTraceRequest& request) {
  try {
    importers::trace_torch(request);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline std::string test_script(const std::string& spec) {
  return std::string(MEMWALL_SOURCE_DIR) + "/tests/python/" + spec;
}

}  // namespace memwall::testing
