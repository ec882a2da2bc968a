// chrome_trace_json on hand-built results: the trace is parsed back with
// nlohmann and checked event by event.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "memwall/report/chrome_trace.h"
#include "test_util.h"

namespace memwall {
namespace {

using nlohmann::json;

// Buffers: 0 x (input), 1 h0.attn.qkv.out, 2 h0.mlp.out. Ops: 0 h0.attn.qkv,
// 1 h0.mlp.out, 2 loss, a chain.
Graph tiny_graph() {
  Graph graph;
  graph.name = "tiny";
  const auto buffer = [&](std::string name, uint64_t bytes, BufferKind kind) {
    Buffer b;
    b.id = static_cast<BufferId>(graph.buffers.size());
    b.name = std::move(name);
    b.bytes = bytes;
    b.kind = kind;
    graph.buffers.push_back(b);
  };
  buffer("x", 1000, BufferKind::kInput);
  buffer("h0.attn.qkv.out", 4096, BufferKind::kActivation);
  buffer("h0.mlp.out", 8192, BufferKind::kActivation);
  const auto op = [&](std::string name, BufferIds in, BufferIds out) {
    Op o;
    o.id = static_cast<OpId>(graph.ops.size());
    o.name = std::move(name);
    o.in = in;
    o.out = out;
    graph.ops.push_back(o);
  };
  op("h0.attn.qkv", {0}, {1});
  op("h0.mlp.out", {1}, {2});
  op("loss", {2}, {});
  return graph;
}

Plan tiny_plan() {
  Plan plan;
  plan.graph = "tiny";
  plan.hardware = "toy-gpu";
  plan.budget = 40 * kGiB;
  plan.steps = {Step::compute(0),   Step::swap_out(1), Step::compute(1), Step::swap_in(1),
                Step::recompute(0), Step::compute(2),  Step::free(2)};
  return plan;
}

// Spans in seconds; step 6 (free) takes no time and has no span.
SimResult tiny_result() {
  SimResult result;
  result.timeline = {
      {Resource::kCompute, 0, 0.0, 0.0015},     {Resource::kD2H, 1, 0.0015, 0.0025},
      {Resource::kCompute, 2, 0.0015, 0.0040},  {Resource::kH2D, 3, 0.0040, 0.0050},
      {Resource::kCompute, 4, 0.0050, 0.00525}, {Resource::kCompute, 5, 0.00525, 0.0060005},
  };
  result.iteration_time = 0.0060005;
  result.budget = 40 * kGiB;
  result.curves[0] = {{0.0, 1000}, {0.0015, 5096}, {0.0025, 1000}, {0.0040, 37 * kGiB}};
  result.curves[1] = {{0.0, 0}, {0.0025, 4096}, {0.0050, 0}};
  result.peak_bytes = {37 * kGiB, 4096, 0};
  return result;
}

json trace(const Graph& graph, const Plan& plan, const SimResult& result) {
  return json::parse(chrome_trace_json(graph, plan, result));
}

std::vector<json> events(const json& doc, std::string_view ph) {
  std::vector<json> out;
  for (const json& event : doc.at("traceEvents")) {
    if (event.at("ph") == ph) out.push_back(event);
  }
  return out;
}

json span_for_step(const json& doc, uint32_t step) {
  for (const json& event : events(doc, "X")) {
    if (event.at("args").at("step") == step) return event;
  }
  ADD_FAILURE() << "no span for step " << step;
  return json::object();
}

TEST(ChromeTrace, DocumentShape) {
  const json doc = trace(tiny_graph(), tiny_plan(), tiny_result());
  ASSERT_TRUE(doc.is_object());
  EXPECT_TRUE(doc.at("traceEvents").is_array());
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  const json& other = doc.at("otherData");
  EXPECT_EQ(other.at("graph"), "tiny");
  EXPECT_EQ(other.at("hardware"), "toy-gpu");
  EXPECT_EQ(other.at("valid"), true);
  EXPECT_EQ(other.at("reason"), "");
  EXPECT_EQ(other.at("iteration_time").get<double>(), 0.0060005);
  EXPECT_EQ(other.at("budget").get<uint64_t>(), 40 * kGiB);
  EXPECT_EQ(other.at("peak_device").get<uint64_t>(), 37 * kGiB);
  EXPECT_EQ(other.at("peak_host").get<uint64_t>(), 4096u);
  EXPECT_EQ(other.at("peak_nvme").get<uint64_t>(), 0u);
  EXPECT_FALSE(other.contains("failed_step"));
  EXPECT_TRUE(events(doc, "i").empty());
}

TEST(ChromeTrace, OneTrackPerBusyResource) {
  const json doc = trace(tiny_graph(), tiny_plan(), tiny_result());
  std::map<int, std::string> names;
  std::map<int, int> sort_index;
  std::string process;
  for (const json& event : events(doc, "M")) {
    EXPECT_EQ(event.at("pid"), 1);
    if (event.at("name") == "process_name") process = event.at("args").at("name");
    if (event.at("name") == "thread_name") names[event.at("tid")] = event.at("args").at("name");
    if (event.at("name") == "thread_sort_index") {
      sort_index[event.at("tid")] = event.at("args").at("sort_index");
    }
  }
  EXPECT_EQ(process, "memwall plan");
  // tid = resource + 1: compute 1, h2d 2, d2h 3; nvme and host cpu idle.
  EXPECT_EQ(names, (std::map<int, std::string>{{1, "device compute"},
                                               {2, "h2d copy (host → device)"},
                                               {3, "d2h copy (device → host)"}}));
  EXPECT_EQ(sort_index, (std::map<int, int>{{1, 0}, {2, 1}, {3, 2}}));

  std::map<int, int> spans_per_tid;
  for (const json& event : events(doc, "X")) {
    EXPECT_EQ(event.at("pid"), 1);
    ++spans_per_tid[event.at("tid")];
  }
  EXPECT_EQ(spans_per_tid, (std::map<int, int>{{1, 4}, {2, 1}, {3, 1}}));
}

TEST(ChromeTrace, SpanTimesAndNames) {
  const json doc = trace(tiny_graph(), tiny_plan(), tiny_result());
  const json compute = span_for_step(doc, 2);
  EXPECT_EQ(compute.at("name"), "h0.mlp.out");
  EXPECT_EQ(compute.at("cat"), "compute");
  EXPECT_EQ(compute.at("ts").get<double>(), 1500.0);
  EXPECT_EQ(compute.at("dur").get<double>(), 2500.0);
  EXPECT_EQ(compute.at("args"), (json{{"step", 2}, {"op", 1}}));

  const json swap_out = span_for_step(doc, 1);
  EXPECT_EQ(swap_out.at("name"), "swap_out h0.attn.qkv.out → host");
  EXPECT_EQ(swap_out.at("tid"), 3);
  EXPECT_EQ(swap_out.at("ts").get<double>(), 1500.0);
  EXPECT_EQ(swap_out.at("dur").get<double>(), 1000.0);
  EXPECT_EQ(swap_out.at("args"), (json{{"step", 1}, {"buffer", 1}, {"bytes", 4096}}));

  const json swap_in = span_for_step(doc, 3);
  EXPECT_EQ(swap_in.at("name"), "swap_in h0.attn.qkv.out → device");
  EXPECT_EQ(swap_in.at("tid"), 2);

  const json recompute = span_for_step(doc, 4);
  EXPECT_EQ(recompute.at("name"), "recompute h0.attn.qkv");
  EXPECT_EQ(recompute.at("cat"), "recompute");
  EXPECT_EQ(recompute.at("ts").get<double>(), 5000.0);
  EXPECT_EQ(recompute.at("dur").get<double>(), 250.0);

  // Sub-microsecond precision survives: 0.0060005 s ends at 6000.5 us.
  const json last = span_for_step(doc, 5);
  EXPECT_EQ(last.at("ts").get<double>(), 5250.0);
  EXPECT_EQ(last.at("dur").get<double>(), 750.5);
}

TEST(ChromeTrace, AdjacentSpansTouchExactly) {
  // 0.1 + 0.2 != 0.3 in binary; rounding each end to nanoseconds keeps
  // back-to-back spans from overlapping in the viewer.
  SimResult result;
  result.timeline = {{Resource::kCompute, 0, 0.1, 0.1 + 0.2}, {Resource::kCompute, 2, 0.3, 0.4}};
  const json doc = trace(tiny_graph(), tiny_plan(), result);
  const json first = span_for_step(doc, 0);
  const json second = span_for_step(doc, 2);
  EXPECT_EQ(first.at("ts").get<double>() + first.at("dur").get<double>(),
            second.at("ts").get<double>());
}

TEST(ChromeTrace, CountersFollowTheCurves) {
  const SimResult result = tiny_result();
  const json doc = trace(tiny_graph(), tiny_plan(), result);
  std::map<std::string, std::vector<std::pair<double, uint64_t>>> counters;
  for (const json& event : events(doc, "C")) {
    EXPECT_EQ(event.at("pid"), 1);
    counters[event.at("name")].emplace_back(event.at("ts").get<double>(),
                                            event.at("args").at("bytes").get<uint64_t>());
  }
  EXPECT_EQ(counters.size(), 2u);  // the nvme curve is empty
  const std::pair<std::string, size_t> tracks[] = {{"device memory", 0}, {"host memory", 1}};
  for (const auto& [name, tier] : tracks) {
    const auto& points = result.curves[tier];
    ASSERT_EQ(counters[name].size(), points.size()) << name;
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_DOUBLE_EQ(counters[name][i].first, points[i].time * 1e6) << name << " " << i;
      EXPECT_EQ(counters[name][i].second, points[i].bytes) << name << " " << i;
    }
  }
}

TEST(ChromeTrace, EscapesArbitraryNames) {
  Graph graph = tiny_graph();
  const std::string weird =
      "say \"hi\" \\path\\ new\nline\ttab \x01 caf\u00e9 \u65e5\u672c \U0001F600";
  graph.ops[1].name = weird;
  graph.buffers[1].name = "buf \"quoted\"";
  const std::string text = chrome_trace_json(graph, tiny_plan(), tiny_result());
  const json doc = json::parse(text);
  EXPECT_EQ(span_for_step(doc, 2).at("name"), weird);
  EXPECT_EQ(span_for_step(doc, 1).at("name"), "swap_out buf \"quoted\" → host");
  EXPECT_EQ(text.find('\n' + std::string("line")), std::string::npos);  // newline escaped
}

TEST(ChromeTrace, InvalidUtf8BecomesReplacementCharacter) {
  Graph graph = tiny_graph();
  graph.ops[0].name = "bad \xff\xfe name";
  Plan plan = tiny_plan();
  plan.graph = "graph \xc3";  // truncated sequence, in otherData
  const json doc = trace(graph, plan, tiny_result());
  EXPECT_EQ(span_for_step(doc, 0).at("name"), "bad \uFFFD\uFFFD name");
  EXPECT_EQ(doc.at("otherData").at("graph"), "graph \uFFFD");
}

TEST(ChromeTrace, FailureMarkedAtTheFailingStep) {
  SimResult result = tiny_result();
  result.valid = false;
  result.failed_step = 3;
  result.reason = "swap_in h0.attn.qkv.out: device budget exceeded by 12 bytes";
  const json doc = trace(tiny_graph(), tiny_plan(), result);
  const std::vector<json> instants = events(doc, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0].at("s"), "g");
  EXPECT_EQ(instants[0].at("ts").get<double>(), 4000.0);
  EXPECT_EQ(instants[0].at("name"), "invalid: " + result.reason);
  EXPECT_EQ(instants[0].at("args").at("reason"), result.reason);
  EXPECT_EQ(instants[0].at("args").at("step"), 3);
  EXPECT_EQ(instants[0].at("args").at("kind"), "swap_in");
  EXPECT_EQ(doc.at("otherData").at("valid"), false);
  EXPECT_EQ(doc.at("otherData").at("reason"), result.reason);
  EXPECT_EQ(doc.at("otherData").at("failed_step"), 3);
}

TEST(ChromeTrace, FailureWithoutSpanMarkedAtTheEnd) {
  for (const size_t step : {size_t{6}, size_t{7}}) {  // free (no span), end of iteration
    SimResult result = tiny_result();
    result.valid = false;
    result.failed_step = step;
    result.reason = "a \"quoted\" reason";
    const json doc = trace(tiny_graph(), tiny_plan(), result);
    const std::vector<json> instants = events(doc, "i");
    ASSERT_EQ(instants.size(), 1u);
    EXPECT_EQ(instants[0].at("ts").get<double>(), 6000.5) << step;
    EXPECT_EQ(instants[0].at("args").at("reason"), "a \"quoted\" reason");
  }
}

TEST(ChromeTrace, EmptyResult) {
  const json doc = trace(Graph{}, Plan{}, SimResult{});
  ASSERT_EQ(doc.at("traceEvents").size(), 1u);  // the process name
  EXPECT_EQ(doc.at("traceEvents")[0].at("name"), "process_name");
}

TEST(ChromeTrace, OutOfRangeIdsAndOddTimesStayValid) {
  Plan plan = tiny_plan();
  plan.steps.push_back(Step::compute(99));
  plan.steps.push_back(Step::swap_out(-5));
  SimResult result;
  result.timeline = {
      {Resource::kCompute, 7, 0, 1e-9},
      {Resource::kD2H, 8, -1e-6, 0},
      {Resource::kHostCpu, 1000, 0.5, 0.25},  // no such step; ends before start
      {Resource::kNvmeRead, 0, std::nan(""), std::numeric_limits<double>::infinity()}};
  result.curves[2] = {{1e30, 1}};
  const json doc = trace(tiny_graph(), plan, result);
  EXPECT_EQ(span_for_step(doc, 7).at("name"), "op 99");
  EXPECT_EQ(span_for_step(doc, 7).at("dur").get<double>(), 0.001);
  EXPECT_EQ(span_for_step(doc, 8).at("name"), "swap_out buffer -5 → host");
  EXPECT_EQ(span_for_step(doc, 8).at("ts").get<double>(), -1.0);
  EXPECT_EQ(span_for_step(doc, 1000).at("name"), "step 1000");
  EXPECT_EQ(span_for_step(doc, 1000).at("dur").get<double>(), 0.0);
  EXPECT_EQ(span_for_step(doc, 0).at("ts").get<double>(), 0.0);
}

TEST(ChromeTrace, LargeTimeline) {
  Plan plan;
  SimResult result;
  constexpr uint32_t kSpans = 100'000;
  for (uint32_t i = 0; i < kSpans; ++i) {
    plan.steps.push_back(Step::compute(static_cast<OpId>(i % 3)));
    result.timeline.push_back({Resource::kCompute, i, i * 1e-5, (i + 1) * 1e-5});
  }
  const json doc = trace(tiny_graph(), plan, result);
  uint32_t spans = 0;
  for (const json& event : doc.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    EXPECT_EQ(event.at("args").at("step"), spans);  // in timeline order
    ++spans;
  }
  EXPECT_EQ(spans, kSpans);
  EXPECT_EQ(doc.at("traceEvents").back().at("ts").get<double>(), 999'990.0);
}

}  // namespace
}  // namespace memwall
