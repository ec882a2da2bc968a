// Malformed graphs: every one is rejected with memwall::Error and a one-line
// message naming the problem and where it is.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph_builder.h"

namespace memwall {
namespace {

// A valid document: w (param), x (input), h (activation) and y (activation);
// op 0 "fc" reads w and x and creates h, op 1 "g" reads h and creates y.
const char* const kW = R"({"id":0,"name":"w","bytes":16,"kind":"param"})";
const char* const kX = R"({"id":1,"name":"x","bytes":8,"kind":"input"})";
const char* const kH = R"({"id":2,"name":"h","bytes":8,"kind":"activation"})";
const char* const kY = R"({"id":3,"name":"y","bytes":8,"kind":"activation"})";
const char* const kFc =
    R"({"id":0,"name":"fc","type":"matmul","phase":"forward","in":[0,1],"out":[2]})";
const char* const kG = R"({"id":1,"name":"g","type":"relu","phase":"forward","in":[2],"out":[3]})";

std::string doc(const std::string& buffers, const std::string& ops,
                const std::string& top = R"("format":"memwall.graph/1","name":"t","meta":{})") {
  return "{" + top + R"(,"buffers":[)" + buffers + R"(],"ops":[)" + ops + "]}";
}
std::string bufs(const std::string& extra = "") {
  return std::string(kW) + "," + kX + "," + kH + "," + kY + (extra.empty() ? "" : "," + extra);
}
std::string ops(const std::string& extra = "") {
  return std::string(kFc) + "," + kG + (extra.empty() ? "" : "," + extra);
}
std::string op(const std::string& id, const std::string& name, const std::string& in,
               const std::string& out, const std::string& more = "") {
  return R"({"id":)" + id + R"(,"name":")" + name + R"(","type":"t","phase":"forward","in":)" + in +
         R"(,"out":)" + out + more + "}";
}
std::string buffer(const std::string& id, const std::string& name, const std::string& bytes,
                   const std::string& kind, const std::string& more = "") {
  return R"({"id":)" + id + R"(,"name":")" + name + R"(","bytes":)" + bytes + R"(,"kind":")" +
         kind + "\"" + more + "}";
}

struct Case {
  std::string label;
  std::string text;
  std::string expected;  // a substring of the message
};

std::vector<Case> cases() {
  const std::string fmt_ok = R"("format":"memwall.graph/1","name":"t","meta":{})";
  std::string deep_meta;
  for (int i = 0; i < 300; ++i) deep_meta += "[";
  return {
      {"empty input", "", "graph: invalid JSON at line 1, column 1: unexpected end of input"},
      {"not JSON", "not json", "graph: invalid JSON at line 1, column 1: invalid literal"},
      {"garbage", "%PDF-1.4", "graph: invalid JSON at line 1, column 1: expected a value, got '%'"},
      {"top level array", "[1, 2]", "graph: the top level must be a JSON object, got an array"},
      {"truncated", R"({"format": "memwall.graph/1")",
       "expected ',' or '}' after an object member"},
      {"trailing content", doc(bufs(), ops()) + " x", "unexpected 'x' after the top-level object"},
      {"line and column", "{\n  \"format\": \"memwall.graph/1\",\n  \"name\" \"t\"}",
       "graph: invalid JSON at line 3, column 10: expected ':', got '\"'"},
      {"syntax error names the op", doc(bufs(), std::string(kFc) + R"(,{"id":1,,})"),
       "(in op 1): expected a string (an object key)"},
      {"wrong format", doc(bufs(), ops(), R"("format":"memwall.plan/1","name":"t","meta":{})"),
       "graph: unknown format \"memwall.plan/1\" (expected \"memwall.graph/1\")"},
      {"missing format", doc(bufs(), ops(), R"("name":"t","meta":{})"),
       "graph: missing field \"format\""},
      {"empty object", "{}", "graph: missing field \"format\""},
      {"missing ops", "{" + fmt_ok + R"(,"buffers":[]})", "graph: missing field \"ops\""},
      {"unknown top field", doc(bufs(), ops(), fmt_ok + R"(,"extra":1)"),
       "graph: unknown field \"extra\""},
      {"duplicate top field", doc(bufs(), ops(), fmt_ok + R"(,"name":"u")"),
       "graph: duplicate field \"name\""},
      {"name not a string", doc(bufs(), ops(), R"("format":"memwall.graph/1","name":3,"meta":{})"),
       "graph: \"name\" must be a string, got a number"},
      {"meta not an object",
       doc(bufs(), ops(), R"("format":"memwall.graph/1","name":"t","meta":[])"),
       "graph: \"meta\" must be an object, got an array"},
      {"meta too deep",
       doc(bufs(), ops(),
           R"("format":"memwall.graph/1","name":"t","meta":{"a":)" + deep_meta + "}"),
       "(in \"meta\"): nesting deeper than 256 levels"},
      {"buffers not an array", doc("", ops()).replace(doc("", ops()).find("[]"), 2, "{}"),
       "graph: \"buffers\" must be an array, got an object"},
      {"buffer not an object", doc("7", ""), "graph: buffer 0 must be an object, got a number"},
      {"negative bytes", doc(buffer("0", "w", "-1", "param"), ""),
       "graph: buffer 0 (\"w\"): \"bytes\" must be a non-negative integer, got -1"},
      {"fractional bytes", doc(buffer("0", "w", "3.5", "param"), ""),
       "graph: buffer 0 (\"w\"): \"bytes\" must be a non-negative integer, got 3.5"},
      {"1e30 bytes", doc(buffer("0", "w", "1e30", "param"), ""),
       "\"bytes\" must be a non-negative integer, got 1e30"},
      {"bytes above 2^62", doc(buffer("0", "w", "4611686018427387905", "param"), ""),
       "graph: buffer 0 (\"w\"): \"bytes\" is 4611686018427387905, above the limit of 2^62 bytes"},
      {"bytes above 2^64", doc(buffer("0", "w", "123456789012345678901234567890", "param"), ""),
       "\"bytes\" is 123456789012345678901234567890, above the limit of 2^62 bytes"},
      {"bytes as string", doc(buffer("0", "w", "\"16\"", "param"), ""),
       "\"bytes\" must be a non-negative integer, got a string"},
      {"bytes leading zero", doc(buffer("0", "w", "016", "param"), ""),
       "expected ',' or '}' after an object member"},
      {"unknown kind", doc(buffer("0", "h0.attn.q", "4", "weights"), ""),
       "graph: buffer 0 (\"h0.attn.q\"): unknown kind \"weights\""},
      {"unknown dtype", doc(buffer("0", "w", "4", "param", R"(,"dtype":"float32")"), ""),
       "graph: buffer 0 (\"w\"): unknown dtype \"float32\""},
      {"negative shape", doc(buffer("0", "w", "4", "param", R"(,"shape":[2,-1])"), ""),
       "\"shape\" must be an array of non-negative integers, got -1 in it"},
      {"shape of strings", doc(buffer("0", "w", "4", "param", R"(,"shape":["2"])"), ""),
       "\"shape\" must be an array of non-negative integers, got a string in it"},
      {"missing buffer name", doc(R"({"id":0,"bytes":4,"kind":"param"})", ""),
       "graph: buffer 0: missing field \"name\""},
      {"missing kind", doc(R"({"id":0,"name":"w","bytes":4})", ""),
       "graph: buffer 0 (\"w\"): missing field \"kind\""},
      {"duplicate buffer field", doc(buffer("0", "w", "4", "param", R"(,"bytes":5)"), ""),
       "graph: buffer 0 (\"w\"): duplicate field \"bytes\""},
      {"unknown buffer field", doc(buffer("0", "w", "4", "param", R"(,"size":5)"), ""),
       "graph: buffer 0 (\"w\"): unknown field \"size\""},
      {"buffer id gap",
       doc(std::string(kW) + "," + kX + "," + buffer("3", "h", "8", "activation"), kFc),
       "graph: buffer 2 (\"h\"): \"id\" is 3, expected 2 (ids are dense, 0-based and in order)"},
      {"op id out of order", doc(bufs(), std::string(kFc) + "," + op("2", "g", "[2]", "[3]")),
       "graph: op 1 (\"g\"): \"id\" is 2, expected 1"},
      {"unknown phase",
       doc(bufs(), R"({"id":0,"name":"h0.mlp.fc1","type":"t","phase":"fwd","in":[],"out":[2]})"),
       "graph: op 0 (\"h0.mlp.fc1\"): unknown phase \"fwd\""},
      {"missing out", doc(bufs(), R"({"id":0,"name":"fc","type":"t","phase":"forward","in":[]})"),
       "graph: op 0 (\"fc\"): missing field \"out\""},
      {"unknown op field", doc(bufs(), op("0", "fc", "[0]", "[2]", R"(,"inputs":[])") + "," + kG),
       "graph: op 0 (\"fc\"): unknown field \"inputs\""},
      {"in not an array", doc(bufs(), op("0", "fc", "0", "[2]")),
       "graph: op 0 (\"fc\"): \"in\" must be an array of buffer ids, got a number"},
      {"fractional id", doc(bufs(), op("0", "fc", "[1.5]", "[2]")),
       "\"in\" must be an array of buffer ids, got 1.5 in it"},
      {"negative id", doc(bufs(), op("0", "fc", "[-1]", "[2]")),
       "\"in\" must be an array of buffer ids, got -1 in it"},
      {"id beyond int32", doc(bufs(), op("0", "fc", "[3000000000]", "[2]")),
       "graph: op 0 (\"fc\"): reads buffer 3000000000, which does not exist"},
      {"dangling read", doc(bufs(), op("0", "h0.mlp.fc1", "[99]", "[2]") + "," + kG),
       "graph: op 0 (\"h0.mlp.fc1\") reads buffer 99, which does not exist"},
      {"dangling out", doc(bufs(), op("0", "fc", "[0]", "[2,99]") + "," + kG),
       "graph: op 0 (\"fc\") creates buffer 99, which does not exist"},
      {"dangling update", doc(bufs(), ops(op("2", "opt", "[]", "[]", R"(,"updates":[4])"))),
       "graph: op 2 (\"opt\") updates buffer 4, which does not exist"},
      {"read before produce",
       doc(bufs(), op("0", "fc", "[3]", "[2]") + "," + op("1", "g", "[2]", "[3]")),
       "graph: op 0 (\"fc\") reads buffer 3 (\"y\") before op 1 (\"g\") creates it"},
      {"update before produce",
       doc(bufs(), op("0", "fc", "[0]", "[2]", R"(,"updates":[3])") + "," + kG),
       "graph: op 0 (\"fc\") updates buffer 3 (\"y\") before op 1 (\"g\") creates it"},
      {"reads its own output", doc(bufs(), op("0", "fc", "[0,2]", "[2]") + "," + kG),
       "graph: op 0 (\"fc\") both creates and reads buffer 2 (\"h\")"},
      {"updates its own output",
       doc(bufs(), op("0", "fc", "[0]", "[2]", R"(,"updates":[2])") + "," + kG),
       "graph: op 0 (\"fc\") both creates and updates buffer 2 (\"h\")"},
      {"two producers", doc(bufs(), ops(op("2", "again", "[0]", "[2]"))),
       "graph: buffer 2 (\"h\") is created by two ops: op 0 (\"fc\") and op 2 (\"again\")"},
      {"duplicate out", doc(bufs(), op("0", "fc", "[0]", "[2,2]") + "," + kG),
       "graph: op 0 (\"fc\") lists buffer 2 (\"h\") twice in \"out\""},
      {"produced param", doc(bufs(), ops(op("2", "init", "[]", "[0]"))),
       "graph: op 2 (\"init\") creates buffer 0 (\"w\"), but param buffers exist before the "
       "first op"},
      {"produced input", doc(bufs(), ops(op("2", "load", "[]", "[1]"))),
       "creates buffer 1 (\"x\"), but input buffers exist"},
      {"unproduced activation", doc(bufs(buffer("4", "lost", "8", "activation")), ops()),
       "graph: buffer 4 (\"lost\") of kind activation is never created by an op"},
      {"unproduced grad is read",
       doc(bufs(buffer("4", "g", "8", "grad")), ops(op("2", "use", "[4]", "[]"))),
       "graph: op 2 (\"use\") reads buffer 4 (\"g\"), which no op creates"},
      {"time as string", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"time":"1ms")"))),
       "graph: op 2 (\"t\"): \"time\" must be a finite number >= 0, got a string"},
      {"call as number", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"call":3)"))),
       "graph: op 2 (\"t\"): \"call\" must be an object, got a number"},
      {"call as array", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"call":[{"op":"x"}])"))),
       "graph: op 2 (\"t\"): \"call\" must be an object, got an array"},
      {"call as string", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"call":"{}")"))),
       "graph: op 2 (\"t\"): \"call\" must be an object, got a string"},
      {"call null", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"call":null)"))),
       "graph: op 2 (\"t\"): \"call\" must be an object, got null"},
      {"call malformed", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"call":{"op":})"))),
       "(in op 2): expected a value, got '}'"},
      {"negative time", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"time":-0.5)"))),
       "\"time\" must be a finite number >= 0, got -0.5"},
      {"flops as string NaN", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"flops":"NaN")"))),
       "graph: op 2 (\"t\"): \"flops\" must be a finite number >= 0, got a string"},
      {"flops NaN literal", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"flops":NaN)"))),
       "(in op 2): expected a value, got 'N'"},
      {"flops Infinity literal", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"flops":Infinity)"))),
       "(in op 2): expected a value, got 'I'"},
      {"flops overflow", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"flops":1e400)"))),
       "\"flops\" must be a finite number >= 0, got 1e400"},
      {"negative op bytes", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"bytes":-1)"))),
       "\"bytes\" must be a finite number >= 0, got -1"},
      {"fractional workspace", doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"workspace":1.5)"))),
       "graph: op 2 (\"t\"): \"workspace\" must be a non-negative integer, got 1.5"},
      {"workspace above 2^62",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"workspace":9223372036854775807)"))),
       "\"workspace\" is 9223372036854775807, above the limit of 2^62 bytes"},
      {"workspace span below the workspace",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"workspace":100,"workspace_span":99)"))),
       "graph: op 2 (\"t\"): \"workspace_span\" is 99, below its workspace of 100 bytes"},
      {"scratch_first not one count per output",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"scratch_first":[1])"))),
       "graph: op 2 (\"t\"): \"scratch_first\" has 1 counts for 0 outputs"},
      {"scratch_first not counts",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"scratch_first":{})"))),
       "\"scratch_first\" must be an array of non-negative integers, got an object"},
      {"scratch_at not pairs",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"workspace":8,"scratch_at":[8])"))),
       "graph: op 2 (\"t\"): \"scratch_at\" holds 1 numbers, not (bytes, offset) pairs"},
      {"scratch_at past the span",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"workspace":8,"scratch_at":[8,1])"))),
       "graph: op 2 (\"t\"): \"scratch_at\" puts 8 bytes at 1, past its workspace span of 8"},
      {"fractional workspace span",
       doc(bufs(), ops(op("2", "t", "[]", "[]", R"(,"workspace_span":2.5)"))),
       "graph: op 2 (\"t\"): \"workspace_span\" must be a non-negative integer, got 2.5"},
      {"workspace span beside the buffers above 2^62",
       doc(buffer("0", "a", "4611686018427387000", "param"),
           op("0", "t", "[]", "[]", R"(,"workspace":10,"workspace_span":1000)")),
       "graph: op 0 (\"t\"): its workspace span of 1000 bytes and the graph's "
       "4611686018427387000 bytes of buffers exceed 2^62 bytes together"},
      {"workspace beside the buffers above 2^62",
       doc(buffer("0", "a", "4611686018427387000", "param"),
           op("0", "t", "[]", "[]", R"(,"workspace":1000)")),
       "graph: op 0 (\"t\"): its workspace of 1000 bytes and the graph's 4611686018427387000 "
       "bytes of buffers exceed 2^62 bytes together"},
      {"total bytes overflow",
       doc(buffer("0", "a", "4611686018427387904", "param") + "," +
               buffer("1", "b", "4611686018427387904", "param"),
           ""),
       "graph: buffer 1 (\"b\"): with its 4611686018427387904 bytes, the buffers up to it hold "
       "more than 2^62 bytes"},
      {"invalid UTF-8", doc(buffer("0", "w\xff", "4", "param"), ""), "invalid UTF-8 in a string"},
      {"overlong UTF-8", doc(buffer("0", "w\xC0\xAF", "4", "param"), ""),
       "invalid UTF-8 in a string"},
      {"lone surrogate", doc(buffer("0", "w\\udc00", "4", "param"), ""),
       "unpaired UTF-16 surrogate"},
      {"bad escape", doc(buffer("0", "w\\x41", "4", "param"), ""), "invalid escape in a string"},
      {"raw control character", doc(buffer("0", "w\n", "4", "param"), ""),
       "control character in a string"},
      {"unterminated string", R"({"format":"memwall.graph/1","name":"t)", "unterminated string"},
      {"name with a newline stays one line",
       doc(R"({"id":0,"name":"a\nb","bytes":4,"kind":"weights"})", ""),
       "graph: buffer 0 (\"a\\nb\"): unknown kind"},
  };
}

TEST(JsonErrors, EachMalformedInputIsRejectedWithItsMessage) {
  const std::vector<Case> all = cases();
  EXPECT_GE(all.size(), 25u);
  // The base document is valid: each failure comes from its own change.
  EXPECT_NO_THROW(graph_from_json_text(doc(bufs(), ops())));
  for (const Case& c : all) {
    SCOPED_TRACE(c.label);
    try {
      graph_from_json_text(c.text);
      ADD_FAILURE() << "accepted: " << c.text.substr(0, 300);
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(c.expected), std::string::npos)
          << "message:  " << message << "\nexpected: " << c.expected;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_EQ(message.rfind("graph: ", 0), 0u) << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }
}

TEST(JsonErrors, LongNamesAreShortenedInMessages) {
  const std::string name(500, 'n');
  try {
    graph_from_json_text(doc(buffer("0", name, "4", "weights"), ""));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 250u) << e.what();
  }
}

TEST(Validate, InMemoryGraphs) {
  const auto expect_error = [](const Graph& graph, const std::string& expected) {
    try {
      validate(graph);
      ADD_FAILURE() << "accepted, expected " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(validate(testing::two_layer_step()));
  Graph g = testing::two_layer_step();
  g.buffers[2].id = 7;
  expect_error(g, "graph: buffer at position 2 (\"a1\") has id 7");
  g = testing::two_layer_step();
  g.ops[1].id = 0;
  expect_error(g, "graph: op at position 1 (\"fc2\") has id 0");
  g = testing::two_layer_step();
  g.ops[1].flops = std::numeric_limits<double>::quiet_NaN();
  expect_error(g, "graph: op 1 (\"fc2\"): \"flops\" must be a finite number >= 0");
  g = testing::two_layer_step();
  g.ops[1].time = std::numeric_limits<double>::infinity();
  expect_error(g, "\"time\" must be a finite number >= 0");
  g = testing::two_layer_step();
  g.buffers[3].bytes = kMaxBytes + 1;
  expect_error(g, "graph: buffer 3 (\"a2\"): \"bytes\" is 4611686018427387905");
  g = testing::two_layer_step();
  g.ops[0].workspace = ~uint64_t{0};
  expect_error(g, "\"workspace\" is 18446744073709551615, above the limit");
  g = testing::two_layer_step();
  g.ops[2].in.push_back(-3);
  expect_error(g, "graph: op 2 (\"fc2.bwd\") reads buffer -3, which does not exist");
}

}  // namespace
}  // namespace memwall
