// Chrome Trace Event Format ("JSON Object Format") of a simulated plan.
//
// The document is written as text: a trace holds one event per span and per
// curve point, and going through a nlohmann::json tree for 100k+ events costs
// more than the simulation. Strings go through append_json_string_lossy
// (nlohmann's escaping, as in otherData); numbers are integers or exact decimal nanoseconds.
#include "memwall/report/chrome_trace.h"

#include <algorithm>
#include <array>
#include <optional>

#include <fmt/format.h>

#include "append.h"
#include "json_text.h"
#include "memwall/base/json_string.h"

namespace memwall {
namespace {

using report::append;
using report::append_micros;
using report::to_nanos;

constexpr int kPid = 1;

// Track titles, in Resource order.
constexpr std::array<std::string_view, kNumResources> kTrackNames = {"device compute",
                                                                     "h2d copy (host → device)",
                                                                     "d2h copy (device → host)",
                                                                     "nvme read (nvme → host)",
                                                                     "nvme write (host → nvme)",
                                                                     "host cpu",
                                                                     "collectives (interconnect)"};
constexpr std::array<std::string_view, kNumTiers> kCounterNames = {"device memory", "host memory",
                                                                   "nvme memory"};

bool is_copy_engine(Resource resource) {
  return resource != Resource::kCompute && resource != Resource::kHostCpu &&
         resource != Resource::kComm;
}

int tid_of(Resource resource) { return static_cast<int>(resource) + 1; }

std::string op_name(const Graph& graph, OpId op) {
  if (op >= 0 && static_cast<size_t>(op) < graph.ops.size()) return graph.ops[op].name;
  return fmt::format("op {}", op);
}

std::string buffer_name(const Graph& graph, BufferId buf) {
  if (buf >= 0 && static_cast<size_t>(buf) < graph.buffers.size()) return graph.buffers[buf].name;
  return fmt::format("buffer {}", buf);
}

uint64_t buffer_bytes(const Graph& graph, BufferId buf) {
  if (buf >= 0 && static_cast<size_t>(buf) < graph.buffers.size()) return graph.buffers[buf].bytes;
  return 0;
}

// What a viewer shows on the slice: the op for compute, the buffer and
// where it goes for memory steps.
std::string step_title(const Graph& graph, const Step& step) {
  switch (step.kind) {
    case StepKind::kCompute:
      return op_name(graph, step.op);
    case StepKind::kRecompute:
      return "recompute " + op_name(graph, step.op);
    case StepKind::kSwapOut:
      return fmt::format("swap_out {} → {}", buffer_name(graph, step.buf), to_string(step.to));
    case StepKind::kSwapIn:
      return fmt::format("swap_in {} → {}", buffer_name(graph, step.buf), to_string(step.to));
    case StepKind::kFree:
      return "free " + buffer_name(graph, step.buf);
  }
  return "step";
}

void append_metadata(std::string& out, std::string_view process) {
  out += R"({"name":"process_name","ph":"M","pid":1,"args":{"name":)";
  append_json_string_lossy(out, process);
  out += "}}";
}

void append_thread_metadata(std::string& out, size_t resource) {
  const int tid = static_cast<int>(resource) + 1;
  out += ",\n";
  append(out, R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":)", kPid, tid);
  append_json_string_lossy(out, kTrackNames[resource]);
  out += "}}";
  append(out,
         ",\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},"
         "\"args\":{{\"sort_index\":{}}}}}",
         kPid, tid, resource);
}

void append_span(std::string& out, const Graph& graph, const Plan& plan, const Span& span) {
  const int64_t start = to_nanos(span.start);
  const int64_t end = std::max(start, to_nanos(span.end));
  out += ",\n{\"name\":";
  const bool known = span.step < plan.steps.size();
  const Step step = known ? plan.steps[span.step] : Step{};
  append_json_string_lossy(out,
                           known ? step_title(graph, step) : fmt::format("step {}", span.step));
  if (known) append(out, ",\"cat\":\"{}\"", to_string(step.kind));
  out += ",\"ph\":\"X\",\"ts\":";
  append_micros(out, start);
  out += ",\"dur\":";
  append_micros(out, end - start);
  append(out, ",\"pid\":{},\"tid\":{},\"args\":{{\"step\":{}", kPid, tid_of(span.resource),
         span.step);
  if (known && step.op >= 0) append(out, ",\"op\":{}", step.op);
  if (known && step.buf >= 0) {
    append(out, ",\"buffer\":{}", step.buf);
    if (is_copy_engine(span.resource)) {
      append(out, ",\"bytes\":{}", buffer_bytes(graph, step.buf));
    }
  }
  out += "}}";
}

void append_counters(std::string& out, const SimResult& result) {
  for (size_t tier = 0; tier < kNumTiers; ++tier) {
    for (const MemoryPoint& point : result.curves[tier]) {
      out += ",\n{\"name\":\"";
      out += kCounterNames[tier];
      out += "\",\"ph\":\"C\",\"ts\":";
      append_micros(out, to_nanos(point.time));
      append(out, ",\"pid\":{},\"args\":{{\"bytes\":{}}}}}", kPid, point.bytes);
    }
  }
}

// The latest time anything in the result happens: where a failure found at
// the end of the iteration is marked.
double end_time(const SimResult& result) {
  double end = result.iteration_time;
  for (const Span& span : result.timeline) end = std::max(end, span.end);
  for (const auto& curve : result.curves) {
    if (!curve.empty()) end = std::max(end, curve.back().time);
  }
  return end;
}

void append_failure(std::string& out, const Plan& plan, const SimResult& result) {
  // The failing step's first span, if it got to run at all.
  std::optional<Span> failing;
  for (const Span& span : result.timeline) {
    if (span.step == result.failed_step && (!failing || span.start < failing->start)) {
      failing = span;
    }
  }
  const double time = failing ? failing->start : end_time(result);
  out += ",\n{\"name\":";
  append_json_string_lossy(out, "invalid: " + result.reason);
  out += ",\"ph\":\"i\",\"s\":\"g\",\"ts\":";
  append_micros(out, to_nanos(time));
  append(out, ",\"pid\":{},\"tid\":{},\"args\":{{\"reason\":", kPid,
         failing ? tid_of(failing->resource) : 1);
  append_json_string_lossy(out, result.reason);
  append(out, ",\"step\":{}", result.failed_step);
  if (result.failed_step < plan.steps.size()) {
    append(out, ",\"kind\":\"{}\"", to_string(plan.steps[result.failed_step].kind));
  }
  out += "}}";
}

nlohmann::json other_data(const Plan& plan, const SimResult& result) {
  nlohmann::json data = {
      {"graph", plan.graph},
      {"hardware", plan.hardware},
      {"valid", result.valid},
      {"reason", result.reason},
      {"iteration_time", result.iteration_time},
      {"compute_time", result.compute_time},
      {"transfer_stall_time", result.transfer_stall_time},
      {"budget", result.budget},
      {"steps", plan.steps.size()},
      {"steps_executed", result.steps_executed},
  };
  for (size_t tier = 0; tier < kNumTiers; ++tier) {
    data[fmt::format("peak_{}", to_string(static_cast<Tier>(tier)))] = result.peak_bytes[tier];
  }
  if (!result.valid) data["failed_step"] = result.failed_step;
  return data;
}

}  // namespace

std::string chrome_trace_json(const Graph& graph, const Plan& plan, const SimResult& result,
                              std::string_view process) {
  std::array<bool, kNumResources> used{};
  for (const Span& span : result.timeline) {
    if (static_cast<size_t>(span.resource) < kNumResources) {
      used[static_cast<size_t>(span.resource)] = true;
    }
  }
  size_t points = 0;
  for (const auto& curve : result.curves) points += curve.size();

  std::string out;
  out.reserve(256 + result.timeline.size() * 160 + points * 80);
  out += "{\"traceEvents\":[\n";
  append_metadata(out, process);
  for (size_t r = 0; r < kNumResources; ++r) {
    if (used[r]) append_thread_metadata(out, r);
  }
  for (const Span& span : result.timeline) {
    if (static_cast<size_t>(span.resource) < kNumResources) append_span(out, graph, plan, span);
  }
  append_counters(out, result);
  if (!result.valid) append_failure(out, plan, result);
  out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
  out += other_data(plan, result).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += "}\n";
  return out;
}

}  // namespace memwall
