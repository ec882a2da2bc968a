// Large graphs are read by two threads (json_io.cc, Note [Speculative
// parallel parse]): results and errors must be those of a sequential read,
// whatever the layout of the text and wherever the guess lands.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "graph_builder.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

constexpr int kOps = 6000;  // ~1 MB of text, above the threshold for threads

// A chain: op i reads activation i (buffer i, buffer 0 is the input) and
// creates activation i + 1. `name(i)` names op i.
template <typename Name>
Graph chain(Name name) {
  Graph graph;
  graph.name = "chain";
  graph.meta = nlohmann::json::object();
  for (int b = 0; b <= kOps; ++b) {
    Buffer& buffer = graph.buffers.emplace_back();
    buffer.id = b;
    buffer.name = fmt::format("a{}", b);
    buffer.bytes = 64;
    buffer.kind = b == 0 ? BufferKind::kInput : BufferKind::kActivation;
    buffer.shape = {16};
  }
  for (int i = 0; i < kOps; ++i) {
    Op& op = graph.ops.emplace_back();
    op.id = i;
    op.name = name(i);
    op.type = "relu";
    op.in = {i};
    op.out = {i + 1};
    op.flops = 1.5e9;
    op.bytes = 0.25 * i;
  }
  return graph;
}
Graph chain() {
  return chain([](int i) { return fmt::format("op{}", i); });
}

using testing::json_error_of;

// Replaces the first occurrence of `from` at or after `at`.
std::string replaced(std::string text, const std::string& from, const std::string& to,
                     size_t at = 0) {
  const size_t pos = text.find(from, at);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

// The text of op i as the writer puts it (one op per line).
size_t op_offset(const std::string& text, int i) {
  return text.find(fmt::format("{{\"id\":{},\"name\"", i), text.find("\"ops\":"));
}

TEST(JsonParallel, SameGraphAsWritten) {
  const std::string text = graph_to_json_text(chain());
  ASSERT_GT(text.size(), size_t{512} << 10);
  const Graph graph = graph_from_json_text(text);
  ASSERT_EQ(graph.ops.size(), size_t{kOps});
  EXPECT_EQ(graph.ops[kOps - 1].name, fmt::format("op{}", kOps - 1));
  EXPECT_EQ(graph_to_json_text(graph), text);
}

TEST(JsonParallel, OpsKeyInMetaBeforeTheRealOne) {
  // A meta as large as the rest, full of `"ops"` keys and `,{"id":K`
  // objects, so that the guess lands in it.
  std::string meta = R"({"ops":[{"id":0})";
  for (int i = 1; i < 10 * kOps; ++i) meta += fmt::format(R"(,{{"id":{},"ops":[]}})", i);
  meta += "]}";
  Graph graph = chain();
  graph.meta = nlohmann::json::parse(meta);
  const std::string text = graph_to_json_text(graph);
  ASSERT_LT(text.find("\"ops\""), text.find("\"buffers\""));
  EXPECT_EQ(graph_to_json_text(graph_from_json_text(text)), text);
}

TEST(JsonParallel, OpsBeforeBuffers) {
  const std::string text = graph_to_json_text(chain());
  const size_t buffers = text.find("\"buffers\":");
  const size_t ops = text.find("\"ops\":");
  const size_t end = text.rfind(']') + 1;
  // {..., "ops": [...], "buffers": [...]}
  const std::string swapped = text.substr(0, buffers) + text.substr(ops, end - ops) + ",\n" +
                              text.substr(buffers, ops - buffers - 2) + text.substr(end);
  EXPECT_EQ(graph_to_json_text(graph_from_json_text(swapped)), text);
  // An error in the second half of "ops" still comes before the buffers'.
  const std::string bad =
      replaced(replaced(swapped, "\"relu\"", "7", op_offset(swapped, kOps - 10)), "\"bytes\":64",
               "\"bytes\":-1", swapped.find("\"buffers\":"));
  EXPECT_EQ(json_error_of(bad),
            fmt::format("graph: op {} (\"op{}\"): \"type\" must be a string, got a number",
                        kOps - 10, kOps - 10));
}

TEST(JsonParallel, StringsContainingKeysAndObjects) {
  const std::string text = graph_to_json_text(
      chain([](int i) { return fmt::format(R"(",{{"id":{},"ops":[{{"id":{}}})", i + 1, i); }));
  const Graph graph = graph_from_json_text(text);
  EXPECT_EQ(graph.ops[kOps / 2].name,
            fmt::format(R"(",{{"id":{},"ops":[{{"id":{}}})", kOps / 2 + 1, kOps / 2));
  EXPECT_EQ(graph_to_json_text(graph), text);
}

TEST(JsonParallel, CallsContainingObjectsWithIds) {
  // Every op's "call" holds `,{"id":K` objects, some with multi-line
  // layout: wherever the guess lands, the graph read is the one written.
  Graph graph = chain();
  for (int i = 0; i < kOps; ++i) {
    graph.ops[i].call = i % 3 == 0 ? fmt::format("{{\"args\":[0,{{\"id\":{}}}]}}", i + 1)
                                   : fmt::format("{{\n \"args\": [0,\n{{\"id\":{}}}]}}", i);
  }
  const std::string text = graph_to_json_text(graph);
  const Graph back = graph_from_json_text(text);
  for (int i = 0; i < kOps; ++i) ASSERT_EQ(back.ops[i].call, graph.ops[i].call) << i;
  EXPECT_EQ(graph_to_json_text(back), text);
}

TEST(JsonParallel, ErrorsInEitherHalf) {
  const std::string text = graph_to_json_text(chain());
  // The op where the second thread starts (json_io.cc guesses at 45%).
  const size_t guess = text.find(",\n{\"id\":", text.size() / 20 * 9);
  const int first = std::stoi(text.substr(guess + 8, 10));
  for (const int i : {1, first - 1, first, first + 1, kOps / 2, kOps - 1}) {
    SCOPED_TRACE(i);
    const size_t at = op_offset(text, i);
    EXPECT_EQ(json_error_of(replaced(text, "\"phase\":\"forward\"", "\"phase\":\"sideways\"", at)),
              fmt::format("graph: op {} (\"op{}\"): unknown phase \"sideways\" (expected "
                          "forward, backward, optimizer or comm)",
                          i, i));
    // Syntax errors: line and column count from the start of the text.
    const std::string broken = replaced(text, "\"type\":", "\"type\" ", at);
    const size_t pos = broken.find("\"type\" ", at) + 7;
    const size_t line =
        static_cast<size_t>(
            std::count(broken.begin(), broken.begin() + static_cast<std::ptrdiff_t>(pos), '\n')) +
        1;
    const size_t column = pos - broken.rfind('\n', pos);
    EXPECT_EQ(json_error_of(broken),
              fmt::format("graph: invalid JSON at line {}, column {} (in op {}): expected ':', got "
                          "'\"'",
                          line, column, i));
    // An id out of order where the second thread may start.
    EXPECT_EQ(json_error_of(replaced(text, fmt::format("{{\"id\":{},", i), "{\"id\":4,", at - 1)),
              fmt::format("graph: op {} (\"op{}\"): \"id\" is 4, expected {} (ids are dense, "
                          "0-based and in order)",
                          i, i, i));
  }
}

TEST(JsonParallel, FirstErrorInTheTextWins) {
  const std::string text = graph_to_json_text(chain());
  const std::string bad_op = replaced(text, "\"in\":[", "\"in\":[-", op_offset(text, kOps * 3 / 4));
  const std::string op_message =
      fmt::format("graph: op {} (\"op{}\"): \"in\" must be an array of buffer ids, got -{} in it",
                  kOps * 3 / 4, kOps * 3 / 4, kOps * 3 / 4);
  EXPECT_EQ(json_error_of(bad_op), op_message);
  // Buffers come first in the text: their error is the one reported.
  EXPECT_EQ(json_error_of(replaced(bad_op, "\"kind\":\"activation\"", "\"kind\":\"weights\"")),
            "graph: buffer 1 (\"a1\"): unknown kind \"weights\" (expected param, grad, "
            "optim_state, activation, input, workspace or temp)");
  // So does an earlier op's, and a syntax error in meta.
  EXPECT_EQ(json_error_of(replaced(bad_op, "\"type\":\"relu\"", "\"type\":1", op_offset(text, 2))),
            "graph: op 2 (\"op2\"): \"type\" must be a string, got a number");
  const std::string meta_message = "graph: invalid JSON at line 3,";
  EXPECT_EQ(
      json_error_of(replaced(bad_op, "\"meta\": {", "\"meta\": {,")).substr(0, meta_message.size()),
      meta_message);
  // A later problem noted on the top-level object is reported after.
  EXPECT_EQ(json_error_of(replaced(bad_op, ",\n\"buffers\"", ", \"extra\": 1,\n\"buffers\"")),
            op_message);
}

}  // namespace
}  // namespace memwall
