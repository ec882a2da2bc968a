// libFuzzer target for the graph reader: any input must either parse into a
// graph whose liveness and memory accounting run cleanly, or be rejected
// with memwall::Error. Any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memwall/graph/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const memwall::Graph graph = memwall::graph_from_json_text(text);
    const std::vector<memwall::BufferLife> lives = memwall::liveness(graph);
    const memwall::MemoryProfile profile = memwall::memory_profile(graph, lives);
    const memwall::MemorySummary summary = memwall::memory_summary(graph);
    // What was accepted must write and read back to the same text.
    const std::string written = memwall::graph_to_json_text(graph);
    if (memwall::graph_to_json_text(memwall::graph_from_json_text(written)) != written) {
      __builtin_trap();
    }
    (void)profile;
    (void)summary;
  } catch (const memwall::Error&) {
    // Rejected with a message: the expected outcome for malformed input.
  }
  return 0;
}
