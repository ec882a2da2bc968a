// Checking a plan against its graph (plan.h): what can be judged without
// executing it. Checks run in the order of the format (budget, placement,
// steps, offsets), so the first problem reported is the first in the file.
#include <string>

#include "memwall/base/error.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/plan.h"

namespace memwall {
namespace {

using detail::buffer_label;
using detail::in_quotes;

// "120 ops", "1 op".
std::string count(size_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

bool has_buffer(const Graph& graph, BufferId id) {
  return id >= 0 && static_cast<size_t>(id) < graph.buffers.size();
}

// A tier in a message: its name in quotes, or its number when it is none.
std::string shown(Tier tier) {
  if (tier > Tier::kNvme) return std::to_string(static_cast<unsigned>(tier));
  return in_quotes(to_string(tier));
}

void check_placement(const Plan& plan, const Graph& graph) {
  for (const auto& [id, tier] : plan.placement) {
    if (!has_buffer(graph, id)) {
      fail("plan: placement: buffer {} does not exist (the graph has {})", id,
           count(graph.buffers.size(), "buffer"));
    }
    if (tier > Tier::kNvme) {
      fail(R"(plan: placement: {} must be "host", "nvme" or "device", got {})",
           buffer_label(graph, id), shown(tier));
    }
    const BufferKind kind = graph.buffers[id].kind;
    if (!exists_before_first_op(kind)) {
      fail(
          "plan: placement: {} of kind {} does not exist before the first op (only param, "
          "optim_state and input buffers have a starting tier)",
          buffer_label(graph, id), to_string(kind));
    }
  }
}

void check_step(const Step& step, size_t index, const Graph& graph) {
  if (step.kind > StepKind::kFree) {
    fail("plan: step {}: unknown step kind {}", index, static_cast<unsigned>(step.kind));
  }
  const auto step_fail = [&](const std::string& what) {
    fail("plan: step {} ({}): {}", index, to_string(step.kind), what);
  };
  switch (step.kind) {
    case StepKind::kCompute:
    case StepKind::kRecompute:
      if (step.op < 0 || static_cast<size_t>(step.op) >= graph.ops.size()) {
        step_fail(fmt::format("op {} does not exist (the graph has {})", step.op,
                              count(graph.ops.size(), "op")));
      }
      if (step.on != Tier::kDevice && step.on != Tier::kHost) {
        step_fail(fmt::format(R"("on" must be "device" or "host", got {})", shown(step.on)));
      }
      break;
    case StepKind::kSwapOut:
    case StepKind::kSwapIn:
    case StepKind::kFree:
      if (!has_buffer(graph, step.buf)) {
        step_fail(fmt::format("buffer {} does not exist (the graph has {})", step.buf,
                              count(graph.buffers.size(), "buffer")));
      }
      if (step.kind == StepKind::kSwapOut && step.to != Tier::kHost && step.to != Tier::kNvme) {
        step_fail(fmt::format(R"("to" must be "host" or "nvme", got {})", shown(step.to)));
      }
      if (step.kind == StepKind::kSwapIn && step.to != Tier::kDevice && step.to != Tier::kHost) {
        step_fail(fmt::format(R"("to" must be "device" or "host", got {})", shown(step.to)));
      }
      break;
  }
}

// One stay of buffer `id` at `at`: below 2^62 and within the budget.
void check_offset(const Plan& plan, const Graph& graph, BufferId id, uint64_t at) {
  if (at > kMaxBytes) {
    fail("plan: offsets: {} at {} is above the limit of 2^62 bytes", buffer_label(graph, id), at);
  }
  const uint64_t bytes = graph.buffers[id].bytes;
  // Both operands are at most 2^62 for a valid graph; checked_add guards
  // the sum for any other.
  const uint64_t end = checked_add(at, bytes, "plan: offsets: an offset plus its size");
  if (end > plan.budget) {
    fail("plan: offsets: {} at {} with {} bytes ends past the budget of {}",
         buffer_label(graph, id), at, bytes, plan.budget);
  }
}

void check_offsets(const Plan& plan, const Graph& graph) {
  for (const auto& [id, offset] : plan.offsets) {
    if (!has_buffer(graph, id)) {
      fail("plan: offsets: buffer {} does not exist (the graph has {})", id,
           count(graph.buffers.size(), "buffer"));
    }
    check_offset(plan, graph, id, offset);
    const auto later = plan.stay_offsets.find(id);
    if (later == plan.stay_offsets.end()) continue;
    for (const uint64_t at : later->second) check_offset(plan, graph, id, at);
  }
  for (const auto& [id, later] : plan.stay_offsets) {
    if (!plan.offsets.contains(id))
      fail("plan: offsets: stay offsets for {} without its first", id);
  }
}

// Workspace offsets place each op's workspace in the arena of `offsets`.
void check_workspace_offsets(const Plan& plan, const Graph& graph) {
  if (!plan.workspace_offsets.empty() && plan.offsets.empty()) {
    fail("plan: workspace_offsets without offsets: the workspace has no arena to sit in");
  }
  for (const auto& [id, runs] : plan.workspace_offsets) {
    if (id < 0 || static_cast<size_t>(id) >= graph.ops.size()) {
      fail("plan: workspace_offsets: op {} does not exist (the graph has {})", id,
           count(graph.ops.size(), "op"));
    }
    const uint64_t bytes = contiguous_workspace(graph.ops[id]);  // Note [Workspace span]
    if (bytes == 0) {
      fail("plan: workspace_offsets: {} has no workspace to place", detail::op_label(graph, id));
    }
    if (runs.empty())
      fail("plan: workspace_offsets: {} has no offset", detail::op_label(graph, id));
    for (const uint64_t offset : runs) {
      const uint64_t end =
          checked_add(offset, bytes, "plan: workspace_offsets: an offset plus its size");
      if (end > plan.budget) {
        fail(
            "plan: workspace_offsets: the workspace of {} at {} with {} bytes ends past the "
            "budget of {}",
            detail::op_label(graph, id), offset, bytes, plan.budget);
      }
    }
  }
}

}  // namespace

void validate_plan(const Plan& plan, const Graph& graph) {
  if (plan.budget > kMaxBytes) {
    fail("plan: \"budget\" is {}, above the limit of 2^62 bytes", plan.budget);
  }
  check_placement(plan, graph);
  for (size_t i = 0; i < plan.steps.size(); ++i) check_step(plan.steps[i], i, graph);
  check_offsets(plan, graph);
  check_workspace_offsets(plan, graph);
}

}  // namespace memwall

namespace memwall {

void check_plan_graph(const Plan& plan, const Graph& graph) {
  if (plan.graph_fingerprint.empty()) {
    // A plan from before fingerprints: its graph's name is all there is.
    if (plan.graph != graph.name) {
      fail("the plan is for graph {}, not {}", in_quotes(plan.graph), in_quotes(graph.name));
    }
    return;
  }
  const std::string actual = graph_fingerprint(graph);
  if (plan.graph_fingerprint == actual) return;
  if (plan.graph == graph.name) {
    fail(
        "the plan is for another graph named {}: its graph's fingerprint is {}, this one's {} "
        "(another batch, dtype, model or version of the trace?)",
        in_quotes(graph.name), plan.graph_fingerprint, actual);
  }
  fail("the plan is for graph {} (fingerprint {}), not {} (fingerprint {})", in_quotes(plan.graph),
       plan.graph_fingerprint, in_quotes(graph.name), actual);
}

std::string plan_text_for(Plan plan, const Graph& graph) {
  plan.graph_fingerprint = graph_fingerprint(graph);
  return plan_to_json_text(plan);
}

}  // namespace memwall
