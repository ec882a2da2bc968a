// `memwall inspect`: the memory breakdown and estimated time of one training
// iteration under the default schedule (no recomputation, no offload).
#include <iostream>

#include "commands.h"
#include "memwall/base/output_files.h"
#include "memwall/report/format.h"
#include "memwall/report/inspection.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct InspectArgs {
  GraphSource source;
  GpuSource gpu;
  bool json = false;
  bool by_layer = false;
  std::string export_path;
};

int run_inspect(const InspectArgs& args) {
  OutputFiles outputs;
  outputs.declare(args.export_path);
  const Hardware hw = args.gpu.load();
  const Graph graph = args.source.load(hw);
  const Inspection inspection = inspect_graph(graph, hw, args.by_layer);
  if (!args.export_path.empty()) {
    outputs.set(args.export_path, graph_text_for(hw, graph));
    outputs.commit();
  }
  if (args.json) {
    std::cout << inspection_json(inspection).dump(2) << "\n";
    return 0;
  }
  std::cout << inspection_text(inspection);
  if (!args.export_path.empty()) std::cout << field("graph written to", args.export_path);
  return 0;
}

}  // namespace

void add_inspect(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("inspect", "memory breakdown and time of one training iteration");
  auto args = std::make_shared<InspectArgs>();
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_flag("--by-layer", args->by_layer, "also list activations saved for backward per layer");
  cmd->add_option("--export", args->export_path, "write the graph as memwall.graph/1 JSON");
  cmd->callback([&action, args] { action = [args] { return run_inspect(*args); }; });
}

}  // namespace memwall::cli
