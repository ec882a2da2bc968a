// Renumbering call records (calls.h).
#include "memwall/graph/calls.h"

#include "memwall/graph/error.h"

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

nlohmann::json call_object(std::string_view call) {
  nlohmann::json v = nlohmann::json::parse(call, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || !v.is_object()) fail("a call record is not a JSON object");
  return v;
}

}  // namespace

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

}  // namespace memwall
