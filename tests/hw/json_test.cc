// Hardware profiles as JSON: round trip, and one clear error per bad input.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

using nlohmann::json;

std::string error_of(const json& object) {
  try {
    hardware_from_json(object);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

json a100() { return hardware_to_json(find_gpu("a100-80g")); }

TEST(HardwareJson, EveryBuiltinRoundTrips) {
  for (const Hardware& hw : builtin_gpus()) {
    json first = hardware_to_json(hw);
    Hardware back = hardware_from_json(first);
    EXPECT_EQ(hardware_to_json(back), first) << hw.name;
    EXPECT_EQ(back.name, hw.name);
    EXPECT_EQ(back.device_memory_bytes, hw.device_memory_bytes);
    EXPECT_EQ(back.peak_flops_bf16, hw.peak_flops_bf16);
    EXPECT_EQ(back.cpu_adam_params_per_s, hw.cpu_adam_params_per_s);
    EXPECT_EQ(back.gpus_per_node, hw.gpus_per_node);
    EXPECT_EQ(back.host_pcie_bandwidth, hw.host_pcie_bandwidth);
    EXPECT_EQ(back.network_bandwidth, hw.network_bandwidth);
    EXPECT_EQ(back.collective_step_latency, hw.collective_step_latency);
    EXPECT_EQ(back.network_step_latency, hw.network_step_latency);
    // Through text as well: doubles print with enough digits to round-trip.
    EXPECT_EQ(hardware_to_json(hardware_from_json(json::parse(first.dump()))), first) << hw.name;
  }
}

TEST(HardwareJson, UsesStructFieldNames) {
  json j = a100();
  // 24 fields, and the three fitted efficiencies the A100 profile sets
  // (Note [Fitted efficiencies]).
  EXPECT_EQ(j.size(), 27u);
  EXPECT_EQ(j["matmul_half_dim"], 64);
  EXPECT_EQ(j["device_memory_bytes"], 85899345920u);
  EXPECT_EQ(j["peak_flops_bf16"], 312e12);
  EXPECT_TRUE(j.contains("launch_latency"));
}

TEST(HardwareJson, NodeFields) {
  json j = a100();
  EXPECT_EQ(j["gpus_per_node"], 8);
  EXPECT_EQ(j["host_pcie_bandwidth"], 100e9);
  EXPECT_EQ(j["network_bandwidth"], 25e9);
  EXPECT_EQ(j["collective_step_latency"], 3.4e-6);
  EXPECT_EQ(j["network_step_latency"], 14e-6);
  j["gpus_per_node"] = 4;
  j["network_bandwidth"] = 12.5e9;
  const Hardware hw = hardware_from_json(j);
  EXPECT_EQ(hw.gpus_per_node, 4);
  EXPECT_EQ(hw.network_bandwidth, 12.5e9);
  EXPECT_EQ(hardware_to_json(hw), j);
  for (const char* key : {"gpus_per_node", "host_pcie_bandwidth", "network_bandwidth",
                          "collective_step_latency", "network_step_latency"}) {
    j = a100();
    j.erase(key);
    EXPECT_EQ(error_of(j), fmt::format("hardware profile: missing field '{}'", key));
  }
  j = a100();
  j["gpus_per_node"] = 0;
  EXPECT_EQ(error_of(j), "hardware profile: field 'gpus_per_node' must be at least 1, got 0");
  j["gpus_per_node"] = -8;
  EXPECT_EQ(error_of(j), "hardware profile: field 'gpus_per_node' must be at least 1, got -8");
  j["gpus_per_node"] = 1025;
  EXPECT_EQ(error_of(j), "hardware profile: field 'gpus_per_node' must be at most 1024, got 1025");
  j["gpus_per_node"] = 2.5;
  EXPECT_EQ(error_of(j), "hardware profile: field 'gpus_per_node' must be an integer");
  j["gpus_per_node"] = "8";
  EXPECT_EQ(error_of(j), "hardware profile: field 'gpus_per_node' must be a number, got string");
  j = a100();
  j["network_bandwidth"] = 0;
  EXPECT_EQ(error_of(j), "hardware profile: field 'network_bandwidth' must be positive");
  j = a100();
  j["collective_step_latency"] = 0;  // free steps are allowed
  EXPECT_EQ(hardware_from_json(j).collective_step_latency, 0);
}

TEST(HardwareJson, DescriptionIsOptional) {
  json j = a100();
  j.erase("description");
  EXPECT_EQ(hardware_from_json(j).description, "");
}

TEST(HardwareJson, MissingField) {
  json j = a100();
  j.erase("hbm_bandwidth");
  EXPECT_EQ(error_of(j), "hardware profile: missing field 'hbm_bandwidth'");
  j = a100();
  j.erase("name");
  EXPECT_EQ(error_of(j), "hardware profile: missing field 'name'");
}

TEST(HardwareJson, UnknownField) {
  json j = a100();
  j["hbm_bandwith"] = 1e12;
  EXPECT_EQ(error_of(j), "hardware profile: unknown field \"hbm_bandwith\"");
  j = a100();
  j["a\nb"] = 1;  // the message stays on one line
  EXPECT_EQ(error_of(j), "hardware profile: unknown field \"a\\nb\"");
}

// Note [Fitted efficiencies]: optional, written only when set, range-checked.
TEST(HardwareJson, FittedEfficiencies) {
  json j = a100();
  for (const char* key : {"matmul_efficiency", "matmul_half_dim", "attention_efficiency"}) {
    j.erase(key);
  }
  EXPECT_EQ(hardware_from_json(j).matmul_efficiency, 0);
  j["matmul_efficiency"] = 0.7;
  j["matmul_half_dim"] = 96;
  j["attention_efficiency"] = 0.5;
  const Hardware hw = hardware_from_json(j);
  EXPECT_EQ(hw.matmul_efficiency, 0.7);
  EXPECT_EQ(hw.matmul_half_dim, 96);
  EXPECT_EQ(hw.attention_efficiency, 0.5);
  const json back = hardware_to_json(hw);
  EXPECT_EQ(back.at("matmul_half_dim"), 96);
  json without = j;
  without.erase("matmul_efficiency");
  without.erase("matmul_half_dim");
  without.erase("attention_efficiency");
  EXPECT_FALSE(hardware_to_json(hardware_from_json(without)).contains("matmul_efficiency"));
  j["matmul_efficiency"] = 1.5;
  EXPECT_EQ(error_of(j),
            "hardware profile: field 'matmul_efficiency' must be a number in [0, 1], got 1.5");
  j["matmul_efficiency"] = "fast";
  EXPECT_EQ(error_of(j),
            "hardware profile: field 'matmul_efficiency' must be a number in [0, 1], got \"fast\"");
}

TEST(HardwareJson, Negative) {
  json j = a100();
  j["h2d_bandwidth"] = -25e9;
  EXPECT_EQ(error_of(j), "hardware profile: field 'h2d_bandwidth' must not be negative");
  j = a100();
  j["device_memory_bytes"] = -1;
  EXPECT_EQ(error_of(j), "hardware profile: field 'device_memory_bytes' must not be negative");
}

TEST(HardwareJson, WrongType) {
  json j = a100();
  j["peak_flops_fp32"] = "19.5e12";
  EXPECT_EQ(error_of(j), "hardware profile: field 'peak_flops_fp32' must be a number, got string");
  j = a100();
  j["name"] = 7;
  EXPECT_EQ(error_of(j), "hardware profile: field 'name' must be a string, got number");
  j = a100();
  j["host_memory_bytes"] = 1.5e12;
  EXPECT_EQ(error_of(j),
            "hardware profile: field 'host_memory_bytes' must be an integer number of bytes");
  j = a100();
  j["launch_latency"] = nullptr;
  EXPECT_EQ(error_of(j), "hardware profile: field 'launch_latency' must be a number, got null");
  EXPECT_EQ(error_of(json::array()), "hardware profile: expected a JSON object, got array");
}

TEST(HardwareJson, ZeroAndOutOfRange) {
  json j = a100();
  j["device_memory_bytes"] = 0;
  EXPECT_EQ(error_of(j), "hardware profile: field 'device_memory_bytes' must be positive");
  j = a100();
  j["device_memory_bytes"] = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(error_of(j), "hardware profile: field 'device_memory_bytes' exceeds 2^62 bytes");
  j = a100();
  j["hbm_bandwidth"] = 0;
  EXPECT_EQ(error_of(j), "hardware profile: field 'hbm_bandwidth' must be positive");
  j = a100();
  j["compute_efficiency"] = 1.5;
  EXPECT_EQ(error_of(j), "hardware profile: field 'compute_efficiency' must be in (0, 1], got 1.5");
  j = a100();
  j["name"] = "";
  EXPECT_EQ(error_of(j), "hardware profile: field 'name' must not be empty");
  // Zero is fine where it means "unsupported" or "free".
  j = a100();
  j["peak_flops_bf16"] = 0;
  j["launch_latency"] = 0;
  EXPECT_EQ(hardware_from_json(j).peak_flops_bf16, 0);
}

TEST(HardwareJson, NanAndInfinity) {
  json j = a100();
  j["pcie_latency"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(error_of(j), "hardware profile: field 'pcie_latency' must be finite");
  j = a100();
  j["hbm_bandwidth"] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(error_of(j), "hardware profile: field 'hbm_bandwidth' must be finite");
}

class HardwareFile : public ::testing::Test {
 protected:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("memwall_hw_test_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  static std::string error_of_file(const std::string& path) {
    try {
      read_hardware_file(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(HardwareFile, ReadsAProfile) {
  json j = a100();
  j["name"] = "my-gpu";
  Hardware hw = read_hardware_file(write("gpu.json", j.dump(2)));
  EXPECT_EQ(hw.name, "my-gpu");
  EXPECT_EQ(hw.hbm_bandwidth, 2039e9);
}

TEST_F(HardwareFile, ErrorsNameThePath) {
  std::string missing = (dir_ / "nope.json").string();
  EXPECT_EQ(error_of_file(missing).rfind("cannot open hardware file '" + missing + "'", 0), 0u);

  // Malformed JSON: one line in memwall's words, with line and column.
  std::string bad = write("bad.json", "{\"name\": \"x\",\n  oops}");
  EXPECT_EQ(error_of_file(bad),
            "hardware file '" + bad +
                "': invalid JSON at line 2, column 3: expected a string (an object key)");
  std::string typo = write("typo.json", "{ x");
  EXPECT_EQ(error_of_file(typo),
            "hardware file '" + typo +
                "': invalid JSON at line 1, column 3: expected a string (an object key)");
  std::string trailing = write("trailing.json", a100().dump() + "\n}");
  EXPECT_EQ(error_of_file(trailing), "hardware file '" + trailing +
                                         "': invalid JSON at line 2, column 1: unexpected '}' "
                                         "after the top-level object");

  json j = a100();
  j.erase("nvme_read_bandwidth");
  std::string incomplete = write("incomplete.json", j.dump());
  EXPECT_EQ(error_of_file(incomplete), "hardware file '" + incomplete +
                                           "': hardware profile: missing field "
                                           "'nvme_read_bandwidth'");

  EXPECT_EQ(error_of_file(dir_.string()), "hardware file '" + dir_.string() + "' is a directory");
  std::string empty = write("empty.json", "");
  EXPECT_EQ(
      error_of_file(empty),
      "hardware file '" + empty + "': invalid JSON at line 1, column 1: unexpected end of input");
}

// `memwall gpus --json` prints an array of every built-in profile; a file
// holding it gives back each profile exactly, picked by name.
TEST_F(HardwareFile, ArraysOfProfilesRoundTrip) {
  json all = json::array();
  for (const Hardware& hw : builtin_gpus()) all.push_back(hardware_to_json(hw));
  const std::string path = write("gpus.json", all.dump(2));
  for (const Hardware& hw : builtin_gpus()) {
    EXPECT_EQ(hardware_to_json(read_hardware_file(path, hw.name)), hardware_to_json(hw)) << hw.name;
  }
  // Edited in place, the edit is read back.
  all[4]["gpus_per_node"] = 4;
  all[4]["host_memory_bytes"] = 1099511627776u;
  const std::string edited = write("edited.json", all.dump(2));
  const Hardware h100 = read_hardware_file(edited, "h100-80g");
  EXPECT_EQ(h100.gpus_per_node, 4);
  EXPECT_EQ(h100.host_memory_bytes, 1099511627776u);
  // An array of one needs no name; a name it does not have is an error, as
  // for a file of one profile: --gpu is never ignored.
  json one = json::array({a100()});
  one[0]["name"] = "my-gpu";
  const std::string one_path = write("one.json", one.dump());
  EXPECT_EQ(read_hardware_file(one_path).name, "my-gpu");
  EXPECT_EQ(read_hardware_file(one_path, "my-gpu").name, "my-gpu");
  EXPECT_THROW(read_hardware_file(one_path, "t4"), Error);
  const std::string object_path = write("object.json", one[0].dump());
  try {
    read_hardware_file(object_path, "t4");
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "hardware file '" + object_path +
                                         "': holds one profile, named 'my-gpu', not 't4' (--gpu)");
  }
  // Several profiles and no --gpu: which one is not guessed.
  try {
    read_hardware_file(path);
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "hardware file '" + path +
                  "': holds 10 profiles: name one with --gpu (v100-16g, v100-32g, a100-40g, "
                  "a100-80g, h100-80g, h200, l4, t4, rtx3090, rtx4090)");
  }
  // Errors name the file and the choice.
  EXPECT_EQ(error_of_file(write("none.json", "[]")),
            "hardware file '" + (dir_ / "none.json").string() +
                "': holds an empty array, not a hardware profile");
  try {
    read_hardware_file(path, "a100");
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "hardware file '" + path +
                  "': holds 10 profiles and none is named 'a100' (--gpu): v100-16g, v100-32g, "
                  "a100-40g, a100-80g, h100-80g, h200, l4, t4, rtx3090, rtx4090");
  }
  json twice = json::array({a100(), a100()});
  EXPECT_THROW(read_hardware_file(write("twice.json", twice.dump()), "a100-80g"), Error);
  // A bad field of the chosen profile names the file.
  all[3].erase("hbm_bandwidth");
  const std::string broken = write("broken.json", all.dump());
  try {
    read_hardware_file(broken, "a100-80g");
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "hardware file '" + broken + "': hardware profile: missing field 'hbm_bandwidth'");
  }
}

}  // namespace
}  // namespace memwall
