// libFuzzer target for the plan reader: any input must either parse into a
// plan that writes and reads back to the same text and can be checked
// against a graph, or be rejected with memwall::Error. Any other exception,
// crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "memwall/graph/graph.h"
#include "memwall/plan/plan.h"

namespace {

// A tiny graph (ids 0..3) so that validate_plan sees in- and out-of-range ids.
memwall::Graph small_graph() {
  using namespace memwall;
  Graph graph;
  graph.name = "fuzz";
  const BufferKind kinds[] = {BufferKind::kParam, BufferKind::kInput, BufferKind::kActivation,
                              BufferKind::kOptimState};
  for (int i = 0; i < 4; ++i) {
    Buffer b;
    b.id = i;
    b.name = "b" + std::to_string(i);
    b.bytes = 64;
    b.kind = kinds[i];
    graph.buffers.push_back(b);
  }
  Op op;
  op.id = 0;
  op.name = "f";
  op.type = "t";
  op.in = {0, 1};
  op.out = {2};
  op.updates = {3};
  graph.ops.push_back(op);
  return graph;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const memwall::Graph graph = small_graph();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const memwall::Plan plan = memwall::plan_from_json_text(text);
    // What was accepted must write and read back to the same text.
    const std::string written = memwall::plan_to_json_text(plan);
    if (memwall::plan_to_json_text(memwall::plan_from_json_text(written)) != written) {
      __builtin_trap();
    }
    try {
      memwall::validate_plan(plan, graph);
    } catch (const memwall::Error&) {
      // Out-of-range ids and the like: expected for most inputs.
    }
  } catch (const memwall::Error&) {
    // Rejected with a message: the expected outcome for malformed input.
  }
  return 0;
}
