// A simulation's exports (exports.h).
#include "memwall/report/exports.h"

#include <fmt/format.h>

#include "memwall/base/output_files.h"
#include "memwall/report/chrome_trace.h"
#include "memwall/report/format.h"
#include "memwall/report/memory_svg.h"

namespace memwall {

SimOptions SimExports::sim_options() const {
  return {.record_timeline = !trace_file.empty(), .record_curves = !svg_file.empty()};
}

void SimExports::declare(OutputFiles& outputs) const {
  outputs.declare(trace_file);
  outputs.declare(svg_file);
}

void SimExports::write(OutputFiles& outputs, const Graph& graph, const Plan& plan,
                       const Hardware& hw, const SimResult& r) const {
  if (!trace_file.empty()) outputs.set(trace_file, chrome_trace_json(graph, plan, r));
  if (!svg_file.empty()) {
    outputs.set(svg_file,
                memory_svg(r, fmt::format("{} on {}: device memory", graph.name, hw.name)));
  }
}

std::string SimExports::written_rows() const {
  std::string rows;
  if (!trace_file.empty()) rows += field("trace written to", trace_file);
  if (!svg_file.empty()) rows += field("plot written to", svg_file);
  return rows;
}

}  // namespace memwall
