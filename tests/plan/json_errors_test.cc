// Malformed plans: each is rejected with memwall::Error and exactly one
// expected line; no input makes the reader crash or throw anything else.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/plan/plan.h"

namespace memwall {
namespace {

const std::string kTop = R"("format":"memwall.plan/1","graph":"g","hardware":"h","budget":1024)";

// {<top>,"steps":[<steps>]<more>}
std::string doc(const std::string& steps, const std::string& more = "",
                const std::string& top = kTop) {
  return "{" + top + R"(,"steps":[)" + steps + "]" + more + "}";
}
// A document whose only step is `step`, after `before` valid ones.
std::string step_at(int before, const std::string& step) {
  std::string steps;
  for (int i = 0; i < before; ++i) steps += R"({"do":"compute","op":0},)";
  return doc(steps + step);
}

struct Case {
  std::string label;
  std::string text;
  std::string expected;  // the whole message
};

std::vector<Case> cases() {
  const std::string ok_step = R"({"do":"compute","op":0})";
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "[";
  return {
      // ---- Syntax and the top level ----
      {"empty input", "", "plan: invalid JSON at line 1, column 1: unexpected end of input"},
      {"whitespace only", " \n ",
       "plan: invalid JSON at line 2, column 2: unexpected end of input"},
      {"top level array", "[1, 2]", "plan: the top level must be a JSON object, got an array"},
      {"top level null", "null", "plan: the top level must be a JSON object, got null"},
      {"trailing content", doc(ok_step) + " x",
       "plan: invalid JSON at line 1, column 104: unexpected 'x' after the top-level object"},
      {"line and column", "{\n  \"format\": \"memwall.plan/1\",\n  \"graph\" \"g\"}",
       "plan: invalid JSON at line 3, column 11: expected ':', got '\"'"},
      {"syntax error names the step", step_at(1, R"({"do":"free",,})"),
       "plan: invalid JSON at line 1, column 115 (in step 1): expected a string (an object key)"},
      {"unclosed steps", "{" + kTop + R"(,"steps":[)" + ok_step + " " + ok_step + "]}",
       "plan: invalid JSON at line 1, column 102 (in step 0): expected ',' or ']' after an "
       "array element"},
      {"NaN in a step", step_at(0, R"({"do":"compute","op":NaN})"),
       "plan: invalid JSON at line 1, column 99 (in step 0): expected a value, got 'N'"},
      {"leading zero in an id", step_at(0, R"({"do":"compute","op":01})"),
       "plan: invalid JSON at line 1, column 100 (in step 0): expected ',' or '}' after an object "
       "member"},
      {"syntax error in placement", doc("", R"(,"placement":{"1":"host" "2":"nvme"})"),
       "plan: invalid JSON at line 1, column 104 (in \"placement\"): expected ',' or '}' after an "
       "object member"},
      {"too deep in an unknown field", doc("", R"(,"extra":)" + deep),
       "plan: invalid JSON at line 1, column 345: nesting deeper than 256 levels"},
      {"invalid UTF-8", doc("", "", "\"format\":\"memwall.plan/1\",\"graph\":\"g\xff\""),
       "plan: invalid JSON at line 1, column 38: invalid UTF-8 in a string"},
      {"raw newline in a string", "{\"graph\":\"a\nb\"}",
       "plan: invalid JSON at line 1, column 12: control character in a string (it must be "
       "escaped)"},

      // ---- Top-level fields ----
      {"wrong format", doc("", "", R"("format":"memwall.graph/1","graph":"g")"),
       "plan: unknown format \"memwall.graph/1\" (expected \"memwall.plan/1\")"},
      {"wrong format wins over earlier problems",
       R"({"budget":-5,"extra":1,"format":"plan","steps":[1]})",
       "plan: unknown format \"plan\" (expected \"memwall.plan/1\")"},
      {"format not a string", doc("", "", R"("format":1,"graph":"g","hardware":"h","budget":0)"),
       "plan: \"format\" must be a string, got a number"},
      {"missing format", doc("", "", R"("graph":"g","hardware":"h","budget":0)"),
       "plan: missing field \"format\" (expected \"memwall.plan/1\")"},
      {"empty object", "{}", "plan: missing field \"format\" (expected \"memwall.plan/1\")"},
      {"missing format behind another problem",
       doc("", "", R"("graph":"g","hardware":"h","budget":-1)"),
       "plan: \"budget\" must be a non-negative integer, got -1"},
      {"missing graph", doc("", "", R"("format":"memwall.plan/1","hardware":"h","budget":0)"),
       "plan: missing field \"graph\""},
      {"missing hardware", doc("", "", R"("format":"memwall.plan/1","graph":"g","budget":0)"),
       "plan: missing field \"hardware\""},
      {"missing budget", doc("", "", R"("format":"memwall.plan/1","graph":"g","hardware":"h")"),
       "plan: missing field \"budget\""},
      {"missing steps", "{" + kTop + "}", "plan: missing field \"steps\""},
      {"unknown field", doc("", R"(,"name":"x")"), "plan: unknown field \"name\""},
      {"duplicate field", doc("", R"(,"budget":1)"), "plan: duplicate field \"budget\""},
      {"fingerprint not hex", doc("", R"(,"graph_fingerprint":"G123456789abcdef")"),
       "plan: \"graph_fingerprint\" must be 16 lowercase hex digits, got \"G123456789abcdef\""},
      {"fingerprint too short", doc("", R"(,"graph_fingerprint":"abc")"),
       "plan: \"graph_fingerprint\" must be 16 lowercase hex digits, got \"abc\""},
      {"fingerprint not a string", doc("", R"(,"graph_fingerprint":12)"),
       "plan: \"graph_fingerprint\" must be a string, got a number"},
      {"graph not a string", doc("", "", R"("format":"memwall.plan/1","graph":null)"),
       "plan: \"graph\" must be a string, got null"},
      {"hardware not a string",
       doc("", "", R"("format":"memwall.plan/1","graph":"g","hardware":["a100"])"),
       "plan: \"hardware\" must be a string, got an array"},
      {"negative budget", doc("", "", R"("format":"memwall.plan/1","budget":-5)"),
       "plan: \"budget\" must be a non-negative integer, got -5"},
      {"fractional budget", doc("", "", R"("format":"memwall.plan/1","budget":1.5)"),
       "plan: \"budget\" must be a non-negative integer, got 1.5"},
      {"budget with exponent", doc("", "", R"("format":"memwall.plan/1","budget":1e3)"),
       "plan: \"budget\" must be a non-negative integer, got 1e3"},
      {"budget as a string", doc("", "", R"("format":"memwall.plan/1","budget":"1024")"),
       "plan: \"budget\" must be a non-negative integer, got a string"},
      {"budget as a boolean", doc("", "", R"("format":"memwall.plan/1","budget":true)"),
       "plan: \"budget\" must be a non-negative integer, got a boolean"},
      {"budget above 2^62",
       doc("", "", R"("format":"memwall.plan/1","budget":4611686018427387905)"),
       "plan: \"budget\" is 4611686018427387905, above the limit of 2^62 bytes"},
      {"budget beyond 2^64, shortened",
       doc("", "",
           R"("format":"memwall.plan/1","budget":123456789012345678901234567890123456789012345)"),
       "plan: \"budget\" is 1234567890123456789012345678901234567890, above the limit of 2^62 "
       "bytes"},
      {"unknown step kind", step_at(0, R"({"do":"jump"})"),
       R"(plan: step 0: "do" must be "compute", "recompute", "swap_out", "swap_in" or "free", got "jump")"},
      {"bad step before a bad placement", doc(R"({"do":"jump"})", R"(,"placement":{"x":"host"})"),
       R"(plan: step 0: "do" must be "compute", "recompute", "swap_out", "swap_in" or "free", got "jump")"},
      {"top-level problem before a bad step",
       doc(R"({"do":"jump"})", "", R"("format":"memwall.plan/1","graph":1)"),
       "plan: \"graph\" must be a string, got a number"},

      // ---- Steps ----
      {"steps not an array", "{" + kTop + R"(,"steps":{}})",
       "plan: \"steps\" must be an array, got an object"},
      {"step not an object", doc(ok_step + ",7"), "plan: step 1 must be an object, got a number"},
      {"step is null", doc("null"), "plan: step 0 must be an object, got null"},
      {"missing do", step_at(3, R"({"op":1})"), "plan: step 3: missing field \"do\""},
      {"empty step", step_at(0, "{}"), "plan: step 0: missing field \"do\""},
      {"do not a string", step_at(0, R"({"do":1})"),
       R"(plan: step 0: "do" must be "compute", "recompute", "swap_out", "swap_in" or "free", got a number)"},
      {"do with different case", step_at(0, R"({"do":"Compute","op":0})"),
       R"(plan: step 0: "do" must be "compute", "recompute", "swap_out", "swap_in" or "free", got "Compute")"},
      {"compute without op", step_at(0, R"({"do":"compute"})"),
       "plan: step 0 (compute): missing field \"op\""},
      {"recompute without op", step_at(0, R"({"do":"recompute","on":"host"})"),
       "plan: step 0 (recompute): missing field \"op\""},
      {"swap_out without to", step_at(12, R"({"do":"swap_out","buf":3})"),
       "plan: step 12 (swap_out): missing field \"to\""},
      {"swap_out without buf", step_at(0, R"({"do":"swap_out","to":"host"})"),
       "plan: step 0 (swap_out): missing field \"buf\""},
      {"swap_in without buf", step_at(0, R"({"do":"swap_in"})"),
       "plan: step 0 (swap_in): missing field \"buf\""},
      {"swap_out to the device", step_at(12, R"({"do":"swap_out","buf":3,"to":"device"})"),
       R"(plan: step 12 (swap_out): "to" must be "host" or "nvme", got "device")"},
      {"swap_out to a disk", step_at(0, R"({"do":"swap_out","buf":3,"to":"disk"})"),
       R"(plan: step 0 (swap_out): "to" must be "host" or "nvme", got "disk")"},
      {"to not a string", step_at(0, R"({"do":"swap_out","buf":3,"to":1})"),
       R"(plan: step 0 (swap_out): "to" must be "host" or "nvme", got a number)"},
      {"swap_in to nvme", step_at(0, R"({"do":"swap_in","buf":3,"to":"nvme"})"),
       R"(plan: step 0 (swap_in): "to" must be "device" or "host", got "nvme")"},
      {"swap_in to a disk, before do", step_at(0, R"({"to":"disk","do":"swap_in","buf":3})"),
       R"(plan: step 0 (swap_in): "to" must be "device" or "host", got "disk")"},
      {"compute on nvme", step_at(0, R"({"do":"compute","op":0,"on":"nvme"})"),
       R"(plan: step 0 (compute): "on" must be "device" or "host", got "nvme")"},
      {"to on a free", step_at(0, R"({"do":"free","buf":1,"to":"host"})"),
       R"(plan: step 0 (free): unexpected field "to" (free takes "buf"))"},
      {"buf on a compute", step_at(0, R"({"do":"compute","op":1,"buf":2})"),
       R"(plan: step 0 (compute): unexpected field "buf" (compute takes "op" and optionally "on"))"},
      {"on on a swap_out", step_at(0, R"({"do":"swap_out","buf":1,"to":"host","on":"host"})"),
       R"(plan: step 0 (swap_out): unexpected field "on" (swap_out takes "buf" and "to"))"},
      {"op on a swap_in, before do", step_at(0, R"({"op":1,"buf":1,"do":"swap_in"})"),
       R"(plan: step 0 (swap_in): unexpected field "op" (swap_in takes "buf" and optionally "to"))"},
      {"misplaced field named before its bad value",
       step_at(0, R"({"do":"free","buf":1,"to":"device"})"),
       R"(plan: step 0 (free): unexpected field "to" (free takes "buf"))"},
      {"negative op", step_at(0, R"({"do":"compute","op":-1})"),
       R"(plan: step 0 (compute): "op" must be a non-negative integer, got -1)"},
      {"fractional op", step_at(0, R"({"do":"compute","op":2.0})"),
       R"(plan: step 0 (compute): "op" must be a non-negative integer, got 2.0)"},
      {"op beyond int32", step_at(0, R"({"do":"recompute","op":2147483648})"),
       R"(plan: step 0 (recompute): "op" is 2147483648, above the limit of 2147483647)"},
      {"op as a string", step_at(0, R"({"do":"compute","op":"0"})"),
       R"(plan: step 0 (compute): "op" must be a non-negative integer, got a string)"},
      {"buf as an array", step_at(0, R"({"do":"free","buf":[1]})"),
       R"(plan: step 0 (free): "buf" must be a non-negative integer, got an array)"},
      {"unknown step field", step_at(0, R"({"do":"compute","op":0,"when":1})"),
       R"(plan: step 0 (compute): unknown field "when")"},
      {"duplicate step field", step_at(0, R"({"do":"compute","op":0,"op":1})"),
       R"(plan: step 0 (compute): duplicate field "op")"},
      {"duplicate do", step_at(0, R"({"do":"compute","op":0,"do":"free"})"),
       R"(plan: step 0 (compute): duplicate field "do")"},
      {"first step problem wins", step_at(0, R"({"do":"free"},{"do":"nope"})"),
       "plan: step 0 (free): missing field \"buf\""},

      // ---- placement and offsets ----
      {"placement not an object", doc("", R"(,"placement":["host"])"),
       "plan: \"placement\" must be an object, got an array"},
      {"placement key with a leading zero", doc("", R"(,"placement":{"01":"host"})"),
       "plan: \"placement\": key \"01\" is not a buffer id"},
      {"negative placement key", doc("", R"(,"placement":{"-1":"host"})"),
       "plan: \"placement\": key \"-1\" is not a buffer id"},
      {"empty placement key", doc("", R"(,"placement":{"":"host"})"),
       "plan: \"placement\": key \"\" is not a buffer id"},
      {"placement key with a sign", doc("", R"(,"placement":{"+1":"host"})"),
       "plan: \"placement\": key \"+1\" is not a buffer id"},
      {"placement key with a space", doc("", R"(,"placement":{" 1":"host"})"),
       "plan: \"placement\": key \" 1\" is not a buffer id"},
      {"placement key beyond int32", doc("", R"(,"placement":{"2147483648":"host"})"),
       "plan: \"placement\": key \"2147483648\" is not a buffer id"},
      {"placement key that is a name", doc("", R"(,"placement":{"wte":"host"})"),
       "plan: \"placement\": key \"wte\" is not a buffer id"},
      {"unknown tier", doc("", R"(,"placement":{"3":"gpu"})"),
       R"(plan: "placement": buffer 3 must be "host", "nvme" or "device", got "gpu")"},
      {"tier not a string", doc("", R"(,"placement":{"3":2})"),
       R"(plan: "placement": buffer 3 must be "host", "nvme" or "device", got a number)"},
      {"duplicate placement key", doc("", R"(,"placement":{"3":"host","4":"host","3":"nvme"})"),
       "plan: \"placement\": duplicate key \"3\""},
      {"duplicate placement key, escaped", doc("", R"(,"placement":{"3":"host","\u0033":"host"})"),
       "plan: \"placement\": duplicate key \"3\""},
      {"offsets not an object", doc("", R"(,"offsets":0)"),
       "plan: \"offsets\" must be an object, got a number"},
      {"offsets key with an exponent", doc("", R"(,"offsets":{"1e3":0})"),
       "plan: \"offsets\": key \"1e3\" is not a buffer id"},
      {"negative offset", doc("", R"(,"offsets":{"5":-1})"),
       "plan: \"offsets\": the offset of buffer 5 must be a non-negative integer, got -1"},
      {"offset as a string", doc("", R"(,"offsets":{"5":"0"})"),
       "plan: \"offsets\": the offset of buffer 5 must be a non-negative integer, got a string"},
      {"offset above 2^62", doc("", R"(,"offsets":{"5":4611686018427387905})"),
       "plan: \"offsets\": the offset of buffer 5 is 4611686018427387905, above the limit of "
       "2^62 bytes"},
      {"duplicate offsets key", doc("", R"(,"offsets":{"5":0,"5":0})"),
       "plan: \"offsets\": duplicate key \"5\""},
      {"long key is shortened", doc("", R"(,"offsets":{")" + std::string(100, '7') + R"(":0})"),
       "plan: \"offsets\": key \"" + std::string(60, '7') + "...\" is not a buffer id"},
      // Note [Offsets per stay]
      {"empty array of stay offsets", doc("", R"(,"offsets":{"5":[]})"),
       "plan: \"offsets\": buffer 5 has an empty array"},
      {"negative stay offset", doc("", R"(,"offsets":{"5":[0,-64]})"),
       "plan: \"offsets\": the offset of buffer 5 must be a non-negative integer, got -64"},
      {"stay offsets not closed", doc("", R"(,"offsets":{"5":[0,64})"),
       "plan: invalid JSON at line 1, column 100 (in \"offsets\"): expected ',' or ']' after an "
       "array element"},
      {"workspace offsets not an object", doc("", R"(,"workspace_offsets":[1])"),
       "plan: \"workspace_offsets\" must be an object, got an array"},
      {"workspace key that is a name", doc("", R"(,"workspace_offsets":{"conv":0})"),
       "plan: \"workspace_offsets\": key \"conv\" is not an op id"},
      {"workspace offset as a string", doc("", R"(,"workspace_offsets":{"2":"0"})"),
       "plan: \"workspace_offsets\": the offset of op 2 must be a non-negative integer, got a "
       "string"},
      {"duplicate workspace key", doc("", R"(,"workspace_offsets":{"2":0,"2":[0,8]})"),
       "plan: \"workspace_offsets\": duplicate key \"2\""},
      // Plan::host_reserved
      {"host reserve not an array", doc("", R"(,"host_reserved":{"what":"x","bytes":1})"),
       "plan: \"host_reserved\" must be an array, got an object"},
      {"host reserve not an object", doc("", R"(,"host_reserved":[1])"),
       "plan: \"host_reserved\"[0] must be an object, got a number"},
      {"host reserve without bytes", doc("", R"(,"host_reserved":[{"what":"x"}])"),
       "plan: missing field \"bytes\""},
      {"host reserve of negative bytes", doc("", R"(,"host_reserved":[{"what":"x","bytes":-1}])"),
       "plan: \"host_reserved\"[0].bytes must be a non-negative integer, got -1"},
  };
}

TEST(PlanJsonErrors, EachMalformedInputIsRejectedWithItsMessage) {
  const std::vector<Case> all = cases();
  EXPECT_GE(all.size(), 40u);
  // The base documents are valid: each failure comes from its own change.
  EXPECT_NO_THROW(plan_from_json_text(doc("")));
  EXPECT_NO_THROW(plan_from_json_text(step_at(12, R"({"do":"swap_out","buf":3,"to":"nvme"})")));
  for (const Case& c : all) {
    SCOPED_TRACE(c.label);
    try {
      plan_from_json_text(c.text);
      ADD_FAILURE() << "accepted: " << c.text.substr(0, 300);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), c.expected);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }
}

// A valid plan with every feature, as the writer prints it.
std::string valid_text() {
  Plan plan;
  plan.graph = "g \"\u00e9\"";
  plan.hardware = "a100-40g";
  plan.budget = 1 << 20;
  plan.placement = {{0, Tier::kHost}, {5, Tier::kNvme}};
  plan.steps = {Step::compute(0),   Step::swap_out(2, Tier::kNvme),
                Step::swap_in(2),   Step::compute(1, Tier::kHost),
                Step::recompute(0), Step::free(3)};
  plan.offsets = {{2, 0}, {3, 4096}};
  return plan_to_json_text(plan);
}

TEST(PlanJsonErrors, EveryTruncationIsAnError) {
  const std::string text = valid_text();
  const size_t end = text.rfind('}');  // text[0, end] is the whole object
  ASSERT_NO_THROW(plan_from_json_text(text.substr(0, end + 1)));
  for (size_t n = 0; n <= end; ++n) {
    SCOPED_TRACE(n);
    try {
      plan_from_json_text(text.substr(0, n));
      ADD_FAILURE() << "accepted a prefix of " << n << " bytes";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("plan: ", 0), 0u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }
}

TEST(PlanJsonErrors, EverySingleByteChangeIsReadOrRejected) {
  // Not a fuzzer, but cheap: each position overwritten by a few bytes that
  // matter to JSON must give a plan or an Error, nothing else.
  const std::string text = valid_text();
  for (size_t i = 0; i < text.size(); ++i) {
    for (const char c : std::string("\"{}[],:0-9ex\\\xff ")) {
      std::string changed = text;
      changed[i] = c;
      try {
        const Plan plan = plan_from_json_text(changed);
        // Whatever is accepted writes and reads back the same.
        const std::string written = plan_to_json_text(plan);
        EXPECT_EQ(plan_to_json_text(plan_from_json_text(written)), written);
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "position " << i << ": wrong exception type: " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace memwall
