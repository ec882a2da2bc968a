// JSON I/O: round trips, defaults, files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "graph_builder.h"

namespace memwall {
namespace {

namespace fs = std::filesystem;

// The two-layer step with every field set to something non-default.
Graph rich_graph() {
  Graph graph = testing::two_layer_step();
  graph.name = "two \"layer\" step\n\u00e9";
  graph.meta = {{"model", "toy"}, {"batch", 8}, {"nested", {{"a", {1, 2.5, nullptr, true}}}}};
  graph.buffers[0].dtype = DType::kBF16;
  graph.buffers[0].shape = {10, 5};
  graph.buffers[2].dtype = DType::kBool;
  graph.buffers[2].name = "tab\there \\ and \x01 control";
  graph.ops[0].flops = 1.2e10;
  graph.ops[0].bytes = 0.1;
  graph.ops[1].time = 3.5e-6;
  graph.ops[2].time = 0.0;
  graph.ops[3].flops = 12345678901234567.0;
  graph.ops[4].type = "adam";
  return graph;
}

fs::path temp_dir() {
  const fs::path dir =
      fs::temp_directory_path() /
      ("memwall_graph_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Json, TextRoundTripIsIdentical) {
  const Graph graph = rich_graph();
  const std::string text = graph_to_json_text(graph);
  const Graph back = graph_from_json_text(text);
  EXPECT_EQ(graph_to_json_text(back), text);
  EXPECT_EQ(graph_to_json(back), graph_to_json(graph));
  EXPECT_EQ(back.name, graph.name);
  // The writer adds the content's fingerprint to meta (Note [Graph fingerprint]).
  nlohmann::json meta = back.meta;
  EXPECT_EQ(meta.at("fingerprint"), graph_fingerprint(graph));
  meta.erase("fingerprint");
  EXPECT_EQ(meta, graph.meta);
  EXPECT_EQ(back.buffers[0].dtype, DType::kBF16);
  EXPECT_EQ(back.buffers[0].shape, (std::vector<int64_t>{10, 5}));
  EXPECT_EQ(back.buffers[2].name, graph.buffers[2].name);
  EXPECT_EQ(back.ops[0].flops, 1.2e10);
  EXPECT_EQ(back.ops[0].bytes, 0.1);
  EXPECT_EQ(back.ops[1].time, 3.5e-6);
  EXPECT_EQ(back.ops[2].time, 0.0);
  EXPECT_EQ(back.ops[3].time, std::nullopt);
  EXPECT_EQ(back.ops[3].flops, 12345678901234567.0);
  EXPECT_EQ(back.ops[4].updates, (std::vector<BufferId>{0, 6}));
  EXPECT_EQ(back.ops[0].workspace, 5u);
}

TEST(Json, DomMatchesText) {
  const Graph graph = rich_graph();
  const nlohmann::json json = graph_to_json(graph);
  EXPECT_EQ(json, nlohmann::json::parse(graph_to_json_text(graph)));
  EXPECT_EQ(json["format"], "memwall.graph/1");
  EXPECT_EQ(json["buffers"][0]["kind"], "param");
  EXPECT_TRUE(json["ops"][0]["time"].is_null());
  const Graph back = graph_from_json(json);
  EXPECT_EQ(graph_to_json(back), json);
}

TEST(Json, DomReaderReportsLikeTextReader) {
  nlohmann::json json = graph_to_json(testing::two_layer_step());
  json["buffers"][3]["kind"] = "weights";
  try {
    graph_from_json(json);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph: buffer 3 (\"a2\"): unknown kind \"weights\""),
              std::string::npos)
        << e.what();
  }
  json = graph_to_json(testing::two_layer_step());
  json["ops"][0]["flops"] = std::numeric_limits<double>::quiet_NaN();  // dumps as null
  EXPECT_THROW(graph_from_json(json), Error);
  json["ops"][0]["flops"] = "\xff";  // invalid UTF-8 cannot even be dumped
  EXPECT_THROW(graph_from_json(json), Error);
}

TEST(Json, OptionalFieldsTakeDefaults) {
  const Graph graph = graph_from_json_text(R"({
    "format": "memwall.graph/1", "name": "min", "meta": {"k": [1, {"x": null}]},
    "buffers": [{"id": 0, "name": "x", "bytes": 8, "kind": "input"},
                {"id": 1, "name": "y", "bytes": 8, "kind": "activation"}],
    "ops": [{"id": 0, "name": "f", "type": "relu", "phase": "forward", "in": [0], "out": [1]}]
  })");
  ASSERT_EQ(graph.buffers.size(), 2u);
  EXPECT_EQ(graph.buffers[0].dtype, DType::kF32);
  EXPECT_TRUE(graph.buffers[0].shape.empty());
  const Op& op = graph.ops.at(0);
  EXPECT_TRUE(op.updates.empty());
  EXPECT_EQ(op.workspace, 0u);
  EXPECT_EQ(op.flops, 0.0);
  EXPECT_EQ(op.bytes, 0.0);
  EXPECT_EQ(op.time, std::nullopt);
  EXPECT_TRUE(op.call.empty());
  EXPECT_EQ(graph.meta["k"][1]["x"], nullptr);
}

TEST(Json, AcceptsJsonSyntaxVariants) {
  // Escapes, a byte order mark, exponents and integers for doubles, any key order.
  const Graph graph = graph_from_json_text(
      "\xEF\xBB\xBF {\"ops\":[{\"time\":1E-3,\"flops\":2e3,\"bytes\":7,\"out\":[0],\"in\":[],"
      "\"phase\":\"forward\",\"type\":\"t\",\"name\":\"\\u00e9\\ud83d\\ude00\\/\",\"id\":0}],"
      "\"buffers\":[{\"kind\":\"temp\",\"bytes\":0,\"name\":\"\",\"id\":0,\"shape\":[0,1]}],"
      "\"meta\":{},\"name\":\"n\",\"format\":\"memwall.graph/1\"}\n\t ");
  EXPECT_EQ(graph.ops[0].name, "\u00e9\U0001F600/");
  EXPECT_EQ(graph.ops[0].time, 1e-3);
  EXPECT_EQ(graph.ops[0].flops, 2000.0);
  EXPECT_EQ(graph.ops[0].bytes, 7.0);
  // Tiny numbers round to zero, like strtod.
  const Graph tiny = graph_from_json_text(
      R"({"format":"memwall.graph/1","name":"n","meta":{},"buffers":[],)"
      R"("ops":[{"id":0,"name":"a","type":"t","phase":"comm","in":[],"out":[],"flops":1e-400}]})");
  EXPECT_EQ(tiny.ops[0].flops, 0.0);
}

// Ops' "call" objects (issue 22) are kept as written: the graph library
// stores them, the executor reads them (docs/exec.md).
TEST(Json, CallsRoundTripAsWritten) {
  Graph graph = testing::two_layer_step();
  const std::string addmm =
      R"({"op":"aten::addmm","args":[{"buf":1,"view":[[10],[1],0]},{"buf":0}],)"
      R"("kwargs":{"alpha":1.5,"beta":null},"note":"\u00e9 \"quoted\" {not a brace}"})";
  graph.ops[0].call = addmm;
  graph.ops[4].call = "{}";
  const std::string text = graph_to_json_text(graph);
  EXPECT_NE(text.find(R"("time":null,"call":)" + addmm + "}"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("time":null,"call":{}})"), std::string::npos) << text;
  const Graph back = graph_from_json_text(text);
  EXPECT_EQ(back.ops[0].call, addmm);
  EXPECT_EQ(back.ops[1].call, "");
  EXPECT_EQ(back.ops[4].call, "{}");
  EXPECT_EQ(graph_to_json_text(back), text);
  // The DOM holds the object itself, and reads back to the same graph.
  const nlohmann::json json = graph_to_json(graph);
  EXPECT_EQ(json["ops"][0]["call"], nlohmann::json::parse(addmm));
  EXPECT_FALSE(json["ops"][1].contains("call"));
  EXPECT_EQ(nlohmann::json::parse(graph_from_json(json).ops[0].call), nlohmann::json::parse(addmm));
  // Opaque to everything else: validation and the fingerprint ignore it.
  EXPECT_EQ(graph_fingerprint(back), graph_fingerprint(testing::two_layer_step()));
}

TEST(Json, PrettyPrintedCallsAreKeptAsWritten) {
  const std::string call =
      "{\n        \"op\": \"aten::relu\",\n        \"args\": [ {\"buf\": 0} ]\n"
      "      }";
  const std::string text = R"({
    "format": "memwall.graph/1", "name": "pretty", "meta": {},
    "buffers": [{"id": 0, "name": "x", "bytes": 8, "kind": "input"},
                {"id": 1, "name": "y", "bytes": 8, "kind": "activation"}],
    "ops": [{"id": 0, "name": "f", "type": "relu", "phase": "forward", "in": [0], "out": [1],
      "call": )" + call + R"(,
      "time": null}]
  })";
  const Graph graph = graph_from_json_text(text);
  EXPECT_EQ(graph.ops[0].call, call);
  // Written after "time", as it was read, and read back the same.
  const std::string written = graph_to_json_text(graph);
  EXPECT_NE(written.find(R"("time":null,"call":)" + call + "}"), std::string::npos) << written;
  const Graph back = graph_from_json_text(written);
  EXPECT_EQ(back.ops[0].call, call);
  EXPECT_EQ(graph_to_json_text(back), written);
}

// A graph without calls is written byte for byte as before calls existed:
// kWrittenBeforeCalls is what the writer of commit 3758fbb made of it.
constexpr const char* kWrittenBeforeCalls = R"({"format": "memwall.graph/1",
"name": "two \"layer\" step\u000a",
"meta": {"batch":8,"fingerprint":"07069667ed023ea2","model":"toy"},
"buffers": [
{"id":0,"name":"w","bytes":100,"kind":"param","dtype":"bf16","shape":[10,5]},
{"id":1,"name":"x","bytes":10,"kind":"input","dtype":"fp32","shape":[]},
{"id":2,"name":"tab\u0009here","bytes":20,"kind":"activation","dtype":"fp32","shape":[],"eager_free":3},
{"id":3,"name":"a2","bytes":40,"kind":"activation","dtype":"fp32","shape":[],"version_of":2},
{"id":4,"name":"w.grad","bytes":100,"kind":"grad","dtype":"fp32","shape":[],"eager_free":null},
{"id":5,"name":"a1.grad","bytes":30,"kind":"grad","dtype":"fp32","shape":[]},
{"id":6,"name":"w.m","bytes":200,"kind":"optim_state","dtype":"fp32","shape":[]}
],
"ops": [
{"id":0,"name":"fc1","type":"test","phase":"forward","in":[1,0],"out":[2],"updates":[],"workspace":5,"flops":1.2e+10,"bytes":0.1,"time":null},
{"id":1,"name":"fc2","type":"test","phase":"forward","in":[2,0],"out":[3],"updates":[],"workspace":0,"flops":0,"bytes":0,"time":3.5e-06},
{"id":2,"name":"fc2.bwd","type":"test","phase":"backward","in":[3],"out":[5],"updates":[],"workspace":0,"flops":0,"bytes":0,"time":null},
{"id":3,"name":"fc1.bwd","type":"test","phase":"backward","in":[5,2,1],"out":[4],"updates":[],"workspace":7,"flops":0,"bytes":0,"time":null},
{"id":4,"name":"adam","type":"adam","phase":"optimizer","in":[4],"out":[],"updates":[0,6],"workspace":0,"flops":0,"bytes":0,"time":null}
]}
)";

TEST(Json, GraphsWithoutCallsWriteAsBefore) {
  Graph graph = testing::two_layer_step();
  graph.name = "two \"layer\" step\n";
  graph.meta = {{"model", "toy"}, {"batch", 8}};
  graph.buffers[0].dtype = DType::kBF16;
  graph.buffers[0].shape = {10, 5};
  graph.buffers[2].name = "tab\there";
  graph.buffers[2].eager_free = 3;
  graph.buffers[3].version_of = 2;
  graph.buffers[4].eager_free = kNoOp;
  graph.ops[0].flops = 1.2e10;
  graph.ops[0].bytes = 0.1;
  graph.ops[1].time = 3.5e-6;
  graph.ops[4].type = "adam";
  const std::string text = graph_to_json_text(graph);
  EXPECT_EQ(text, kWrittenBeforeCalls);
  EXPECT_EQ(text.find("call"), std::string::npos);
}

// Note [Workspace span]: written only where it says more than the
// workspace, right after it; read back by both readers.
TEST(Json, WorkspaceSpanRoundTrips) {
  Graph graph = testing::two_layer_step();
  graph.ops[3].workspace_span = 19;  // workspace 7
  graph.ops[0].workspace_span = 5;   // workspace 5: nothing more to say
  const std::string text = graph_to_json_text(graph);
  EXPECT_NE(text.find(R"("workspace":7,"workspace_span":19,"flops")"), std::string::npos) << text;
  EXPECT_EQ(text.find("workspace_span"), text.rfind("workspace_span"));  // op 3's only
  const Graph back = graph_from_json_text(text);
  EXPECT_EQ(back.ops[3].workspace_span, 19u);
  EXPECT_EQ(contiguous_workspace(back.ops[3]), 19u);
  EXPECT_EQ(back.ops[0].workspace_span, 0u);
  EXPECT_EQ(contiguous_workspace(back.ops[0]), 5u);
  EXPECT_EQ(graph_from_json(nlohmann::json::parse(text)).ops[3].workspace_span, 19u);
  // In any field order (the general reader).
  nlohmann::json reordered = nlohmann::json::parse(text);
  nlohmann::json op = reordered["ops"][3];
  reordered["ops"][3] = {
      {"workspace_span", 21}, {"id", 3},        {"name", op["name"]}, {"type", op["type"]},
      {"phase", op["phase"]}, {"in", op["in"]}, {"out", op["out"]},   {"workspace", 7}};
  EXPECT_EQ(graph_from_json_text(reordered.dump()).ops[3].workspace_span, 21u);
}

// Note [Scratch before its output] and Note [Scratch offsets]
// (src/exec): what the tracer's scratch rules say of a kernel's
// allocations, written right after the span, read back by both readers.
TEST(Json, ScratchOrderRoundTrips) {
  Graph graph = testing::two_layer_step();
  graph.ops[3].workspace_span = 19;  // workspace 7; op 3 makes w.grad
  graph.ops[3].scratch_first = {2};
  graph.ops[3].scratch_at = {12, 0, 7, 12};
  const std::string text = graph_to_json_text(graph);
  EXPECT_NE(text.find(R"("workspace_span":19,"scratch_first":[2],"scratch_at":[12,0,7,12],)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("scratch_first"), text.rfind("scratch_first"));  // op 3's only
  const Graph back = graph_from_json_text(text);
  EXPECT_EQ(back.ops[3].scratch_first, std::vector<uint32_t>{2});
  EXPECT_EQ(back.ops[3].scratch_at, (std::vector<uint64_t>{12, 0, 7, 12}));
  EXPECT_TRUE(back.ops[0].scratch_first.empty());
  nlohmann::json reordered = nlohmann::json::parse(text);
  nlohmann::json op = reordered["ops"][3];
  reordered["ops"][3] = {{"scratch_at", {19, 0}}, {"scratch_first", {1}}, {"id", 3},
                         {"name", op["name"]},    {"type", op["type"]},   {"phase", op["phase"]},
                         {"in", op["in"]},        {"out", op["out"]},     {"workspace", 7},
                         {"workspace_span", 19}};
  const Graph general = graph_from_json_text(reordered.dump());
  EXPECT_EQ(general.ops[3].scratch_first, std::vector<uint32_t>{1});
  EXPECT_EQ(general.ops[3].scratch_at, (std::vector<uint64_t>{19, 0}));
}

TEST(Json, FileRoundTripIsAtomic) {
  const fs::path dir = temp_dir();
  const std::string path = (dir / "g.json").string();
  const Graph graph = rich_graph();
  write_graph_file(graph, path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const Graph back = read_graph_file(path);
  EXPECT_EQ(graph_to_json(back), graph_to_json(graph));
  // A failed write (graph not representable) leaves the old file untouched.
  Graph bad = graph;
  bad.ops[0].flops = std::numeric_limits<double>::infinity();
  EXPECT_THROW(write_graph_file(bad, path), Error);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(graph_to_json(read_graph_file(path)), graph_to_json(graph));
  fs::remove_all(dir);
}

TEST(Json, FileErrorsNameThePath) {
  const fs::path dir = temp_dir();
  const std::string missing = (dir / "missing.json").string();
  try {
    read_graph_file(missing);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing + ": cannot open"), std::string::npos) << e.what();
  }
  const std::string broken = (dir / "broken.json").string();
  std::ofstream(broken) << R"({"format": "memwall.graph/1", "name": 3})";
  try {
    read_graph_file(broken);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), broken + ": graph: \"name\" must be a string, got a number");
  }
  EXPECT_THROW(read_graph_file(dir.string()), Error);  // a directory
  EXPECT_THROW(write_graph_file(rich_graph(), (dir / "no" / "such" / "g.json").string()), Error);
  fs::remove_all(dir);
}

TEST(Json, WriterRejectsWhatJsonCannotHold) {
  Graph graph = testing::two_layer_step();
  graph.buffers[1].name = "bad \xC0\x80 utf8";
  EXPECT_THROW(graph_to_json_text(graph), Error);
  graph = testing::two_layer_step();
  graph.ops[2].time = std::numeric_limits<double>::quiet_NaN();
  try {
    graph_to_json_text(graph);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "graph: op 2: \"time\" is not finite");
  }
  // A call the reader would not take back: not one JSON object.
  for (const char* call :
       {"3", "[]", "{\"a\":1} ", "{\"a\":}", "{\"a\":1}{}", "{\"a\":\"\xff\"}"}) {
    SCOPED_TRACE(call);
    graph = testing::two_layer_step();
    graph.ops[1].call = call;
    EXPECT_THROW(graph_to_json_text(graph), Error);
  }
  graph.ops[1].call = "{\"a\":}";
  try {
    graph_to_json_text(graph);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "graph: op 1: \"call\": invalid JSON at line 1, column 6: expected a value, got '}'");
  }
  graph.ops[1].call = "3";
  try {
    graph_to_json_text(graph);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "graph: op 1: \"call\" is not a JSON object");
  }
}

}  // namespace
}  // namespace memwall
