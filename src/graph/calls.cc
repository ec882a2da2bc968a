// Renumbering call records (calls.h).
#include "memwall/graph/calls.h"

#include <algorithm>

#include "memwall/base/error.h"
#include "memwall/graph/types.h"

namespace memwall {
namespace {

void remap(nlohmann::json& v, const std::function<CallBuffer(int64_t)>& map) {
  if (v.is_array()) {
    for (nlohmann::json& x : v) remap(x, map);
    return;
  }
  if (!v.is_object()) return;
  if (const auto t = v.find("t"); t != v.end() && t->is_number_integer()) {
    const CallBuffer to = map(t->get<int64_t>());
    if (to.local) {
      v.erase("t");
      v["l"] = to.id;
    } else {
      *t = to.id;
    }
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "results" && it->is_array()) {
      for (nlohmann::json& r : *it) {
        if (!r.is_number_integer()) continue;
        const CallBuffer to = map(r.get<int64_t>());
        r = to.local ? nlohmann::json{{"l", to.id}} : nlohmann::json(to.id);
      }
    } else if (it.key() != "t") {
      remap(*it, map);
    }
  }
}

void strip_identity(nlohmann::json& v) {
  if (v.is_array()) {
    for (nlohmann::json& x : v) strip_identity(x);
    return;
  }
  if (!v.is_object()) return;
  v.erase("t");
  v.erase("l");
  if (v.contains("expr")) v.erase("f");
  for (auto& [key, value] : v.items()) strip_identity(value);
}

std::string signature_of(nlohmann::json v) {
  v.erase("results");
  strip_identity(v);
  return v.dump();
}

}  // namespace

nlohmann::json call_object(std::string_view call) {
  nlohmann::json v = nlohmann::json::parse(call, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || !v.is_object()) fail("a call record is not a JSON object");
  return v;
}

std::string kernel_signature(std::string_view call) { return signature_of(call_object(call)); }

std::vector<std::string> kernel_signatures(std::string_view call) {
  nlohmann::json v = call_object(call);
  const auto steps = v.find("steps");
  if (steps == v.end() || !steps->is_array()) return {signature_of(std::move(v))};
  std::vector<std::string> out;
  for (nlohmann::json& part : *steps) {
    if (!part.is_object()) fail("a fused call's step is not a JSON object");
    out.push_back(signature_of(std::move(part)));
  }
  return out;
}

nlohmann::json remap_call(std::string_view call, const std::function<CallBuffer(int64_t)>& map) {
  nlohmann::json v = nlohmann::json::parse(call, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) fail("a call record is not JSON");
  remap(v, map);
  return v;
}

std::string remap_call_text(std::string_view call, const std::function<CallBuffer(int64_t)>& map) {
  return remap_call(call, map).dump();
}

namespace {

bool names_buffer(const nlohmann::json& v, int64_t id) {
  if (v.is_array()) {
    return std::any_of(v.begin(), v.end(),
                       [&](const nlohmann::json& x) { return names_buffer(x, id); });
  }
  if (!v.is_object()) return false;
  if (const auto t = v.find("t");
      t != v.end() && t->is_number_integer() && t->get<int64_t>() == id) {
    return true;
  }
  return std::any_of(v.begin(), v.end(),
                     [&](const nlohmann::json& x) { return names_buffer(x, id); });
}

// The whole of `b`: a view at offset 0 with at least as many elements as it
// has (a ZeRO rank's parameter is a shard of the view its call names, which
// the executor cuts to the shard: Note [Shards at run time]).
bool views_whole(const nlohmann::json& ref, const Buffer& b) {
  const auto size = ref.find("size");
  if (ref.value("offset", int64_t{-1}) != 0 || size == ref.end() || !size->is_array()) return false;
  int64_t elements = 1;
  for (const nlohmann::json& d : *size) {
    if (!d.is_number_integer()) return false;
    elements *= d.get<int64_t>();
  }
  int64_t expected = 1;
  for (const int64_t d : b.shape) expected *= d;
  return elements >= expected;
}

}  // namespace

bool call_only_overwrites(const nlohmann::json& call, const Buffer& b) {
  const auto steps = call.find("steps");
  if (steps == call.end() || !steps->is_array()) return false;
  bool overwritten = false;
  for (const nlohmann::json& step : *steps) {
    const auto args = step.find("args");
    if (args == step.end() || !args->is_array()) return false;
    const bool copy_into = step.value("op", std::string()) == "aten::copy_" && !args->empty() &&
                           (*args)[0].is_object() && (*args)[0].value("t", int64_t{-1}) == b.id;
    if (copy_into) {
      if (!views_whole((*args)[0], b)) return false;
      overwritten = true;
    }
    for (size_t i = copy_into ? 1 : 0; i < args->size(); ++i) {
      if (names_buffer((*args)[i], b.id)) return false;
    }
    if (const auto kwargs = step.find("kwargs");
        kwargs != step.end() && names_buffer(*kwargs, b.id)) {
      return false;
    }
  }
  return overwritten;
}

}  // namespace memwall
