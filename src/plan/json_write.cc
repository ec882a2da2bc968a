// Writing memwall.plan/1 JSON.
//
// Streams text: plans of millions of steps are common, and one step per line
// keeps them diffable. The writer refuses what the reader would reject (with
// the reader's message), so that a written plan always reads back; it fails
// before the disk is touched. plan_to_json() parses this text, so the DOM and
// the file can never disagree.
#include <charconv>
#include <span>
#include <string>

#include "memwall/base/error.h"
#include "memwall/base/json_string.h"
#include "memwall/base/output_files.h"
#include "memwall/base/quote.h"
#include "memwall/plan/plan.h"

namespace memwall {
namespace {

using namespace std::string_view_literals;

bool is_step_kind(StepKind kind) { return kind <= StepKind::kFree; }
bool is_tier(Tier tier) { return tier <= Tier::kNvme; }

class Writer {
 public:
  explicit Writer(const Plan& plan) : plan_(plan) {}

  std::string run() {
    // Generous: an unused tail of the reservation is never touched.
    out_.reserve(256 + plan_.graph.size() + plan_.hardware.size() + plan_.steps.size() * 40 +
                 (plan_.placement.size() + plan_.offsets.size()) * 32);
    out_ += "{\"format\": \""sv;
    out_ += kPlanFormat;
    out_ += "\",\n\"graph\": "sv;
    string(plan_.graph, "graph");
    if (!plan_.graph_fingerprint.empty()) {
      out_ += ",\n\"graph_fingerprint\": "sv;
      string(plan_.graph_fingerprint, "graph_fingerprint");
    }
    out_ += ",\n\"hardware\": "sv;
    string(plan_.hardware, "hardware");
    if (plan_.budget > kMaxBytes) {
      fail("plan: \"budget\" is {}, above the limit of 2^62 bytes", plan_.budget);
    }
    out_ += ",\n\"budget\": "sv;
    integer(plan_.budget);
    if (!plan_.placement.empty()) placement();
    out_ += ",\n\"steps\": ["sv;
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      out_ += i == 0 ? "\n"sv : ",\n"sv;
      step(plan_.steps[i], i);
    }
    out_ += "\n]"sv;
    if (!plan_.offsets.empty()) offsets();
    if (!plan_.workspace_offsets.empty()) workspace_offsets();
    if (!plan_.host_reserved.empty()) host_reserved();
    out_ += "}\n"sv;
    return std::move(out_);
  }

 private:
  void step(const Step& s, size_t index) {
    if (!is_step_kind(s.kind)) {
      fail("plan: step {}: unknown step kind {}", index, static_cast<unsigned>(s.kind));
    }
    out_ += "{\"do\":\""sv;
    out_ += to_string(s.kind);
    switch (s.kind) {
      case StepKind::kCompute:
      case StepKind::kRecompute:
        out_ += "\",\"op\":"sv;
        id(s.op, "op", s, index);
        if (s.on == Tier::kHost) {
          out_ += ",\"on\":\"host\""sv;
        } else if (s.on != Tier::kDevice) {
          step_fail(s, index, R"("on" must be "device" or "host", got {})", shown(s.on));
        }
        break;
      case StepKind::kSwapOut:
        out_ += "\",\"buf\":"sv;
        id(s.buf, "buf", s, index);
        if (s.to != Tier::kHost && s.to != Tier::kNvme) {
          step_fail(s, index, R"("to" must be "host" or "nvme", got {})", shown(s.to));
        }
        out_ += ",\"to\":\""sv;
        out_ += to_string(s.to);
        out_ += '"';
        break;
      case StepKind::kSwapIn:
        out_ += "\",\"buf\":"sv;
        id(s.buf, "buf", s, index);
        if (s.to == Tier::kHost) {
          out_ += ",\"to\":\"host\""sv;
        } else if (s.to != Tier::kDevice) {
          step_fail(s, index, R"("to" must be "device" or "host", got {})", shown(s.to));
        }
        break;
      case StepKind::kFree:
        out_ += "\",\"buf\":"sv;
        id(s.buf, "buf", s, index);
        break;
    }
    out_ += '}';
  }

  void placement() {
    out_ += ",\n\"placement\": {"sv;
    bool first = true;
    for (const auto& [buffer, tier] : plan_.placement) {
      key(buffer, "placement", first);
      if (!is_tier(tier)) {
        fail(R"(plan: "placement": buffer {} must be "host", "nvme" or "device", got {})", buffer,
             shown(tier));
      }
      out_ += '"';
      out_ += to_string(tier);
      out_ += '"';
    }
    out_ += "\n}"sv;
  }

  // Note [Offsets per stay]: one offset, or an array of one per stay.
  void offsets() {
    out_ += ",\n\"offsets\": {"sv;
    bool first = true;
    for (const auto& [id, offset] : plan_.offsets) {
      key(id, "offsets", first);
      const auto later = plan_.stay_offsets.find(id);
      one_or_array("offsets", "buffer", id, {&offset, 1},
                   later == plan_.stay_offsets.end() ? std::span<const uint64_t>()
                                                     : std::span<const uint64_t>(later->second));
    }
    out_ += "\n}"sv;
  }
  void workspace_offsets() {
    out_ += ",\n\"workspace_offsets\": {"sv;
    bool first = true;
    for (const auto& [id, runs] : plan_.workspace_offsets) {
      key(id, "workspace_offsets", first);
      if (runs.empty()) fail("plan: \"workspace_offsets\": op {} has no offset", id);
      one_or_array("workspace_offsets", "op", id, runs, {});
    }
    out_ += "\n}"sv;
  }
  void host_reserved() {
    out_ += ",\n\"host_reserved\": ["sv;
    for (size_t i = 0; i < plan_.host_reserved.size(); ++i) {
      const HostReserve& r = plan_.host_reserved[i];
      if (r.bytes > kMaxBytes) {
        fail("plan: \"host_reserved\": {} is {} bytes, above the limit of 2^62 bytes", r.what,
             r.bytes);
      }
      out_ += i == 0 ? "\n{\"what\": "sv : ",\n{\"what\": "sv;
      string(r.what, "host_reserved");
      out_ += ", \"bytes\": "sv;
      integer(r.bytes);
      out_ += '}';
    }
    out_ += "\n]"sv;
  }
  // `head` then `tail`: one offset as a number, more as an array.
  void one_or_array(const char* field, const char* what, int32_t id, std::span<const uint64_t> head,
                    std::span<const uint64_t> tail) {
    const bool array = head.size() + tail.size() > 1;
    if (array) out_ += '[';
    bool comma = false;
    for (const std::span<const uint64_t> part : {head, tail}) {
      for (const uint64_t offset : part) {
        if (offset > kMaxBytes) {
          fail("plan: \"{}\": the offset of {} {} is {}, above the limit of 2^62 bytes", field,
               what, id, offset);
        }
        if (comma) out_ += ',';
        comma = true;
        integer(offset);
      }
    }
    if (array) out_ += ']';
  }

  void key(BufferId buffer, const char* field, bool& first) {
    if (buffer < 0) fail("plan: \"{}\": key \"{}\" is not a buffer id", field, buffer);
    out_ += first ? "\n\""sv : ",\n\""sv;
    first = false;
    integer(buffer);
    out_ += "\":"sv;
  }

  void id(int32_t value, const char* field, const Step& s, size_t index) {
    if (value < 0) {
      step_fail(s, index, "\"{}\" must be a non-negative integer, got {}", field, value);
    }
    integer(value);
  }

  template <typename... Args>
  [[noreturn]] static void step_fail(const Step& s, size_t index,
                                     fmt::format_string<Args...> format, Args&&... args) {
    fail("plan: step {} ({}): {}", index, to_string(s.kind),
         fmt::format(format, std::forward<Args>(args)...));
  }

  // A tier as a message shows it: its name in quotes, or its number when it
  // is none (an uninitialized or corrupted value).
  static std::string shown(Tier tier) {
    if (!is_tier(tier)) return std::to_string(static_cast<unsigned>(tier));
    return detail::in_quotes(to_string(tier));
  }

  template <typename Int>
  void integer(Int value) {
    char text[24];
    const auto result = std::to_chars(text, text + sizeof text, value);
    out_.append(text, result.ptr);
  }

  // JSON text must be UTF-8 (the reader rejects anything else).
  void string(std::string_view text, const char* field) {
    if (!append_json_string(out_, text)) {
      fail("plan: \"{}\" is not valid UTF-8", field);
    }
  }

  const Plan& plan_;
  std::string out_;
};

}  // namespace

std::string plan_to_json_text(const Plan& plan) { return Writer(plan).run(); }

nlohmann::json plan_to_json(const Plan& plan) {
  const std::string text = plan_to_json_text(plan);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("plan: cannot convert to JSON: {}", e.what());  // not expected: the text is JSON
  }
}

void write_plan_file(const Plan& plan, const std::string& path) {
  // The text is complete (or has failed) before the disk is touched.
  write_file_atomically(path, plan_to_json_text(plan));
}

}  // namespace memwall
