// The canonical-layout fast path of the graph reader (json_objects.cc, Note
// [Canonical fast path]) must read exactly what the general reader reads,
// and hand every object it does not expect to that reader whole.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "graph_builder.h"

namespace memwall {
namespace {

// Puts a space after the '{' that opens each buffer and op (the writer puts
// one per line), which takes every object off the fast path.
std::string off_the_fast_path(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '{' && i > 0 && text[i - 1] == '\n') out += ' ';
  }
  return out;
}

// Values at the edges of what each field accepts.
Graph edge_values() {
  Graph graph = testing::two_layer_step();
  graph.buffers[0].name = "quote \" backslash \\ tab \t";  // escapes: general string path
  graph.buffers[1].name = "\u00e9t\u00e9 \U0001F600";      // non-ASCII
  graph.buffers[2].name = "a.name.longer.than.the.short.string.buffer";
  graph.buffers[2].shape = {0, 1, 999999999999999};  // 15 digits: still a small integer
  graph.buffers[3].shape = {1234567890123456};       // 16 digits: the general number path
  graph.buffers[3].dtype = DType::kI64;
  graph.buffers[4].bytes = kMaxBytes / 2;  // 19 digits; the total stays within the limit
  graph.buffers[5].bytes = 0;
  graph.ops[0].flops = 1.5e9;
  graph.ops[0].bytes = 0.1;
  graph.ops[0].time = 3.5e-6;
  graph.ops[1].flops = 12345678901234567.0;
  graph.ops[1].bytes = 1e300;
  graph.ops[1].time = 0.0;
  graph.ops[2].flops = -0.0;                      // accepted: not below zero
  graph.ops[2].workspace = kMaxBytes / 2 - 1000;  // 19 digits, fits beside the buffers
  graph.ops[3].flops = 5e-324;                    // the smallest subnormal
  graph.ops[3].type = "";
  graph.ops[4].name = "";
  graph.ops[4].call = R"({"op":"aten::_foreach_add_","args":[[{"buf":0}],{"x":[1,2.5e-3,"}"]}]})";
  return graph;
}

void expect_same(const Graph& a, const Graph& b) {
  EXPECT_EQ(graph_to_json_text(a), graph_to_json_text(b));
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    // Bit for bit, which the text alone would not show for -0.0 and 0.0.
    EXPECT_EQ(std::signbit(a.ops[i].flops), std::signbit(b.ops[i].flops)) << i;
    EXPECT_EQ(a.ops[i].flops, b.ops[i].flops) << i;
    EXPECT_EQ(a.ops[i].bytes, b.ops[i].bytes) << i;
    EXPECT_EQ(a.ops[i].time, b.ops[i].time) << i;
    EXPECT_EQ(a.ops[i].call, b.ops[i].call) << i;
  }
}

TEST(JsonCanonical, ReadsWhatTheGeneralReaderReads) {
  const Graph graph = edge_values();
  const std::string text = graph_to_json_text(graph);
  const std::string spaced = off_the_fast_path(text);
  ASSERT_NE(spaced, text);
  const Graph fast = graph_from_json_text(text);
  const Graph general = graph_from_json_text(spaced);
  expect_same(fast, general);
  expect_same(fast, graph);
  EXPECT_TRUE(std::signbit(fast.ops[2].flops));
  EXPECT_EQ(fast.buffers[3].shape, (std::vector<int64_t>{1234567890123456}));
  EXPECT_EQ(fast.buffers[4].bytes, kMaxBytes / 2);
  EXPECT_EQ(fast.ops[3].flops, 5e-324);
  EXPECT_EQ(fast.ops[4].call, graph.ops[4].call);
}

std::string one_op_graph(const std::string& op) {
  return R"({"format":"memwall.graph/1","name":"g","meta":{},"buffers":[)"
         "\n"
         R"({"id":0,"name":"x","bytes":8,"kind":"input","dtype":"fp32","shape":[2]},)"
         "\n"
         R"({"id":1,"name":"y","bytes":8,"kind":"activation","dtype":"fp32","shape":[2]}],)"
         "\n"
         R"("ops":[)"
         "\n" +
         op + "]}";
}

using testing::json_error_of;

constexpr const char* kOpStart =
    R"({"id":0,"name":"f","type":"relu","phase":"forward","in":[0],"out":[1],"updates":[],)";

// Objects that start in the canonical layout and leave it late: the values
// read before the point of departure must not leak into the result.
TEST(JsonCanonical, ObjectsLeavingTheLayoutAreReadWhole) {
  // "time" left out: defaults.
  Graph graph = graph_from_json_text(
      one_op_graph(std::string(kOpStart) + R"("workspace":4,"flops":2,"bytes":3})"));
  EXPECT_EQ(graph.ops[0].in, (std::vector<BufferId>{0}));
  EXPECT_EQ(graph.ops[0].workspace, 4u);
  EXPECT_EQ(graph.ops[0].time, std::nullopt);
  // Fields out of order, and a space before the last value.
  graph = graph_from_json_text(
      one_op_graph(std::string(kOpStart) + R"("workspace":4,"bytes":3,"flops":2,"time": 0.5})"));
  EXPECT_EQ(graph.ops[0].flops, 2.0);
  EXPECT_EQ(graph.ops[0].bytes, 3.0);
  EXPECT_EQ(graph.ops[0].time, 0.5);
  EXPECT_EQ(graph.ops[0].out, (std::vector<BufferId>{1}));
  // "call" before "time": read whole, call and all.
  graph = graph_from_json_text(one_op_graph(std::string(kOpStart) +
                                            R"("workspace":4,"flops":2,"bytes":3,"call":{"a":[1]},)"
                                            R"("time":0.5})"));
  EXPECT_EQ(graph.ops[0].call, R"({"a":[1]})");
  EXPECT_EQ(graph.ops[0].time, 0.5);
  // A canonical "call" with spaces inside is kept with them.
  graph = graph_from_json_text(
      one_op_graph(std::string(kOpStart) +
                   R"("workspace":4,"flops":2,"bytes":3,"time":null,"call": { "a" : 1 }})"));
  EXPECT_EQ(graph.ops[0].call, R"({ "a" : 1 })");
  EXPECT_EQ(graph.ops[0].workspace, 4u);
}

// Mistakes in canonical-looking objects get the general reader's message
// (json_errors_test.cc holds the full catalogue).
TEST(JsonCanonical, MistakesGetTheGeneralMessages) {
  const std::string tail = R"("workspace":0,"flops":0,"bytes":0,"time":null})";
  EXPECT_EQ(
      json_error_of(one_op_graph(std::string(kOpStart) + tail + "x")),
      "graph: invalid JSON at line 5, column 130 (in op 0): expected ',' or ']' after an array "
      "element");
  EXPECT_EQ(
      json_error_of(one_op_graph(std::string(kOpStart) +
                                 R"("workspace":0,"flops":0,"bytes":0,"time":null,"extra":1})")),
      "graph: op 0 (\"f\"): unknown field \"extra\"");
  EXPECT_EQ(
      json_error_of(one_op_graph(std::string(kOpStart) +
                                 R"("workspace":0,"flops":0,"bytes":0,"time":null,"flops":1})")),
      "graph: op 0 (\"f\"): duplicate field \"flops\"");
  EXPECT_EQ(
      json_error_of(one_op_graph(std::string(kOpStart) +
                                 R"("workspace":0,"flops":0,"bytes":0,"time":null,"call":3})")),
      "graph: op 0 (\"f\"): \"call\" must be an object, got a number");
  EXPECT_EQ(json_error_of(one_op_graph(
                std::string(kOpStart) +
                R"("workspace":0,"flops":0,"bytes":0,"time":null,"call":{},"call":{}})")),
            "graph: op 0 (\"f\"): duplicate field \"call\"");
  EXPECT_EQ(
      json_error_of(one_op_graph(std::string(kOpStart) +
                                 R"("workspace":0,"flops":0,"bytes":0,"time":null,"call":{"a"}})")),
      "graph: invalid JSON at line 5, column 141 (in op 0): expected ':', got '}'");
  EXPECT_EQ(json_error_of(one_op_graph(std::string(kOpStart) +
                                       R"("workspace":01,"flops":0,"bytes":0,"time":null})")),
            "graph: invalid JSON at line 5, column 97 (in op 0): expected ',' or '}' after an "
            "object member");
  EXPECT_EQ(json_error_of(one_op_graph(std::string(kOpStart) +
                                       R"("workspace":0,"flops":-1,"bytes":0,"time":null})")),
            "graph: op 0 (\"f\"): \"flops\" must be a finite number >= 0, got -1");
  EXPECT_EQ(json_error_of(one_op_graph(std::string(kOpStart) +
                                       R"("workspace":0,"flops":1e999,"bytes":0,"time":null})")),
            "graph: op 0 (\"f\"): \"flops\" must be a finite number >= 0, got 1e999");
  EXPECT_EQ(json_error_of(one_op_graph(std::string(kOpStart) +
                                       R"("workspace":0,"flops":1.,"bytes":0,"time":null})")),
            "graph: invalid JSON at line 5, column 108 (in op 0): invalid number (a digit must "
            "follow '.')");
  EXPECT_EQ(
      json_error_of(one_op_graph(
          R"({"id":0,"name":"f","type":"relu","phase":"fwd","in":[0],"out":[1],"updates":[],)" +
          tail)),
      "graph: op 0 (\"f\"): unknown phase \"fwd\" (expected forward, backward, optimizer or "
      "comm)");
  EXPECT_EQ(
      json_error_of(one_op_graph(
          R"({"id":0,"name":"f","type":"relu","phase":"forward","in":[0,-1],"out":[1],"updates":[],)" +
          tail)),
      "graph: op 0 (\"f\"): \"in\" must be an array of buffer ids, got -1 in it");
  EXPECT_EQ(
      json_error_of(one_op_graph(
          R"({"id":0,"name":"f","type":"relu","phase":"forward","in":[2147483648],"out":[1],"updates":[],)" +
          tail)),
      "graph: op 0 (\"f\"): reads buffer 2147483648, which does not exist");
  EXPECT_EQ(json_error_of(one_op_graph(
                R"({"id":1,"name":"f","type":"relu","phase":"forward","in":[0],"out":[1],)"
                R"("updates":[],)" +
                tail)),
            "graph: op 0 (\"f\"): \"id\" is 1, expected 0 (ids are dense, 0-based and in order)");
}

}  // namespace
}  // namespace memwall
