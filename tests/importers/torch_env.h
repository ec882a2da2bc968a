// Shared by the tracer tests: whether torch is there, where the test
// models live, and the trace of a test script.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/importers/torch_trace.h"
#include "test_util.h"

namespace memwall::testing {

// True when the tracer's interpreter has `modules` ("torch, torchvision").
// Note [Finding, not importing]: it finds them (importlib's find_spec,
// 30 ms) rather than importing them: importing torch, torchvision and
// transformers takes 7.8 s of a core on the development machine, and
// every test process that may trace asked once, some 70 of them per
// `make test`, only to decide whether to skip. scripts/install-deps.sh
// marks memwall's environment complete only after the packages import, so
// an environment that has them imports them; a package that is there but
// broken fails the test that traces, with the tracer's error, instead of
// passing as skipped.
inline bool tracer_has(const std::string& modules) {
  std::string names;
  for (size_t at = 0; at < modules.size();) {
    const size_t comma = std::min(modules.find(',', at), modules.size());
    const size_t first = modules.find_first_not_of(' ', at);
    if (first < comma)
      names += (names.empty() ? "\"" : ", \"") + modules.substr(first, comma - first) + "\"";
    at = comma + 1;
  }
  const std::string cmd = importers::tracer_python() +
                          " -c 'import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) "
                          "for m in (" +
                          names + ",)) else 1)' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// True when the tracer's interpreter's torch sees a GPU (imports torch:
// seconds; only for tests that would fail on a GPU machine otherwise).
inline bool tracer_sees_gpu() {
  static const bool gpu =
      std::system((importers::tracer_python() +
                   " -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' "
                   ">/dev/null 2>&1")
                      .c_str()) == 0;
  return gpu;
}

// True when the tracer's interpreter has torch and torchvision.
inline bool torch_available() {
  static const bool available = tracer_has("torch, torchvision");
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

// True when the tracer's interpreter has torch and transformers.
inline bool transformers_available() {
  static const bool available = tracer_has("torch, transformers");
  return available;
}

#define MEMWALL_REQUIRE_TRANSFORMERS()                       \
  do {                                                       \
    MEMWALL_REQUIRE_TORCH();                                 \
    if (!::memwall::testing::transformers_available()) {     \
      GTEST_SKIP() << "transformers is not importable by "   \
                   << ::memwall::importers::tracer_python(); \
    }                                                        \
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
