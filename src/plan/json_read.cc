// Reading memwall.plan/1 JSON (DESIGN.md, "Plan").
//
// Strict, like the graph reader, and on the same streaming cursor: a plan for
// a large model has millions of steps, so no DOM is built. Which error wins:
// a syntax error or a wrong "format", whichever comes first in the text (they
// stop the reader); otherwise the first problem in document order, reported
// once the whole text has been read; a missing "format" only when nothing
// else is wrong.
#include <array>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "memwall/base/error.h"
#include "memwall/base/file_text.h"
#include "memwall/base/json_cursor.h"
#include "memwall/base/json_fields.h"
#include "memwall/base/quote.h"
#include "memwall/plan/plan.h"

namespace memwall {
namespace {

using detail::Fields;
using detail::in_quotes;
using detail::JsonCursor;
using detail::JsonType;
using detail::Problem;
using detail::read_string;
using detail::read_uint;
using detail::type_name;

constexpr uint64_t kMaxId = std::numeric_limits<int32_t>::max();

// ---- Values: on a bad one they note a problem and skip it. ---------------------

int32_t read_id(JsonCursor& cur, const char* field, Problem& problem) {
  return static_cast<int32_t>(
      read_uint(cur, kMaxId, problem, [&] { return fmt::format("\"{}\"", field); }));
}

template <typename Enum>
constexpr uint32_t bit(Enum value) {
  return uint32_t{1} << static_cast<unsigned>(value);
}

// A tier or step kind whose bit is in `allowed`. Otherwise std::nullopt, and
// `got` describes the value for a "must be ..., got X" message: its type, or
// the string in quotes.
template <typename Enum, typename Parse>
std::optional<Enum> read_name(JsonCursor& cur, Parse parse, uint32_t allowed, std::string& got) {
  if (!cur.at_string()) {
    got = type_name(cur.peek_type());
    cur.skip_value();
    return std::nullopt;
  }
  const std::string_view text = cur.parse_string();
  const std::optional<Enum> value = parse(text);
  if (!value || !(allowed & bit(*value))) {
    got = in_quotes(text);
    return std::nullopt;
  }
  return value;
}

// Keys of "placement" and "offsets": canonical decimal buffer ids, so that
// one buffer has one spelling and duplicates are plain to see.
std::optional<BufferId> parse_id_key(std::string_view key) {
  if (key.empty() || key.size() > 10 || (key[0] == '0' && key.size() > 1)) return std::nullopt;
  uint64_t value = 0;
  for (const char c : key) {
    if (!detail::is_digit(c)) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > kMaxId) return std::nullopt;
  return static_cast<BufferId>(value);
}

// Writers emit keys in increasing order: appending at the end is O(1) then.
template <typename Value>
bool insert_key(std::map<BufferId, Value>& map, BufferId id, Value value) {
  if (map.empty() || std::prev(map.end())->first < id) {
    map.emplace_hint(map.end(), id, value);
    return true;
  }
  return map.emplace(id, value).second;
}

// ---- Steps -------------------------------------------------------------------

constexpr std::array<std::string_view, 5> kStepFields = {"\"do\"", "\"op\"", "\"on\"", "\"buf\"",
                                                         "\"to\""};
enum StepField { kDo, kOp, kOn, kBuf, kTo };

constexpr uint32_t kAllKinds = bit(StepKind::kCompute) | bit(StepKind::kRecompute) |
                               bit(StepKind::kSwapOut) | bit(StepKind::kSwapIn) |
                               bit(StepKind::kFree);
constexpr uint32_t kAllTiers = bit(Tier::kDevice) | bit(Tier::kHost) | bit(Tier::kNvme);

bool runs_an_op(StepKind kind) {
  return kind == StepKind::kCompute || kind == StepKind::kRecompute;
}

// The fields (bits of kStepFields, "do" aside) a kind takes, and as text.
uint32_t takes(StepKind kind) {
  if (runs_an_op(kind)) return bit(kOp) | bit(kOn);
  if (kind == StepKind::kSwapOut || kind == StepKind::kSwapIn) return bit(kBuf) | bit(kTo);
  return bit(kBuf);
}
std::string_view takes_text(StepKind kind) {
  if (runs_an_op(kind)) return "\"op\" and optionally \"on\"";
  if (kind == StepKind::kSwapOut) return "\"buf\" and \"to\"";
  if (kind == StepKind::kSwapIn) return "\"buf\" and optionally \"to\"";
  return "\"buf\"";
}

// Reads one step; returns whether "do" named a kind (for the message label).
bool read_step(JsonCursor& cur, Step& step, Problem& p) {
  Fields fields(kStepFields);
  bool known = false;  // "do" has been read and names a kind
  std::string got;
  std::string bad_to;  // "to" as shown when it names no tier
  const auto unexpected = [&](int field) {
    p.note("unexpected field \"{}\" ({} takes {})", fields.name(static_cast<size_t>(field)),
           to_string(step.kind), takes_text(step.kind));
  };
  fields.read(cur, p, [&](int field) {
    if (field > kDo && known && !(takes(step.kind) & bit(field))) {
      unexpected(field);
      cur.skip_value();
      return;
    }
    switch (field) {
      case kDo:
        if (const auto kind = read_name<StepKind>(cur, parse_step_kind, kAllKinds, got)) {
          step.kind = *kind;
          known = true;
        } else {
          p.note(R"("do" must be "compute", "recompute", "swap_out", "swap_in" or "free", got {})",
                 got);
        }
        break;
      case kOp:
        step.op = read_id(cur, "op", p);
        break;
      case kOn:
        if (const auto on =
                read_name<Tier>(cur, parse_tier, bit(Tier::kDevice) | bit(Tier::kHost), got)) {
          step.on = *on;
        } else {
          p.note(R"("on" must be "device" or "host", got {})", got);
        }
        break;
      case kBuf:
        step.buf = read_id(cur, "buf", p);
        break;
      case kTo:
        // A swap_out goes down to host or nvme, a swap_in up to the device or
        // the host; before "do" is known, any tier is read and checked below.
        if (const auto to = read_name<Tier>(cur, parse_tier, kAllTiers, got)) {
          step.to = *to;
        } else {
          bad_to = got;
        }
        break;
      default:
        cur.skip_value();
    }
  });
  if (!fields.has(kDo)) {
    p.note("missing field \"do\"");
    return false;
  }
  if (!known) return false;
  // Fields read before "do" were not checked against the kind yet.
  for (const int field : {kOp, kOn, kBuf, kTo}) {
    if (fields.has(static_cast<size_t>(field)) && !(takes(step.kind) & bit(field))) {
      unexpected(field);
    }
  }
  if (runs_an_op(step.kind)) {
    fields.require({kOp}, p);
  } else if (step.kind == StepKind::kSwapOut) {
    fields.require({kBuf, kTo}, p);
    if (!bad_to.empty() || (fields.has(kTo) && step.to == Tier::kDevice)) {
      p.note(R"("to" must be "host" or "nvme", got {})", bad_to.empty() ? "\"device\"" : bad_to);
    }
  } else {
    fields.require({kBuf}, p);
    if (step.kind == StepKind::kSwapIn) {
      if (!fields.has(kTo)) step.to = Tier::kDevice;
      if (!bad_to.empty() || step.to == Tier::kNvme) {
        p.note(R"("to" must be "device" or "host", got {})", bad_to.empty() ? "\"nvme\"" : bad_to);
      }
    }
  }
  return true;
}

// Note [Written steps]
// ~~~~~~~~~~~~~~~~~~~~
// The writer prints every step in one of a few exact shapes, e.g.
// {"do":"swap_out","buf":5,"to":"host"}. Matching those bytes directly is
// several times faster than reading fields one by one, which matters for
// plans of millions of steps. Anything else (other spacing or field order,
// escapes, bad values) takes the general path from the same position, and
// what the fast path accepts the general path reads the same way.

// A canonical id (no leading zeros, at most 2^31-1) at text[pos]; moves pos past it.
std::optional<int32_t> written_id(std::string_view text, size_t& pos) {
  size_t i = pos;
  uint64_t value = 0;
  while (i < text.size() && i - pos < 10 && detail::is_digit(text[i])) {
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  const size_t digits = i - pos;
  if (digits == 0 || (digits > 1 && text[pos] == '0') || value > kMaxId) return std::nullopt;
  if (i < text.size() && detail::is_digit(text[i])) return std::nullopt;
  pos = i;
  return static_cast<int32_t>(value);
}

bool skip_literal(std::string_view text, size_t& pos, std::string_view literal) {
  if (text.substr(pos, literal.size()) != literal) return false;
  pos += literal.size();
  return true;
}

// Reads a step written in one of the writer's shapes at text[pos] (a '{');
// returns the position after it, or 0 when the text is in any other shape.
size_t read_written_step(std::string_view text, size_t pos, Step& step) {
  using namespace std::string_view_literals;
  constexpr std::string_view kStart = R"({"do":")";
  if (!skip_literal(text, pos, kStart) || pos >= text.size()) return 0;
  StepKind kind{};
  switch (text[pos]) {
    case 'c':
      if (!skip_literal(text, pos, R"(compute","op":)"sv)) return 0;
      kind = StepKind::kCompute;
      break;
    case 'r':
      if (!skip_literal(text, pos, R"(recompute","op":)"sv)) return 0;
      kind = StepKind::kRecompute;
      break;
    case 's':
      if (skip_literal(text, pos, R"(swap_out","buf":)"sv)) {
        kind = StepKind::kSwapOut;
      } else if (skip_literal(text, pos, R"(swap_in","buf":)"sv)) {
        kind = StepKind::kSwapIn;
      } else {
        return 0;
      }
      break;
    case 'f':
      if (!skip_literal(text, pos, R"(free","buf":)"sv)) return 0;
      kind = StepKind::kFree;
      break;
    default:
      return 0;
  }
  const std::optional<int32_t> id = written_id(text, pos);
  if (!id) return 0;
  Step read;
  read.kind = kind;
  if (runs_an_op(kind)) {
    read.op = *id;
    if (skip_literal(text, pos, R"(,"on":"host"})"sv)) {
      read.on = Tier::kHost;
    } else if (!skip_literal(text, pos, "}"sv)) {
      return 0;
    }
  } else {
    read.buf = *id;
    if (kind == StepKind::kSwapOut) {
      if (skip_literal(text, pos, R"(,"to":"host"})"sv)) {
        read.to = Tier::kHost;
      } else if (skip_literal(text, pos, R"(,"to":"nvme"})"sv)) {
        read.to = Tier::kNvme;
      } else {
        return 0;
      }
    } else if (kind == StepKind::kSwapIn) {
      if (skip_literal(text, pos, R"(,"to":"host"})"sv)) {
        read.to = Tier::kHost;
      } else if (skip_literal(text, pos, "}"sv)) {
        read.to = Tier::kDevice;
      } else {
        return 0;
      }
    } else if (!skip_literal(text, pos, "}"sv)) {
      return 0;
    }
  }
  step = read;
  return pos;
}

// Smallest step text, {"do":"free","buf":0}: bounds the number of steps.
constexpr size_t kMinStepText = 21;

// `text` is the cursor's text, for the fast path.
void read_steps(JsonCursor& cur, std::string_view text, std::vector<Step>& steps,
                Problem& problem) {
  if (cur.peek_type() != JsonType::kArray) {
    const JsonType type = cur.peek_type();
    cur.skip_value();
    problem.note("\"steps\" must be an array, got {}", type_name(type));
    return;
  }
  cur.expect('[');
  if (cur.consume(']')) return;
  // An upper bound (never a reallocation); capacity never touched costs
  // address space only.
  steps.reserve(1 + cur.remaining() / kMinStepText);
  for (size_t index = 0;; ++index) {
    cur.set_context("step", index);
    if (cur.peek() != '{') {
      const JsonType type = cur.peek_type();
      cur.skip_value();
      problem.note("step {} must be an object, got {}", index, type_name(type));
    } else if (const size_t end = read_written_step(text, cur.position(), steps.emplace_back())) {
      cur.seek(end);
    } else {
      Step& step = steps.back();
      Problem step_problem;
      const bool known = read_step(cur, step, step_problem);
      if (step_problem.any()) {
        if (known) {
          problem.note("step {} ({}): {}", index, to_string(step.kind), step_problem.text());
        } else {
          problem.note("step {}: {}", index, step_problem.text());
        }
      }
    }
    if (cur.consume(',')) continue;
    if (cur.consume(']')) break;
    cur.error("expected ',' or ']' after an array element");
  }
  cur.set_context(nullptr, 0);
}

// ---- Buffer maps -------------------------------------------------------------

// Reads an object keyed by buffer id (or op id: `key_kind`); `read_value(id)`
// reads each value. `quoted` is the field's name in quotes, for syntax error
// messages.
template <typename ReadValue>
void read_buffer_map(JsonCursor& cur, const char* field, const char* quoted, Problem& problem,
                     ReadValue read_value, const char* key_kind = "a buffer id") {
  if (cur.peek_type() != JsonType::kObject) {
    const JsonType type = cur.peek_type();
    cur.skip_value();
    problem.note("\"{}\" must be an object, got {}", field, type_name(type));
    return;
  }
  cur.set_context(quoted, JsonCursor::kNoIndex);
  cur.for_each_member([&](std::string_view key) {
    const std::optional<BufferId> id = parse_id_key(key);
    if (!id) {
      problem.note("\"{}\": key {} is not {}", field, in_quotes(key), key_kind);
      cur.skip_value();
      return;
    }
    read_value(*id);
  });
  cur.set_context(nullptr, 0);
}

void read_placement(JsonCursor& cur, std::map<BufferId, Tier>& placement, Problem& problem) {
  std::string got;
  read_buffer_map(cur, "placement", "\"placement\"", problem, [&](BufferId id) {
    const std::optional<Tier> tier = read_name<Tier>(cur, parse_tier, kAllTiers, got);
    if (!tier) {
      problem.note(R"("placement": buffer {} must be "host", "nvme" or "device", got {})", id, got);
    } else if (!insert_key(placement, id, *tier)) {
      problem.note("\"placement\": duplicate key \"{}\"", id);
    }
  });
}

// "offsets" (buffer -> offset, or an array of one per stay) or
// "workspace_offsets" (op -> the same per run), Note [Offsets per stay]:
// `set(id, offsets)` keeps one entry, false for a duplicate.
template <typename Set>
void read_offsets(JsonCursor& cur, bool of_ops, Problem& problem, Set set) {
  const char* field = of_ops ? "workspace_offsets" : "offsets";
  const char* quoted = of_ops ? "\"workspace_offsets\"" : "\"offsets\"";
  read_buffer_map(
      cur, field, quoted, problem,
      [&](int32_t id) {
        Problem value_problem;  // separate, so that a bad value is not taken for a duplicate
        const auto read_one = [&] {
          return read_uint(cur, kMaxBytes, value_problem, [&] {
            return fmt::format("\"{}\": the offset of {} {}", field, of_ops ? "op" : "buffer", id);
          });
        };
        std::vector<uint64_t> each;
        if (cur.peek_type() == JsonType::kArray) {
          cur.for_each_element([&](size_t) { each.push_back(read_one()); });
          if (each.empty()) {
            value_problem.note("\"{}\": {} {} has an empty array", field, of_ops ? "op" : "buffer",
                               id);
          }
        } else {
          each.push_back(read_one());
        }
        if (value_problem.any()) {
          problem.note("{}", value_problem.text());
        } else if (!set(id, std::move(each))) {
          problem.note("\"{}\": duplicate key \"{}\"", field, id);
        }
      },
      of_ops ? "an op id" : "a buffer id");
}

constexpr std::array<std::string_view, 10> kTopFields = {
    "\"format\"",    "\"graph\"",   "\"graph_fingerprint\"", "\"hardware\"",
    "\"budget\"",    "\"placement\"", "\"steps\"",           "\"offsets\"",
    "\"workspace_offsets\"", "\"host_reserved\""};

// "host_reserved": [{"what": "...", "bytes": N}, ...]
void read_host_reserved(JsonCursor& cur, std::vector<HostReserve>& reserved, Problem& problem) {
  if (cur.peek_type() != JsonType::kArray) {
    problem.note("\"host_reserved\" must be an array, got {}", type_name(cur.peek_type()));
    cur.skip_value();
    return;
  }
  constexpr std::array<std::string_view, 2> kNames = {"\"what\"", "\"bytes\""};
  cur.for_each_element([&](size_t i) {
    if (cur.peek_type() != JsonType::kObject) {
      problem.note("\"host_reserved\"[{}] must be an object, got {}", i, type_name(cur.peek_type()));
      cur.skip_value();
      return;
    }
    HostReserve r;
    Fields fields(kNames);
    fields.read(cur, problem, [&](int field) {
      if (field == 0) {
        if (const auto what = read_string(cur, "host_reserved what", problem)) r.what.assign(*what);
      } else if (field == 1) {
        r.bytes = read_uint(cur, kMaxBytes, problem,
                            [&] { return fmt::format("\"host_reserved\"[{}].bytes", i); });
      } else {
        cur.skip_value();
      }
    });
    fields.require({0, 1}, problem);
    reserved.push_back(std::move(r));
  });
}

// 16 lowercase hex digits, as graph_fingerprint writes them.
bool is_fingerprint(std::string_view text) {
  return text.size() == 16 && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

Plan plan_from_json_text(std::string_view text) {
  enum {
    kFormat,
    kGraph,
    kFingerprint,
    kHardware,
    kBudget,
    kPlacement,
    kSteps,
    kOffsets,
    kWorkspaceOffsets,
    kHostReserved
  };
  JsonCursor cur(text, "plan");
  if (const JsonType type = cur.peek_type(); type != JsonType::kObject) {
    cur.skip_value();  // reports a syntax error first, if there is one
    fail("plan: the top level must be a JSON object, got {}", type_name(type));
  }
  Plan plan;
  Problem problem;
  Fields fields(kTopFields);
  fields.read(cur, problem, [&](int field) {
    switch (field) {
      case kFormat:
        if (const auto format = read_string(cur, "format", problem);
            format && *format != kPlanFormat) {
          fail("plan: unknown format {} (expected \"{}\")", in_quotes(*format), kPlanFormat);
        }
        break;
      case kGraph:
        if (const auto name = read_string(cur, "graph", problem)) plan.graph.assign(*name);
        break;
      case kFingerprint:
        if (const auto print = read_string(cur, "graph_fingerprint", problem)) {
          if (is_fingerprint(*print)) {
            plan.graph_fingerprint.assign(*print);
          } else {
            problem.note("\"graph_fingerprint\" must be 16 lowercase hex digits, got {}",
                         in_quotes(*print));
          }
        }
        break;
      case kHardware:
        if (const auto name = read_string(cur, "hardware", problem)) plan.hardware.assign(*name);
        break;
      case kBudget:
        plan.budget = read_uint(cur, kMaxBytes, problem, [] { return "\"budget\""; });
        break;
      case kPlacement:
        read_placement(cur, plan.placement, problem);
        break;
      case kSteps:
        read_steps(cur, text, plan.steps, problem);
        break;
      case kOffsets:
        read_offsets(cur, false, problem, [&](BufferId id, std::vector<uint64_t> each) {
          if (!insert_key(plan.offsets, id, each.front())) return false;
          if (each.size() > 1) plan.stay_offsets[id].assign(each.begin() + 1, each.end());
          return true;
        });
        break;
      case kWorkspaceOffsets:
        read_offsets(cur, true, problem, [&](OpId id, std::vector<uint64_t> each) {
          return insert_key(plan.workspace_offsets, id, std::move(each));
        });
        break;
      case kHostReserved:
        read_host_reserved(cur, plan.host_reserved, problem);
        break;
      default:
        cur.skip_value();
    }
  });
  cur.expect_end();
  if (!fields.has(kFormat) && !problem.any()) {
    fail("plan: missing field \"format\" (expected \"{}\")", kPlanFormat);
  }
  fields.require({kFormat, kGraph, kHardware, kBudget, kSteps}, problem);
  if (problem.any()) fail("plan: {}", problem.text());
  return plan;
}

Plan read_plan_file(const std::string& path) {
  const FileText file(path);
  try {
    return plan_from_json_text(file.text());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

}  // namespace memwall
