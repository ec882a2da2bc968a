// Hardware profiles as JSON: the same field names as struct Hardware. Every
// field is required except description; unknown fields are rejected so that a
// typo ("hbm_bandwith") cannot silently fall back to a default. A file holds
// one profile or an array of them (what `memwall gpus --json` prints).
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/json_cursor.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

using nlohmann::json;

// What a numeric field may hold.
enum class Range {
  kPositive,     // > 0 (divided by, or a capacity)
  kNonNegative,  // >= 0 (0 = unsupported / free)
  kFraction,     // in (0, 1]
};

struct NumberField {
  std::string_view key;
  double Hardware::*member;
  Range range;
};

struct BytesField {
  std::string_view key;
  uint64_t Hardware::*member;
};

struct CountField {
  std::string_view key;
  int Hardware::*member;
  int max;
};

constexpr BytesField kBytesFields[] = {
    {"device_memory_bytes", &Hardware::device_memory_bytes},
    {"host_memory_bytes", &Hardware::host_memory_bytes},
};

constexpr CountField kCountFields[] = {
    {"gpus_per_node", &Hardware::gpus_per_node, kMaxGpusPerNode},
};

// In struct order. fp32 must be positive: fp16/bf16 fall back to it.
constexpr NumberField kNumberFields[] = {
    {"peak_flops_fp32", &Hardware::peak_flops_fp32, Range::kPositive},
    {"peak_flops_tf32", &Hardware::peak_flops_tf32, Range::kNonNegative},
    {"peak_flops_fp16", &Hardware::peak_flops_fp16, Range::kNonNegative},
    {"peak_flops_bf16", &Hardware::peak_flops_bf16, Range::kNonNegative},
    {"hbm_bandwidth", &Hardware::hbm_bandwidth, Range::kPositive},
    {"h2d_bandwidth", &Hardware::h2d_bandwidth, Range::kPositive},
    {"d2h_bandwidth", &Hardware::d2h_bandwidth, Range::kPositive},
    {"pcie_latency", &Hardware::pcie_latency, Range::kNonNegative},
    {"nvme_read_bandwidth", &Hardware::nvme_read_bandwidth, Range::kPositive},
    {"nvme_write_bandwidth", &Hardware::nvme_write_bandwidth, Range::kPositive},
    {"cpu_adam_params_per_s", &Hardware::cpu_adam_params_per_s, Range::kPositive},
    {"interconnect_bandwidth", &Hardware::interconnect_bandwidth, Range::kPositive},
    {"host_pcie_bandwidth", &Hardware::host_pcie_bandwidth, Range::kPositive},
    {"network_bandwidth", &Hardware::network_bandwidth, Range::kPositive},
    {"collective_step_latency", &Hardware::collective_step_latency, Range::kNonNegative},
    {"network_step_latency", &Hardware::network_step_latency, Range::kNonNegative},
    {"compute_efficiency", &Hardware::compute_efficiency, Range::kFraction},
    {"memory_efficiency", &Hardware::memory_efficiency, Range::kFraction},
    {"launch_latency", &Hardware::launch_latency, Range::kNonNegative},
};

// A key from the input, quoted and escaped so the message stays one line.
std::string quoted(const std::string& key) {
  return json(key).dump(-1, ' ', false, json::error_handler_t::replace);
}

bool is_known_key(std::string_view key) {
  if (key == "name" || key == "description" || key == "kernels" || key == "device_is_host_cpu" ||
      key == "copy_contention" || key == "op_overhead" || key == "matmul_efficiency" ||
      key == "matmul_half_dim" || key == "attention_efficiency") {
    return true;
  }
  for (const auto& f : kBytesFields) {
    if (f.key == key) return true;
  }
  for (const auto& f : kNumberFields) {
    if (f.key == key) return true;
  }
  for (const auto& f : kCountFields) {
    if (f.key == key) return true;
  }
  return false;
}

const json& require(const json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end()) fail("hardware profile: missing field '{}'", key);
  return *it;
}

std::string read_string(const json& value, std::string_view key) {
  if (!value.is_string()) {
    fail("hardware profile: field '{}' must be a string, got {}", key, value.type_name());
  }
  return value.get<std::string>();
}

uint64_t read_bytes(const json& value, std::string_view key) {
  if (!value.is_number()) {
    fail("hardware profile: field '{}' must be a number, got {}", key, value.type_name());
  }
  if (value.is_number_float()) {
    fail("hardware profile: field '{}' must be an integer number of bytes", key);
  }
  // Literals like 0 or -1 are stored as signed integers.
  if (!value.is_number_unsigned() && value.get<int64_t>() < 0) {
    fail("hardware profile: field '{}' must not be negative", key);
  }
  uint64_t bytes = value.get<uint64_t>();
  if (bytes == 0) fail("hardware profile: field '{}' must be positive", key);
  if (bytes > kMaxBytes) fail("hardware profile: field '{}' exceeds 2^62 bytes", key);
  return bytes;
}

int read_count(const json& value, const CountField& field) {
  if (!value.is_number()) {
    fail("hardware profile: field '{}' must be a number, got {}", field.key, value.type_name());
  }
  if (value.is_number_float()) fail("hardware profile: field '{}' must be an integer", field.key);
  if (!value.is_number_unsigned() && value.get<int64_t>() < 1) {
    fail("hardware profile: field '{}' must be at least 1, got {}", field.key, value.dump());
  }
  if (value.get<uint64_t>() > static_cast<uint64_t>(field.max)) {
    fail("hardware profile: field '{}' must be at most {}, got {}", field.key, field.max,
         value.dump());
  }
  return static_cast<int>(value.get<uint64_t>());
}

double read_number(const json& value, const NumberField& field) {
  if (!value.is_number()) {
    fail("hardware profile: field '{}' must be a number, got {}", field.key, value.type_name());
  }
  double x = value.get<double>();
  if (!std::isfinite(x)) fail("hardware profile: field '{}' must be finite", field.key);
  if (x < 0) fail("hardware profile: field '{}' must not be negative", field.key);
  if (field.range == Range::kPositive && x == 0) {
    fail("hardware profile: field '{}' must be positive", field.key);
  }
  if (field.range == Range::kFraction && (x == 0 || x > 1)) {
    fail("hardware profile: field '{}' must be in (0, 1], got {}", field.key, x);
  }
  return x;
}

// "kernels": kernel signature -> seconds (Note [Measured kernels]).
std::map<std::string, double> read_kernels(const json& value) {
  if (!value.is_object()) {
    fail("hardware profile: field 'kernels' must be an object, got {}", value.type_name());
  }
  std::map<std::string, double> kernels;
  for (const auto& item : value.items()) {
    const json& s = item.value();
    if (!s.is_number() || !std::isfinite(s.get<double>()) || s.get<double>() <= 0) {
      fail("hardware profile: kernel {} must have a positive number of seconds, got {}",
           quoted(item.key().substr(0, 80)), s.dump());
    }
    kernels.emplace(item.key(), s.get<double>());
  }
  return kernels;
}

// "copy_contention": {"compute": x, "copy": y} (Note [Copy contention]).
Hardware::CopyContention read_contention(const json& value) {
  constexpr double kMaxSlowdown = Hardware::CopyContention::kMaxSlowdown;
  if (!value.is_object()) {
    fail("hardware profile: field 'copy_contention' must be an object, got {}", value.type_name());
  }
  for (const auto& item : value.items()) {
    if (item.key() != "compute" && item.key() != "copy") {
      fail(
          "hardware profile: copy_contention: unknown field {} (it has \"compute\" and "
          "\"copy\")",
          quoted(item.key()));
    }
  }
  Hardware::CopyContention c;
  for (auto [key, member] : {std::pair{"compute", &Hardware::CopyContention::compute},
                             std::pair{"copy", &Hardware::CopyContention::copy}}) {
    const auto it = value.find(key);
    if (it == value.end()) fail("hardware profile: copy_contention: missing field '{}'", key);
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 1 ||
        it->get<double>() > kMaxSlowdown) {
      fail("hardware profile: copy_contention: '{}' must be a slowdown in [1, {}], got {}", key,
           kMaxSlowdown, it->dump());
    }
    c.*member = it->get<double>();
  }
  return c;
}

// The JSON of `text`; a syntax error is one line in memwall's words
// ("<where>: invalid JSON at line L, column C: expected ...").
json parse_text(const std::string& text, const std::string& where) {
  detail::JsonCursor cursor(text, where.c_str());
  cursor.skip_value();
  cursor.expect_end();
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // The cursor accepts only what RFC 8259 allows, as nlohmann does; this
    // is a backstop, reported by position.
    const auto* parse = dynamic_cast<const json::parse_error*>(&e);
    fail("{}: invalid JSON near byte {}", where, parse ? parse->byte : 0);
  }
}

// The name of a profile object, or "" when it has none (reported later).
std::string name_of(const json& profile) {
  const auto name = profile.is_object() ? profile.find("name") : profile.end();
  return name != profile.end() && name->is_string() ? name->get<std::string>() : std::string();
}

// The profile of a document: an object, or an array (`memwall gpus --json`)
// and then its only profile or the one named `select` (--gpu). A `select`
// that names no profile of the file is an error, never ignored.
const json& pick(const json& profiles, std::string_view select) {
  if (!profiles.is_array()) {
    if (!select.empty() && profiles.is_object() && name_of(profiles) != select) {
      fail("holds one profile, named '{}', not '{}' (--gpu)", name_of(profiles), select);
    }
    return profiles;
  }
  if (profiles.empty()) fail("holds an empty array, not a hardware profile");
  if (profiles.size() == 1 && (select.empty() || name_of(profiles[0]) == select)) {
    return profiles[0];
  }
  if (select.empty()) {
    std::string names;
    for (const json& p : profiles) names += (names.empty() ? "" : ", ") + name_of(p);
    fail("holds {} profiles: name one with --gpu ({})", profiles.size(), names);
  }
  const json* found = nullptr;
  std::string names;
  for (const json& p : profiles) {
    const auto name = p.is_object() ? p.find("name") : p.end();
    if (name == p.end() || !name->is_string()) continue;
    names += names.empty() ? "" : ", ";
    names += name->get<std::string>();
    if (name->get<std::string>() != select) continue;
    if (found) fail("holds two profiles named '{}'", select);
    found = &p;
  }
  if (!found) {
    fail("holds {} profiles and none is named '{}' (--gpu): {}", profiles.size(), select, names);
  }
  return *found;
}

}  // namespace

Hardware hardware_from_json(const json& object) {
  if (!object.is_object()) {
    fail("hardware profile: expected a JSON object, got {}", object.type_name());
  }
  for (const auto& item : object.items()) {
    if (!is_known_key(item.key())) fail("hardware profile: unknown field {}", quoted(item.key()));
  }
  Hardware hw;
  hw.name = read_string(require(object, "name"), "name");
  if (hw.name.empty()) fail("hardware profile: field 'name' must not be empty");
  if (auto it = object.find("description"); it != object.end()) {
    hw.description = read_string(*it, "description");
  }
  for (const auto& f : kBytesFields) hw.*f.member = read_bytes(require(object, f.key), f.key);
  for (const auto& f : kNumberFields) hw.*f.member = read_number(require(object, f.key), f);
  for (const auto& f : kCountFields) hw.*f.member = read_count(require(object, f.key), f);
  if (auto it = object.find("kernels"); it != object.end()) hw.kernel_seconds = read_kernels(*it);
  if (auto it = object.find("device_is_host_cpu"); it != object.end()) {
    if (!it->is_boolean()) {
      fail("hardware profile: field 'device_is_host_cpu' must be true or false, got {}",
           it->type_name());
    }
    hw.device_is_host_cpu = it->get<bool>();
  }
  if (auto it = object.find("copy_contention"); it != object.end()) {
    hw.copy_contention = read_contention(*it);
  }
  if (auto it = object.find("op_overhead"); it != object.end()) {  // Note [Op overhead]
    if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 1)) {
      fail("hardware profile: field 'op_overhead' must be seconds in [0, 1], got {}", it->dump());
    }
    hw.op_overhead = it->get<double>();
  }
  // Note [Fitted efficiencies]: optional, 0 when absent.
  for (const auto& [key, member, most] :
       {std::tuple{"matmul_efficiency", &Hardware::matmul_efficiency, 1.0},
        std::tuple{"matmul_half_dim", &Hardware::matmul_half_dim, 1e6},
        std::tuple{"attention_efficiency", &Hardware::attention_efficiency,
                   kMaxAttentionEfficiency}}) {
    if (auto it = object.find(key); it != object.end()) {
      if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= most)) {
        fail("hardware profile: field '{}' must be a number in [0, {}], got {}", key, most,
             it->dump());
      }
      hw.*member = it->get<double>();
    }
  }
  return hw;
}

Hardware read_hardware_file(const std::string& path, std::string_view select) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("hardware file '{}' is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open hardware file '{}': {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("cannot read hardware file '{}'", path);
  const std::string where = fmt::format("hardware file '{}'", path);
  const json document = parse_text(text.str(), where);
  try {
    return hardware_from_json(pick(document, select));
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

json hardware_to_json(const Hardware& hw) {
  json object = json::object();
  object["name"] = hw.name;
  object["description"] = hw.description;
  for (const auto& f : kBytesFields) object[std::string(f.key)] = hw.*f.member;
  for (const auto& f : kNumberFields) object[std::string(f.key)] = hw.*f.member;
  for (const auto& f : kCountFields) object[std::string(f.key)] = hw.*f.member;
  if (hw.device_is_host_cpu) object["device_is_host_cpu"] = true;
  if (hw.copy_contention != Hardware::CopyContention{}) {
    object["copy_contention"] = {{"compute", hw.copy_contention.compute},
                                 {"copy", hw.copy_contention.copy}};
  }
  if (hw.op_overhead > 0) object["op_overhead"] = hw.op_overhead;
  if (hw.matmul_efficiency > 0) object["matmul_efficiency"] = hw.matmul_efficiency;
  if (hw.matmul_half_dim > 0) object["matmul_half_dim"] = hw.matmul_half_dim;
  if (hw.attention_efficiency > 0) object["attention_efficiency"] = hw.attention_efficiency;
  if (!hw.kernel_seconds.empty()) {
    json kernels = json::object();
    for (const auto& [signature, seconds] : hw.kernel_seconds) kernels[signature] = seconds;
    object["kernels"] = std::move(kernels);
  }
  return object;
}

}  // namespace memwall
