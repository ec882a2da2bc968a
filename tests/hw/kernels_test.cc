// A profile's measured kernels (Note [Measured kernels]): the signature that
// keys them, the "kernels" field of a profile, and how they reach a graph.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/graph/calls.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

using nlohmann::json;

// An addmm call record as the tracer writes it (docs/exec.md, "Call
// records"): bias, input and weight of buffers `b`, `x`, `w`.
std::string addmm(int b, int x, int w, int rows) {
  const auto tensor = [](int id, json size, json stride) {
    return json{{"t", id}, {"size", size}, {"stride", stride}, {"offset", 0}, {"dtype", "Float"}};
  };
  return json{
      {"op", "aten::addmm"},
      {"overload", ""},
      {"args",
       {tensor(b, {64}, {1}), tensor(x, {rows, 32}, {32, 1}), tensor(w, {32, 64}, {1, 32})}},
      {"kwargs", json::object()},
      {"results", {x + 100}}}
      .dump();
}

TEST(KernelSignature, OneKernelForOneShapeOnAnyBuffers) {
  EXPECT_EQ(kernel_signature(addmm(1, 2, 3, 8)), kernel_signature(addmm(7, 8, 9, 8)));
  EXPECT_NE(kernel_signature(addmm(1, 2, 3, 8)), kernel_signature(addmm(1, 2, 3, 16)));
  const json s = json::parse(kernel_signature(addmm(1, 2, 3, 8)));
  EXPECT_FALSE(s.contains("results"));
  EXPECT_FALSE(s["args"][0].contains("t"));
  EXPECT_EQ(s["args"][1]["size"], json({8, 32}));
  EXPECT_EQ(s["op"], "aten::addmm");
}

TEST(KernelSignature, TrackedScalarsKeepTheirExpressionNotTheirValue) {
  // Adam's bias correction of step k (Note [Tracked scalars]).
  const auto div = [](double value, int step_buffer) {
    const json step = json::parse(R"({"size": [], "stride": [], "offset": 0, "dtype": "Float"})");
    json item = step;
    item["t"] = step_buffer;
    json call = json::parse(R"({"op": "aten::div", "overload": "Tensor", "kwargs": {},
        "args": [{"t": 5, "size": [4], "stride": [1], "offset": 0, "dtype": "Float"}],
        "results": [6]})");
    call["args"].push_back(
        json{{"f", value}, {"expr", json::array({"pow", 0.999, json::array({"item", item})})}});
    return call.dump();
  };
  EXPECT_EQ(kernel_signature(div(0.001, 1)), kernel_signature(div(0.002, 9)));
  // A plain scalar is part of the kernel.
  const std::string lerp_a = R"({"op":"aten::lerp_","overload":"Scalar","args":[{"f":0.1}]})";
  const std::string lerp_b = R"({"op":"aten::lerp_","overload":"Scalar","args":[{"f":0.2}]})";
  EXPECT_NE(kernel_signature(lerp_a), kernel_signature(lerp_b));
  // Locals of a fused sequence are ids too.
  EXPECT_EQ(kernel_signature(R"({"op":"aten::neg","args":[{"l":0,"size":[2]}]})"),
            kernel_signature(R"({"op":"aten::neg","args":[{"l":3,"size":[2]}]})"));
}

TEST(KernelSignature, NotAnObjectIsAnError) {
  EXPECT_THROW(kernel_signature("{"), Error);
  EXPECT_THROW(kernel_signature("[1]"), Error);
}

Hardware profile_with(const std::string& signature, double seconds) {
  Hardware hw = find_gpu("l4");
  hw.kernel_seconds[signature] = seconds;
  return hw;
}

TEST(KernelsJson, RoundTripAndOnlyWhenMeasured) {
  EXPECT_FALSE(hardware_to_json(find_gpu("l4")).contains("kernels"));
  const Hardware hw = profile_with(kernel_signature(addmm(1, 2, 3, 8)), 2.5e-5);
  const json j = hardware_to_json(hw);
  ASSERT_TRUE(j.contains("kernels"));
  EXPECT_EQ(hardware_from_json(j).kernel_seconds, hw.kernel_seconds);
}

TEST(KernelsJson, BadKernelsAreOneLine) {
  json j = hardware_to_json(find_gpu("l4"));
  j["kernels"] = json::array();
  EXPECT_THROW(
      {
        try {
          hardware_from_json(j);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "hardware profile: field 'kernels' must be an object, got array");
          throw;
        }
      },
      Error);
  for (const json& bad : {json(0), json(-1e-3), json("fast"), json(nullptr)}) {
    j["kernels"] = json{{"k", bad}};
    EXPECT_THROW(hardware_from_json(j), Error) << bad.dump();
  }
}

TEST(KernelsJson, DeviceIsHostCpuIsOptionalAndBoolean) {
  json j = hardware_to_json(find_gpu("l4"));
  EXPECT_FALSE(j.contains("device_is_host_cpu"));
  EXPECT_FALSE(hardware_from_json(j).device_is_host_cpu);
  j["device_is_host_cpu"] = true;
  EXPECT_TRUE(hardware_from_json(j).device_is_host_cpu);
  EXPECT_EQ(hardware_to_json(hardware_from_json(j)), j);
  j["device_is_host_cpu"] = 1;
  EXPECT_THROW(hardware_from_json(j), Error);
}

// Note [Copy contention]: {compute, copy}, each a slowdown in [1, 100];
// absent means {1, 1} and {1, 1} is written as absent.
TEST(KernelsJson, CopyContentionIsOptionalAndTwoSlowdowns) {
  json j = hardware_to_json(find_gpu("l4"));
  EXPECT_FALSE(j.contains("copy_contention"));
  EXPECT_EQ(hardware_from_json(j).copy_contention, Hardware::CopyContention{});
  j["copy_contention"] = {{"compute", 2.5}, {"copy", 1.25}};
  const Hardware hw = hardware_from_json(j);
  EXPECT_EQ(hw.copy_contention.compute, 2.5);
  EXPECT_EQ(hw.copy_contention.copy, 1.25);
  EXPECT_EQ(hardware_to_json(hw), j);
  for (const json& bad : {json(2), json{{"compute", 2}}, json{{"compute", 0.5}, {"copy", 1}},
                          json{{"compute", 2}, {"copy", 101}}, json{{"compute", "2"}, {"copy", 1}},
                          json{{"compute", 2}, {"copy", 1}, {"nvme", 1}}}) {
    j["copy_contention"] = bad;
    EXPECT_THROW(hardware_from_json(j), Error) << bad.dump();
  }
}

// Note [Op overhead]: seconds in [0, 1]; absent means 0 and 0 is written
// as absent.
TEST(KernelsJson, OpOverheadIsOptionalSeconds) {
  json j = hardware_to_json(find_gpu("l4"));
  EXPECT_FALSE(j.contains("op_overhead"));
  EXPECT_EQ(hardware_from_json(j).op_overhead, 0.0);
  j["op_overhead"] = 2.5e-6;
  const Hardware hw = hardware_from_json(j);
  EXPECT_EQ(hw.op_overhead, 2.5e-6);
  EXPECT_EQ(hardware_to_json(hw), j);
  for (const json& bad : {json(-1e-6), json(1.5), json("2e-6"), json(nullptr)}) {
    j["op_overhead"] = bad;
    EXPECT_THROW(hardware_from_json(j), Error) << bad.dump();
  }
}

Graph two_addmms() {
  Graph g;
  g.name = "two";
  for (int i = 0; i < 4; ++i) {
    Buffer b;
    b.id = i;
    b.bytes = 256;
    g.buffers.push_back(b);
  }
  for (int i = 0; i < 2; ++i) {
    Op op;
    op.id = i;
    op.name = "fc" + std::to_string(i);
    op.type = "addmm";
    op.in = {0, 1};
    op.out = {2 + i};
    op.flops = 1e6;
    op.call = addmm(0, 1, 2, i == 0 ? 8 : 16);
    g.ops.push_back(op);
  }
  return g;
}

TEST(ApplyKernelTimes, MatchingOpsTakeTheProfilesTimeAndFilesDoNot) {
  Graph g = two_addmms();
  g.ops[0].time = 1.0;  // the profile's time replaces an op's own
  const Hardware hw = profile_with(kernel_signature(g.ops[0].call), 3e-5);
  EXPECT_EQ(apply_kernel_times(hw, g), 1u);
  EXPECT_EQ(g.ops[0].time, 3e-5);
  EXPECT_DOUBLE_EQ(op_time(hw, g, g.ops[0]), 3e-5);
  EXPECT_FALSE(g.ops[1].time.has_value());  // another shape: the roofline
  clear_kernel_times(hw, g);
  EXPECT_FALSE(g.ops[0].time.has_value());
  EXPECT_EQ(apply_kernel_times(find_gpu("l4"), g), 0u);  // built-ins measure none
}

TEST(ApplyKernelTimes, ACpuStepCostsItsPartsWhenAllWereMeasured) {
  Graph g = two_addmms();
  const json a = json::parse(addmm(0, 1, 2, 8)), b = json::parse(addmm(0, 1, 2, 16));
  g.ops[1].call = json{{"op", "memwall::cpu_step"}, {"steps", {a, b}}}.dump();
  EXPECT_EQ(kernel_signatures(g.ops[1].call),
            (std::vector<std::string>{kernel_signature(a.dump()), kernel_signature(b.dump())}));
  Hardware hw = profile_with(kernel_signature(a.dump()), 3e-5);
  EXPECT_EQ(apply_kernel_times(hw, g), 1u);  // op 0 only: b was not measured
  EXPECT_FALSE(g.ops[1].time.has_value());
  hw.kernel_seconds[kernel_signature(b.dump())] = 5e-5;
  EXPECT_EQ(apply_kernel_times(hw, g), 2u);
  EXPECT_DOUBLE_EQ(*g.ops[1].time, 8e-5);
}

}  // namespace
}  // namespace memwall
