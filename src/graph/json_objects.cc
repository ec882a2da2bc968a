// One buffer or op object of memwall.graph/1 JSON (DESIGN.md, "Graph"),
// read by the general reader or the canonical fast path (json_read.h); the
// document around them is json_io.cc's.
//
// Strict: unknown or duplicate fields, wrong types, non-integer or negative
// sizes, unknown names and dangling ids are all errors. Problems inside one
// buffer or op are reported once the whole object has been read, so that the
// message can name it: `graph: buffer 12 ("h0.attn.q"): unknown kind "weights"`.
#include "json_read.h"

#include <array>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "memwall/base/json_cursor.h"
#include "memwall/base/json_fields.h"
#include "memwall/base/quote.h"
#include "memwall/graph/graph.h"

namespace memwall::graph_json {
namespace {

using detail::Fields;
using detail::in_quotes;
using detail::JsonCursor;
using detail::JsonNumber;
using detail::JsonType;
using detail::Problem;
using detail::read_string;
using detail::read_uint;
using detail::shown_number;
using detail::type_name;

// ---- Field readers: on a bad value they note a problem and skip it. ----------

uint64_t read_size(JsonCursor& cur, std::string_view field, uint64_t max, Problem& problem) {
  return read_uint(cur, max, problem, [&] { return fmt::format("\"{}\"", field); });
}

void read_id(JsonCursor& cur, size_t index, Problem& problem) {
  const uint64_t id = read_size(cur, "id", kMaxId, problem);
  if (!problem.any() && id != index) {
    problem.note("\"id\" is {}, expected {} (ids are dense, 0-based and in order)", id, index);
  }
}

double read_amount(JsonCursor& cur, std::string_view field, Problem& problem) {
  if (!cur.at_number()) {
    problem.note("\"{}\" must be a finite number >= 0, got {}", field, type_name(cur.peek_type()));
    cur.skip_value();
    return 0;
  }
  const JsonNumber n = cur.parse_number();
  const std::optional<double> value = detail::to_double(n);
  if (!value || *value < 0) {
    problem.note("\"{}\" must be a finite number >= 0, got {}", field, shown_number(n.text));
    return 0;
  }
  return *value;
}

// `verb` says what the op does with the listed buffers ("reads", ...).
void read_ids(JsonCursor& cur, std::string_view field, std::string_view verb, BufferIds& ids,
              Problem& problem) {
  if (cur.peek_type() != JsonType::kArray) {
    problem.note("\"{}\" must be an array of buffer ids, got {}", field,
                 type_name(cur.peek_type()));
    cur.skip_value();
    return;
  }
  cur.for_each_element([&](size_t) {
    if (!cur.at_number()) {
      problem.note("\"{}\" must be an array of buffer ids, got {} in it", field,
                   type_name(cur.peek_type()));
      cur.skip_value();
      return;
    }
    const JsonNumber n = cur.parse_number();
    if (!n.integer || n.negative) {
      problem.note("\"{}\" must be an array of buffer ids, got {} in it", field,
                   shown_number(n.text));
    } else if (!n.fits_u64 || n.magnitude > kMaxId) {
      problem.note("{} buffer {}, which does not exist", verb, shown_number(n.text));
    } else {
      ids.push_back(static_cast<BufferId>(n.magnitude));
    }
  });
}

void read_shape(JsonCursor& cur, Dims& shape, Problem& problem) {
  if (cur.peek_type() != JsonType::kArray) {
    problem.note("\"shape\" must be an array of non-negative integers, got {}",
                 type_name(cur.peek_type()));
    cur.skip_value();
    return;
  }
  cur.for_each_element([&](size_t) {
    if (!cur.at_number()) {
      problem.note("\"shape\" must be an array of non-negative integers, got {} in it",
                   type_name(cur.peek_type()));
      cur.skip_value();
      return;
    }
    const JsonNumber n = cur.parse_number();
    if (!n.integer || n.negative || !n.fits_u64 ||
        n.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      problem.note("\"shape\" must be an array of non-negative integers, got {} in it",
                   shown_number(n.text));
      return;
    }
    shape.push_back(static_cast<int64_t>(n.magnitude));
  });
}

// Reads a name (kind, phase, dtype) through `parse`.
template <typename Enum, typename Parse>
Enum read_enum(JsonCursor& cur, std::string_view field, Parse parse, std::string_view expected,
               Problem& problem) {
  const std::optional<std::string_view> text = read_string(cur, field, problem);
  if (!text) return Enum{};
  const std::optional<Enum> value = parse(*text);
  if (!value) {
    problem.note("unknown {} {} (expected {})", field, in_quotes(*text), expected);
    return Enum{};
  }
  return *value;
}

// ---- Objects -----------------------------------------------------------------

// `buffer 12 ("h0.attn.q")`, or `buffer 12` while the name is unknown.
[[noreturn]] void fail_object(std::string_view what, size_t index, const std::string* name,
                              const Problem& problem) {
  if (name) fail("graph: {} {} ({}): {}", what, index, in_quotes(*name), problem.text());
  fail("graph: {} {}: {}", what, index, problem.text());
}

constexpr std::array<std::string_view, 8> kBufferFields = {
    "\"id\"",    "\"name\"",  "\"bytes\"",      "\"kind\"",
    "\"dtype\"", "\"shape\"", "\"version_of\"", "\"eager_free\""};

}  // namespace

void read_buffer(JsonCursor& cur, size_t index, Buffer& buffer) {
  enum { kId, kName, kBytes, kKind, kDType, kShape, kVersionOf, kEagerFree };
  Problem problem;
  Fields fields(kBufferFields);
  bool named = false;
  buffer.id = static_cast<BufferId>(index);
  fields.read(cur, problem, [&](int field) {
    switch (field) {
      case kId:
        read_id(cur, index, problem);
        break;
      case kName:
        if (const auto name = read_string(cur, "name", problem)) {
          buffer.name.assign(*name);
          named = true;
        }
        break;
      case kBytes:
        buffer.bytes = read_size(cur, "bytes", kMaxBytes, problem);
        break;
      case kKind:
        buffer.kind = read_enum<BufferKind>(
            cur, "kind", parse_buffer_kind,
            "param, grad, optim_state, activation, input, workspace or temp", problem);
        break;
      case kDType:
        buffer.dtype =
            read_enum<DType>(cur, "dtype", parse_dtype,
                             "fp32, fp16, bf16, fp64, int64, int32, int8, uint8 or bool", problem);
        break;
      case kShape:
        read_shape(cur, buffer.shape, problem);
        break;
      case kVersionOf:
        if (cur.peek_type() == JsonType::kNull) {
          cur.skip_value();
        } else {
          buffer.version_of = static_cast<BufferId>(read_size(cur, "version_of", kMaxId, problem));
        }
        break;
      case kEagerFree:  // null: alive at the end of the step
        if (cur.peek_type() == JsonType::kNull) {
          cur.skip_value();
          buffer.eager_free = kNoOp;
        } else {
          buffer.eager_free = static_cast<OpId>(read_size(cur, "eager_free", kMaxId, problem));
        }
        break;
      default:
        cur.skip_value();
    }
  });
  fields.require({kId, kName, kBytes, kKind}, problem);
  if (problem.any()) fail_object("buffer", index, named ? &buffer.name : nullptr, problem);
}

namespace {

constexpr std::array<std::string_view, 15> kOpFields = {
    "\"id\"",   "\"name\"",    "\"type\"",           "\"phase\"",         "\"in\"",
    "\"out\"",  "\"updates\"", "\"workspace\"",      "\"flops\"",         "\"bytes\"",
    "\"time\"", "\"call\"",    "\"workspace_span\"", "\"scratch_first\"", "\"scratch_at\""};

// A count of allocations a kernel makes (Note [Scratch before its output]).
constexpr uint64_t kMaxScratchFirst = uint64_t{1} << 20;

// An array of non-negative integers up to `max` (Note [Scratch before its
// output], Note [Scratch offsets]).
template <typename List>
void read_counts(JsonCursor& cur, std::string_view field, uint64_t max, List& list,
                 Problem& problem) {
  if (cur.peek_type() != JsonType::kArray) {
    problem.note("\"{}\" must be an array of non-negative integers, got {}", field,
                 type_name(cur.peek_type()));
    cur.skip_value();
    return;
  }
  cur.for_each_element([&](size_t) {
    list.push_back(static_cast<typename List::value_type>(read_size(cur, field, max, problem)));
  });
}

// The op's "call" object, kept as its text (types.h): the executor's to read.
void read_call(JsonCursor& cur, Op& op, Problem& problem) {
  if (cur.peek_type() != JsonType::kObject) {
    problem.note("\"call\" must be an object, got {}", type_name(cur.peek_type()));
    cur.skip_value();
    return;
  }
  op.call.assign(cur.skip_value());  // validates the syntax
}

}  // namespace

void read_op(JsonCursor& cur, size_t index, Op& op) {
  enum {
    kId,
    kName,
    kType,
    kPhase,
    kIn,
    kOut,
    kUpdates,
    kWorkspace,
    kFlops,
    kBytes,
    kTime,
    kCall,
    kWorkspaceSpan,
    kScratchFirst,
    kScratchAt
  };
  Problem problem;
  Fields fields(kOpFields);
  bool named = false;
  op.id = static_cast<OpId>(index);
  fields.read(cur, problem, [&](int field) {
    switch (field) {
      case kId:
        read_id(cur, index, problem);
        break;
      case kName:
        if (const auto name = read_string(cur, "name", problem)) {
          op.name.assign(*name);
          named = true;
        }
        break;
      case kType:
        if (const auto type = read_string(cur, "type", problem)) op.type.assign(*type);
        break;
      case kPhase:
        op.phase = read_enum<Phase>(cur, "phase", parse_phase,
                                    "forward, backward, optimizer or comm", problem);
        break;
      case kIn:
        read_ids(cur, "in", "reads", op.in, problem);
        break;
      case kOut:
        read_ids(cur, "out", "creates", op.out, problem);
        break;
      case kUpdates:
        read_ids(cur, "updates", "updates", op.updates, problem);
        break;
      case kWorkspace:
        op.workspace = read_size(cur, "workspace", kMaxBytes, problem);
        break;
      case kWorkspaceSpan:
        op.workspace_span = read_size(cur, "workspace_span", kMaxBytes, problem);
        break;
      case kScratchFirst:
        read_counts(cur, "scratch_first", kMaxScratchFirst, op.scratch_first, problem);
        break;
      case kScratchAt:
        read_counts(cur, "scratch_at", kMaxBytes, op.scratch_at, problem);
        break;
      case kFlops:
        op.flops = read_amount(cur, "flops", problem);
        break;
      case kBytes:
        op.bytes = read_amount(cur, "bytes", problem);
        break;
      case kTime:
        if (cur.peek_type() == JsonType::kNull) {
          cur.parse_null();
        } else {
          op.time = read_amount(cur, "time", problem);
        }
        break;
      case kCall:
        read_call(cur, op, problem);
        break;
      default:
        cur.skip_value();
    }
  });
  fields.require({kId, kName, kType, kPhase, kIn, kOut}, problem);
  if (problem.any()) fail_object("op", index, named ? &op.name : nullptr, problem);
}

namespace {

// ---- Canonical layout ---------------------------------------------------------

// Note [Canonical fast path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// memwall's writer puts every field of a buffer or op in the format's order,
// with no whitespace inside the object, and so do the tracer and most tools.
// For such an object the readers below match each `,"key":` as one literal
// and read its value with the same cursor primitives (parse_number,
// parse_string, to_double) and the same checks as the general readers, but
// skip their per-member work: key lookup, duplicate and required-field
// bookkeeping, the problem text. At the first thing they do not expect (other
// order or spacing, a missing optional field, a value the general reader
// would reject) they return false; the caller then resets the object, moves
// the cursor back to its start and reads it with the general reader. So
// every message, and every document not in this layout, still goes through
// the one strict reader; this path only accepts what that reader accepts,
// with the same values. A syntax error thrown from here is the one the
// general reader would throw at the same place, as nothing before it in the
// object was wrong. On the 1M-op benchmark graph it takes ~70% of the general
// reader's time per op and per buffer (e.g. 223 vs 320 ns per op, one thread).

// A non-negative integer no larger than `max`, as read_size accepts it.
std::optional<uint64_t> canonical_size(JsonCursor& cur, uint64_t max) {
  const std::optional<uint64_t> value = cur.try_small_uint();
  if (!value || *value > max) return std::nullopt;
  return value;
}

// A finite number >= 0, as read_amount accepts it.
std::optional<double> canonical_amount(JsonCursor& cur) {
  if (const std::optional<uint64_t> integer = cur.try_small_uint()) {
    return static_cast<double>(*integer);  // what to_double gives an integer
  }
  if (!cur.at_number()) return std::nullopt;
  const std::optional<double> value = detail::to_double(cur.parse_number());
  if (!value || *value < 0) return std::nullopt;
  return value;
}

// `[` ids `]` with no whitespace, each id as read_ids accepts it.
template <typename List>
bool canonical_list(JsonCursor& cur, uint64_t max, List& list) {
  if (!cur.try_literal("[")) return false;
  if (cur.try_literal("]")) return true;
  do {
    const std::optional<uint64_t> value = canonical_size(cur, max);
    if (!value) return false;
    list.push_back(static_cast<typename List::value_type>(*value));
  } while (cur.try_literal(","));
  return cur.try_literal("]");
}

}  // namespace

bool canonical_buffer(JsonCursor& cur, size_t index, Buffer& buffer) {
  std::optional<uint64_t> id, bytes;
  std::optional<std::string_view> name, kind, dtype;
  if (!cur.try_literal("{\"id\":") || !(id = canonical_size(cur, kMaxId)) || *id != index) {
    return false;
  }
  if (!cur.try_literal(",\"name\":") || !(name = cur.try_plain_string())) return false;
  buffer.name.assign(*name);
  if (!cur.try_literal(",\"bytes\":") || !(bytes = canonical_size(cur, kMaxBytes))) return false;
  if (!cur.try_literal(",\"kind\":") || !(kind = cur.try_plain_string())) return false;
  const std::optional<BufferKind> parsed_kind = parse_buffer_kind(*kind);
  if (!parsed_kind || !cur.try_literal(",\"dtype\":") || !(dtype = cur.try_plain_string())) {
    return false;
  }
  const std::optional<DType> parsed_dtype = parse_dtype(*dtype);
  if (!parsed_dtype || !cur.try_literal(",\"shape\":") ||
      !canonical_list(cur, std::numeric_limits<int64_t>::max(), buffer.shape)) {
    return false;
  }
  if (cur.try_literal(",\"version_of\":")) {
    const std::optional<uint64_t> version_of = canonical_size(cur, kMaxId);
    if (!version_of) return false;
    buffer.version_of = static_cast<BufferId>(*version_of);
  }
  if (cur.try_literal(",\"eager_free\":")) {
    if (cur.try_literal("null")) {
      buffer.eager_free = kNoOp;
    } else {
      const std::optional<uint64_t> eager_free = canonical_size(cur, kMaxId);
      if (!eager_free) return false;
      buffer.eager_free = static_cast<OpId>(*eager_free);
    }
  }
  if (!cur.try_literal("}")) return false;
  buffer.id = static_cast<BufferId>(index);
  buffer.bytes = *bytes;
  buffer.kind = *parsed_kind;
  buffer.dtype = *parsed_dtype;
  return true;
}

bool canonical_op(JsonCursor& cur, size_t index, Op& op) {
  std::optional<uint64_t> id, workspace, span;
  std::optional<std::string_view> text;
  std::optional<double> flops, bytes;
  if (!cur.try_literal("{\"id\":") || !(id = canonical_size(cur, kMaxId)) || *id != index) {
    return false;
  }
  if (!cur.try_literal(",\"name\":") || !(text = cur.try_plain_string())) return false;
  op.name.assign(*text);
  if (!cur.try_literal(",\"type\":") || !(text = cur.try_plain_string())) return false;
  op.type.assign(*text);
  if (!cur.try_literal(",\"phase\":") || !(text = cur.try_plain_string())) return false;
  const std::optional<Phase> phase = parse_phase(*text);
  if (!phase || !cur.try_literal(",\"in\":") || !canonical_list(cur, kMaxId, op.in) ||
      !cur.try_literal(",\"out\":") || !canonical_list(cur, kMaxId, op.out) ||
      !cur.try_literal(",\"updates\":") || !canonical_list(cur, kMaxId, op.updates) ||
      !cur.try_literal(",\"workspace\":") || !(workspace = canonical_size(cur, kMaxBytes))) {
    return false;
  }
  if (cur.try_literal(",\"workspace_span\":") && !(span = canonical_size(cur, kMaxBytes))) {
    return false;
  }
  if (cur.try_literal(",\"scratch_first\":") &&
      !canonical_list(cur, kMaxScratchFirst, op.scratch_first)) {
    return false;
  }
  if (cur.try_literal(",\"scratch_at\":") && !canonical_list(cur, kMaxBytes, op.scratch_at)) {
    return false;
  }
  if (!cur.try_literal(",\"flops\":") || !(flops = canonical_amount(cur)) ||
      !cur.try_literal(",\"bytes\":") || !(bytes = canonical_amount(cur)) ||
      !cur.try_literal(",\"time\":")) {
    return false;
  }
  if (!cur.try_literal("null")) {
    const std::optional<double> time = canonical_amount(cur);
    if (!time) return false;
    op.time = *time;
  }
  if (cur.try_literal(",\"call\":")) {
    if (cur.peek_type() != JsonType::kObject) return false;
    op.call.assign(cur.skip_value());  // any layout inside: it is kept as written
  }
  if (!cur.try_literal("}")) return false;
  op.id = static_cast<OpId>(index);
  op.phase = *phase;
  op.workspace = *workspace;
  op.workspace_span = span.value_or(0);
  op.flops = *flops;
  op.bytes = *bytes;
  return true;
}

}  // namespace memwall::graph_json
