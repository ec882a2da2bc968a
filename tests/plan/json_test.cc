// Plan JSON I/O: round trips, the exact text written, DESIGN.md's example,
// files, and what the writer refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "memwall/base/error.h"
#include "memwall/plan/plan.h"

namespace memwall {
namespace {

namespace fs = std::filesystem;

void expect_same(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.graph, b.graph);
  EXPECT_EQ(a.graph_fingerprint, b.graph_fingerprint);
  EXPECT_EQ(a.hardware, b.hardware);
  EXPECT_EQ(a.budget, b.budget);
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.stay_offsets, b.stay_offsets);
  EXPECT_EQ(a.workspace_offsets, b.workspace_offsets);
  EXPECT_EQ(a.host_reserved, b.host_reserved);
}

// Every feature of the format: each step kind, "on": "host", both swap_out
// destinations, every placement tier, offsets, names that need escaping, the
// largest budget and ids.
Plan rich_plan() {
  Plan plan;
  plan.graph = "two \"layer\" step\n\u00e9 \\ \x01 tab\there \U0001F600";
  plan.graph_fingerprint = "0123456789abcdef";
  plan.hardware = "a100-40g";
  plan.budget = kMaxBytes;
  plan.placement = {
      {0, Tier::kHost}, {5, Tier::kNvme}, {7, Tier::kDevice}, {2147483647, Tier::kHost}};
  plan.steps = {Step::compute(0),
                Step::compute(1, Tier::kHost),
                Step::swap_out(2),
                Step::swap_out(3, Tier::kNvme),
                Step::swap_in(3),
                Step::free(2),
                Step::recompute(0),
                Step::recompute(4, Tier::kHost),
                Step::compute(2147483647),
                Step::free(2147483647),
                Step::swap_in(5, Tier::kHost)};
  plan.offsets = {{2, 0}, {3, 64}, {10, kMaxBytes}, {2147483647, 12345678901234}};
  return plan;
}

TEST(PlanJson, RoundTripKeepsEveryFeature) {
  const Plan plan = rich_plan();
  const std::string text = plan_to_json_text(plan);
  const Plan back = plan_from_json_text(text);
  expect_same(back, plan);
  EXPECT_EQ(plan_to_json_text(back), text);
  EXPECT_EQ(plan_to_json(back), plan_to_json(plan));
  // The DOM holds what the text says.
  const nlohmann::json json = plan_to_json(plan);
  EXPECT_EQ(json["format"], "memwall.plan/1");
  EXPECT_EQ(json["graph"], plan.graph);
  EXPECT_EQ(json["graph_fingerprint"], "0123456789abcdef");
  EXPECT_EQ(json["budget"], kMaxBytes);
  EXPECT_EQ(json["placement"]["5"], "nvme");
  EXPECT_EQ(json["placement"]["7"], "device");
  EXPECT_EQ(json["steps"].size(), plan.steps.size());
  EXPECT_EQ(json["steps"][1], (nlohmann::json{{"do", "compute"}, {"op", 1}, {"on", "host"}}));
  EXPECT_EQ(json["steps"][3], (nlohmann::json{{"do", "swap_out"}, {"buf", 3}, {"to", "nvme"}}));
  EXPECT_EQ(json["steps"][4], (nlohmann::json{{"do", "swap_in"}, {"buf", 3}}));
  EXPECT_EQ(json["steps"][10], (nlohmann::json{{"do", "swap_in"}, {"buf", 5}, {"to", "host"}}));
  EXPECT_EQ(json["offsets"]["2147483647"], 12345678901234u);
  // What nlohmann writes of it reads back the same.
  expect_same(plan_from_json_text(json.dump(2)), plan);
}

TEST(PlanJson, ExactTextOfASmallPlan) {
  Plan plan;
  plan.graph = "small";
  plan.hardware = "a100-40g";
  plan.budget = 1024;
  plan.placement = {{5, Tier::kNvme}, {0, Tier::kHost}};
  plan.steps = {Step::compute(0),   Step::swap_out(2, Tier::kNvme),
                Step::swap_in(2),   Step::compute(1, Tier::kHost),
                Step::recompute(0), Step::free(3)};
  plan.offsets = {{3, 64}, {2, 0}};
  EXPECT_EQ(plan_to_json_text(plan),
            "{\"format\": \"memwall.plan/1\",\n"
            "\"graph\": \"small\",\n"
            "\"hardware\": \"a100-40g\",\n"
            "\"budget\": 1024,\n"
            "\"placement\": {\n"
            "\"0\":\"host\",\n"
            "\"5\":\"nvme\"\n"
            "},\n"
            "\"steps\": [\n"
            "{\"do\":\"compute\",\"op\":0},\n"
            "{\"do\":\"swap_out\",\"buf\":2,\"to\":\"nvme\"},\n"
            "{\"do\":\"swap_in\",\"buf\":2},\n"
            "{\"do\":\"compute\",\"op\":1,\"on\":\"host\"},\n"
            "{\"do\":\"recompute\",\"op\":0},\n"
            "{\"do\":\"free\",\"buf\":3}\n"
            "],\n"
            "\"offsets\": {\n"
            "\"2\":0,\n"
            "\"3\":64\n"
            "}}\n");
}

// Note [Offsets per stay]: a buffer whose stays move is an array, first
// stay first; a workspace with one offset for every run is a number.
TEST(PlanJson, OffsetsPerStayAndWorkspaceOffsets) {
  Plan plan;
  plan.graph = "small";
  plan.hardware = "a100-40g";
  plan.budget = 1024;
  plan.steps = {Step::compute(0), Step::free(2), Step::recompute(0)};
  plan.offsets = {{2, 0}, {3, 64}};
  plan.stay_offsets = {{2, {512, 0}}};
  plan.workspace_offsets = {{0, {128, 640}}, {1, {256}}};
  const std::string text = plan_to_json_text(plan);
  EXPECT_EQ(text,
            "{\"format\": \"memwall.plan/1\",\n"
            "\"graph\": \"small\",\n"
            "\"hardware\": \"a100-40g\",\n"
            "\"budget\": 1024,\n"
            "\"steps\": [\n"
            "{\"do\":\"compute\",\"op\":0},\n"
            "{\"do\":\"free\",\"buf\":2},\n"
            "{\"do\":\"recompute\",\"op\":0}\n"
            "],\n"
            "\"offsets\": {\n"
            "\"2\":[0,512,0],\n"
            "\"3\":64\n"
            "},\n"
            "\"workspace_offsets\": {\n"
            "\"0\":[128,640],\n"
            "\"1\":256\n"
            "}}\n");
  const Plan back = plan_from_json_text(text);
  expect_same(back, plan);
  EXPECT_EQ(stay_offset(back, 2, 0), 0u);
  EXPECT_EQ(stay_offset(back, 2, 1), 512u);
  EXPECT_EQ(stay_offset(back, 2, 2), 0u);
  EXPECT_EQ(stay_offset(back, 2, 3), std::nullopt);  // the plan names three stays
  EXPECT_EQ(stay_offset(back, 3, 7), 64u);           // one offset for every stay
  EXPECT_EQ(stay_offset(back, 4, 0), std::nullopt);
  EXPECT_EQ(workspace_offset(back, 0, 1), 640u);
  EXPECT_EQ(workspace_offset(back, 0, 2), std::nullopt);
  EXPECT_EQ(workspace_offset(back, 1, 5), 256u);
  EXPECT_EQ(workspace_offset(back, 2, 0), std::nullopt);
  // A one-element array is the number.
  const Plan one = plan_from_json_text(
      R"({"format":"memwall.plan/1","graph":"g","hardware":"h","budget":8,"steps":[],)"
      R"("offsets":{"1":[4]},"workspace_offsets":{"0":[2]}})");
  EXPECT_EQ(one.offsets, (std::map<BufferId, uint64_t>{{1, 4}}));
  EXPECT_TRUE(one.stay_offsets.empty());
  EXPECT_EQ(plan_to_json_text(one).find("["), plan_to_json_text(one).find("[\n"));  // steps only
}

// Plan::host_reserved: what the runtime holds on the host beside the
// plan's buffers (Note [Host buffers of the published systems]).
TEST(PlanJson, HostReservesRoundTrip) {
  Plan plan;
  plan.graph = "g";
  plan.hardware = "v100-32g";
  plan.budget = 8;
  plan.host_reserved = {{"DeepSpeed's fp32 gradients", 4096}, {"pinned \"staging\"", 0}};
  const std::string text = plan_to_json_text(plan);
  EXPECT_EQ(text,
            "{\"format\": \"memwall.plan/1\",\n"
            "\"graph\": \"g\",\n"
            "\"hardware\": \"v100-32g\",\n"
            "\"budget\": 8,\n"
            "\"steps\": [\n"
            "],\n"
            "\"host_reserved\": [\n"
            "{\"what\": \"DeepSpeed's fp32 gradients\", \"bytes\": 4096},\n"
            "{\"what\": \"pinned \\\"staging\\\"\", \"bytes\": 0}\n"
            "]}\n");
  const Plan back = plan_from_json_text(text);
  expect_same(back, plan);
  EXPECT_EQ(host_reserved_bytes(back), 4096u);
  plan.host_reserved[0].bytes = (uint64_t{1} << 62) + 1;
  EXPECT_THROW(plan_to_json_text(plan), Error);
}

TEST(PlanJson, EmptyPlacementAndOffsetsAreOmitted) {
  Plan plan;
  plan.graph = "g";
  plan.hardware = "h";
  EXPECT_EQ(plan_to_json_text(plan),
            "{\"format\": \"memwall.plan/1\",\n\"graph\": \"g\",\n\"hardware\": \"h\",\n"
            "\"budget\": 0,\n\"steps\": [\n]}\n");
  plan.steps = {Step::free(1)};
  EXPECT_EQ(plan_to_json_text(plan),
            "{\"format\": \"memwall.plan/1\",\n\"graph\": \"g\",\n\"hardware\": \"h\",\n"
            "\"budget\": 0,\n\"steps\": [\n{\"do\":\"free\",\"buf\":1}\n]}\n");
  expect_same(plan_from_json_text(plan_to_json_text(plan)), plan);
}

// DESIGN.md, "Plan (format memwall.plan/1)", as printed there.
constexpr const char* kDesignExample = R"({
  "format": "memwall.plan/1",
  "graph": "gpt2-small b8 s1024 bf16",
  "hardware": "a100-40g",
  "budget": 42949672960,
  "placement": {"12": "host", "13": "nvme"},
  "steps": [
    {"do": "compute", "op": 0},
    {"do": "swap_out", "buf": 5, "to": "host"},
    {"do": "swap_in", "buf": 5},
    {"do": "free", "buf": 7},
    {"do": "recompute", "op": 2},
    {"do": "compute", "op": 40, "on": "host"}
  ],
  "offsets": {"5": 0, "7": 1048576}
})";

TEST(PlanJson, ReadsTheDesignExample) {
  const Plan plan = plan_from_json_text(kDesignExample);
  EXPECT_EQ(plan.graph, "gpt2-small b8 s1024 bf16");
  EXPECT_EQ(plan.hardware, "a100-40g");
  EXPECT_EQ(plan.budget, 42949672960u);
  EXPECT_EQ(plan.placement, (std::map<BufferId, Tier>{{12, Tier::kHost}, {13, Tier::kNvme}}));
  EXPECT_EQ(plan.steps,
            (std::vector<Step>{Step::compute(0), Step::swap_out(5, Tier::kHost), Step::swap_in(5),
                               Step::free(7), Step::recompute(2), Step::compute(40, Tier::kHost)}));
  EXPECT_EQ(plan.offsets, (std::map<BufferId, uint64_t>{{5, 0}, {7, 1048576}}));
  // Written back and read again, it is the same plan.
  expect_same(plan_from_json_text(plan_to_json_text(plan)), plan);
  EXPECT_EQ(plan_to_json(plan), nlohmann::json::parse(kDesignExample));
}

TEST(PlanJson, AcceptsAnyFieldOrderWhitespaceAndEscapedKeys) {
  // Fields out of the writer's order take the reader's slow path; the result
  // must not differ.
  const Plan plan = plan_from_json_text(
      "\xEF\xBB\xBF \r\n\t{\"steps\" : [ {\"op\" : 3 , \"do\" : \"compute\"},"
      "{\"to\":\"nvme\",\"buf\":4,\"do\":\"swap_out\"},{\"on\":\"device\",\"do\":\"recompute\","
      "\"op\":1},{\"\\u0064o\":\"free\",\"b\\u0075f\":0}],"
      "\"offsets\":{\"0\":8},\"budget\":0,\"hardware\":\"\",\"placement\":{},"
      "\"graph\":\"\\u00e9\",\"format\":\"memwall.plan/1\"}\n ");
  EXPECT_EQ(plan.graph, "\u00e9");
  EXPECT_EQ(plan.hardware, "");
  EXPECT_EQ(plan.steps, (std::vector<Step>{Step::compute(3), Step::swap_out(4, Tier::kNvme),
                                           Step::recompute(1), Step::free(0)}));
  EXPECT_TRUE(plan.placement.empty());
  EXPECT_EQ(plan.offsets, (std::map<BufferId, uint64_t>{{0, 8}}));
}

TEST(PlanJson, WrittenAndHandWrittenStepsReadTheSame) {
  // The reader matches the writer's exact step shapes on a fast path (Note
  // [Written steps]); spaces after the colons send every step down the
  // general path instead.
  const Plan plan = rich_plan();
  const std::string text = plan_to_json_text(plan);
  std::string spaced;
  for (const char c : text) {
    spaced += c;
    if (c == ':') spaced += ' ';
  }
  ASSERT_NE(spaced, text);
  expect_same(plan_from_json_text(spaced), plan);
  // Near misses of the fast path's shapes are read by the general path.
  const std::string top =
      R"({"format":"memwall.plan/1","graph":"g","hardware":"h","budget":0,"steps":[)";
  const auto steps = [&](const std::string& list) {
    return plan_from_json_text(top + list + "]}").steps;
  };
  EXPECT_EQ(steps(R"({"do":"compute","op":7,"on":"device"})"), std::vector<Step>{Step::compute(7)});
  EXPECT_EQ(steps(R"({"do":"compute","on":"host","op":7})"),
            std::vector<Step>{Step::compute(7, Tier::kHost)});
  EXPECT_EQ(steps(R"({"do":"swap_out","to":"nvme","buf":0})"),
            std::vector<Step>{Step::swap_out(0, Tier::kNvme)});
  EXPECT_EQ(steps(R"({"do":"free","buf":2147483647 })"), std::vector<Step>{Step::free(2147483647)});
  EXPECT_EQ(steps(R"({"do":"swap_in","buf":1} , {"do":"recompute","op":3})"),
            (std::vector<Step>{Step::swap_in(1), Step::recompute(3)}));
  // Ids the fast path does not take are errors on the general path too.
  EXPECT_THROW(steps(R"({"do":"free","buf":2147483648})"), Error);
  EXPECT_THROW(steps(R"({"do":"free","buf":01})"), Error);
  EXPECT_THROW(steps(R"({"do":"free","buf":1.0})"), Error);
  EXPECT_THROW(steps(R"({"do":"free","buf":12345678901})"), Error);
}

TEST(PlanJson, OffsetsOutOfOrderAreSorted) {
  const Plan plan = plan_from_json_text(
      R"({"format":"memwall.plan/1","graph":"g","hardware":"h","budget":9,"steps":[],)"
      R"("placement":{"9":"host","0":"nvme","3":"host"},"offsets":{"7":1,"2":2,"0":3,"5":4}})");
  EXPECT_EQ(plan.placement,
            (std::map<BufferId, Tier>{{0, Tier::kNvme}, {3, Tier::kHost}, {9, Tier::kHost}}));
  EXPECT_EQ(plan.offsets, (std::map<BufferId, uint64_t>{{0, 3}, {2, 2}, {5, 4}, {7, 1}}));
}

TEST(PlanJson, LargePlanRoundTrips) {
  Plan plan;
  plan.graph = "big";
  plan.hardware = "h100-80g";
  plan.budget = uint64_t{80} << 30;
  for (int i = 0; i < 100000; ++i) {
    plan.steps.push_back(Step::compute(i));
    if (i % 3 == 0) plan.steps.push_back(Step::swap_out(i, i % 2 ? Tier::kHost : Tier::kNvme));
    if (i % 3 == 1) plan.steps.push_back(Step::swap_in(i - 1));
    if (i % 5 == 0) plan.steps.push_back(Step::free(i));
    plan.offsets[i] = static_cast<uint64_t>(i) * 4096;
  }
  const std::string text = plan_to_json_text(plan);
  const Plan back = plan_from_json_text(text);
  expect_same(back, plan);
  EXPECT_EQ(plan_to_json_text(back), text);
}

fs::path temp_dir() {
  const fs::path dir =
      fs::temp_directory_path() /
      ("memwall_plan_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(PlanJson, Files) {
  const fs::path dir = temp_dir();
  const std::string path = (dir / "plan.json").string();
  const Plan plan = rich_plan();
  write_plan_file(plan, path);
  expect_same(read_plan_file(path), plan);
  // Nothing but the file itself is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  // A refused plan leaves the old file as it was.
  Plan bad = plan;
  bad.steps[2].to = Tier::kDevice;
  EXPECT_THROW(write_plan_file(bad, path), Error);
  expect_same(read_plan_file(path), plan);

  // Errors in a file name it first.
  const std::string broken = (dir / "broken.json").string();
  std::ofstream(broken) << R"({"format":"memwall.plan/1","graph":"g","hardware":"h",)"
                        << R"("budget":-5,"steps":[]})";
  try {
    read_plan_file(broken);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              broken + ": plan: \"budget\" must be a non-negative integer, got -5");
  }
  try {
    read_plan_file((dir / "missing.json").string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "missing.json").string() + ": ", 0), 0u)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(PlanJson, WriterRefusesWhatTheReaderWouldReject) {
  const auto expect_refused = [](const Plan& plan, const std::string& expected) {
    try {
      plan_to_json_text(plan);
      ADD_FAILURE() << "written, expected " << expected;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  };
  const Plan good = rich_plan();
  Plan p = good;
  p.steps[2].to = Tier::kDevice;
  expect_refused(p, R"(plan: step 2 (swap_out): "to" must be "host" or "nvme", got "device")");
  p = good;
  p.steps[1].on = Tier::kNvme;
  expect_refused(p, R"(plan: step 1 (compute): "on" must be "device" or "host", got "nvme")");
  p = good;
  p.steps[0].op = -1;
  expect_refused(p, R"(plan: step 0 (compute): "op" must be a non-negative integer, got -1)");
  p = good;
  p.steps[5].buf = -7;
  expect_refused(p, R"(plan: step 5 (free): "buf" must be a non-negative integer, got -7)");
  p = good;
  p.steps[4].kind = static_cast<StepKind>(9);
  expect_refused(p, "plan: step 4: unknown step kind 9");
  p = good;
  p.steps[3].to = static_cast<Tier>(200);
  expect_refused(p, R"(plan: step 3 (swap_out): "to" must be "host" or "nvme", got 200)");
  p = good;
  p.budget = kMaxBytes + 1;
  expect_refused(p, "plan: \"budget\" is 4611686018427387905, above the limit of 2^62 bytes");
  p = good;
  p.placement[-3] = Tier::kHost;
  expect_refused(p, "plan: \"placement\": key \"-3\" is not a buffer id");
  p = good;
  p.placement[4] = static_cast<Tier>(3);
  expect_refused(p, R"(plan: "placement": buffer 4 must be "host", "nvme" or "device", got 3)");
  p = good;
  p.offsets[-1] = 0;
  expect_refused(p, "plan: \"offsets\": key \"-1\" is not a buffer id");
  p = good;
  p.offsets[4] = ~uint64_t{0};
  expect_refused(p,
                 "plan: \"offsets\": the offset of buffer 4 is 18446744073709551615, above the "
                 "limit of 2^62 bytes");
  p = good;
  p.hardware = "a100\xff";
  expect_refused(p, "plan: \"hardware\" is not valid UTF-8");
  p = good;
  p.graph = "\xC0\xAF";  // overlong '/'
  expect_refused(p, "plan: \"graph\" is not valid UTF-8");
}

}  // namespace
}  // namespace memwall
