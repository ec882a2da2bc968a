// Reading memwall.graph/1 JSON (DESIGN.md, "Graph").
//
// Strict: unknown or duplicate fields, wrong types, non-integer or negative
// sizes, unknown names and dangling ids are all errors. Problems inside one
// buffer or op are reported once the whole object has been read, so that the
// message can name it: `graph: buffer 12 ("h0.attn.q"): unknown kind "weights"`.
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stop_token>
#include <thread>
#include <utility>

#include "memwall/base/file_text.h"
#include "memwall/base/json_cursor.h"
#include "memwall/base/json_fields.h"
#include "memwall/base/quote.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

using detail::Fields;
using detail::in_quotes;
using detail::JsonCursor;
using detail::JsonNumber;
using detail::JsonType;
using detail::Problem;
using detail::type_name;

constexpr uint64_t kMaxId = std::numeric_limits<int32_t>::max();

// Number text as shown in a message (numbers can be arbitrarily long).
std::string_view shown(std::string_view number) {
  return number.size() <= 40 ? number : number.substr(0, 40);
}

// ---- Field readers: on a bad value they note a problem and skip it. ----------

uint64_t read_size(JsonCursor& cur, std::string_view field, uint64_t max, Problem& problem) {
  if (!cur.at_number()) {
    problem.note("\"{}\" must be a non-negative integer, got {}", field,
                 type_name(cur.peek_type()));
    cur.skip_value();
    return 0;
  }
  const JsonNumber n = cur.parse_number();
  if (!n.integer || n.negative) {
    problem.note("\"{}\" must be a non-negative integer, got {}", field, shown(n.text));
    return 0;
  }
  if (!n.fits_u64 || n.magnitude > max) {
    if (max == kMaxBytes) {
      problem.note("\"{}\" is {}, above the limit of 2^62 bytes", field, shown(n.text));
    } else {
      problem.note("\"{}\" is {}, above the limit of {}", field, shown(n.text), max);
    }
    return 0;
  }
  return n.magnitude;
}

void read_id(JsonCursor& cur, size_t index, Problem& problem) {
  const uint64_t id = read_size(cur, "id", kMaxId, problem);
  if (!problem.any() && id != index) {
    problem.note("\"id\" is {}, expected {} (ids are dense, 0-based and in order)", id, index);
  }
}

std::optional<std::string_view> read_string(JsonCursor& cur, std::string_view field,
                                            Problem& problem) {
  if (!cur.at_string()) {
    problem.note("\"{}\" must be a string, got {}", field, type_name(cur.peek_type()));
    cur.skip_value();
    return std::nullopt;
  }
  return cur.parse_string();
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
    problem.note("\"{}\" must be a finite number >= 0, got {}", field, shown(n.text));
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
      problem.note("\"{}\" must be an array of buffer ids, got {} in it", field, shown(n.text));
    } else if (!n.fits_u64 || n.magnitude > kMaxId) {
      problem.note("{} buffer {}, which does not exist", verb, shown(n.text));
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
                   shown(n.text));
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

// Reads one object the fast way when it is in the canonical layout, else
// (from its start, on a fresh object) with the general reader.
template <typename T, typename Canonical, typename General>
void read_object(JsonCursor& cur, size_t index, T& item, Canonical canonical, General general) {
  const size_t start = cur.position();
  if (canonical(cur, index, item)) return;
  item = T{};
  cur.seek(start);
  general(cur, index, item);
}

// Note [Huge pages for the big arrays]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A 1M-op graph's op array is ~210 MB, its buffer array ~90 MB: ~70k page
// faults in 4 KiB pages. Where transparent huge pages are on "madvise"
// (Debian's default), asking for them turns that into ~140 faults; on the
// 2-vCPU VM this project is developed on, first touch of 400 MB took 240 ms
// in small pages and 80 ms in huge ones.
template <typename T>
void reserve_items(std::vector<T>& items, size_t count) {
  items.reserve(count);
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(items.data());
  const uintptr_t end = begin + items.capacity() * sizeof(T);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = end & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

// Reads array elements from `index` on, the cursor at one, through the
// closing ']'. `take_over(index)` runs before each element; true means the
// rest of the array was read elsewhere (see Note [Speculative parallel parse])
// and the cursor has been moved past it.
template <typename T, typename ReadOne, typename TakeOver>
void read_elements(JsonCursor& cur, const char* field, const char* what, size_t index,
                   std::vector<T>& items, ReadOne read_one, TakeOver take_over) {
  for (;; ++index) {
    if (cur.peek() == '{' && take_over(index)) return;
    if (index > kMaxId) fail("graph: more than 2^31-1 entries in \"{}\"", field);
    if (cur.peek_type() != JsonType::kObject) {
      fail("graph: {} {} must be an object, got {}", what, index, type_name(cur.peek_type()));
    }
    cur.set_context(what, index);
    const size_t start = cur.position();
    read_one(index, items.emplace_back());
    if (items.capacity() == 1) {
      // Nothing reserved (the array read first): estimate the count from this
      // element's size rather than grow a vector of a million objects by
      // doubling. The rest of the text usually holds the other array too, so
      // this overestimates; capacity never touched costs address space only.
      const size_t bytes = std::max<size_t>(cur.position() - start, 1);
      reserve_items(items, 1 + cur.remaining() / bytes);
    }
    if (cur.consume(',')) continue;
    if (cur.consume(']')) return;
    cur.error("expected ',' or ']' after an array element");
  }
}

// Reads the array of buffer or op objects under `field`.
template <typename T, typename ReadOne, typename TakeOver>
void read_objects(JsonCursor& cur, const char* field, const char* what, std::vector<T>& items,
                  ReadOne read_one, TakeOver take_over) {
  if (cur.peek_type() != JsonType::kArray) {
    fail("graph: \"{}\" must be an array, got {}", field, type_name(cur.peek_type()));
  }
  cur.expect('[');
  if (!cur.consume(']')) read_elements(cur, field, what, 0, items, read_one, take_over);
  cur.set_context(nullptr, 0);
}

constexpr size_t kMinBufferText = 40;  // {"id":0,"name":"","bytes":0,"kind":"temp"}
constexpr size_t kMinOpText = 56;  // {"id":0,"name":"","type":"","phase":"comm","in":[],"out":[]}

// Note [Speculative parallel parse]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A large graph is read by two threads. The main thread reads the text in
// order, as it always did. A second thread guesses where an element of "ops"
// starts about halfway through the text (`,{"id":K`, see guess_tail; K is
// the index the element would have) and reads ops from there to the end of
// that array, exactly as the main thread would: same cursor over the same
// text, so the same values and the same errors, with lines and columns
// counted from the start. A quote inside a JSON string is escaped, so
// `{"id":` is nearly always a real object, but it may belong to "buffers"
// or "meta", and K may be wrong; hence the guess is only used when the main
// thread, reading "ops", arrives at element K at that very offset. It then
// takes the tail's ops (or rethrows its error: nothing before it failed, so
// it is the first error in document order) and continues after the array.
// Otherwise the main thread reads everything itself and the tail is
// discarded. Errors found earlier by the main thread propagate as before:
// the tail's thread is stopped and joined when the tail is destroyed. Op
// parsing checks nothing against the buffers (validate() does, afterwards),
// so the order of "ops" and "buffers" in the text does not matter.
class OpsTail {
 public:
  // Smaller texts are read by one thread: starting one costs ~50us.
  static constexpr size_t kMinText = 256 << 10;

  // Starts reading the tail of "ops" from a guess, if one is found.
  static std::unique_ptr<OpsTail> start(std::string_view text) {
    if (text.size() < kMinText || std::thread::hardware_concurrency() < 2) return nullptr;
    auto tail = std::make_unique<OpsTail>();
    // Halfway: with the fast path (Note [Canonical fast path]) a byte of
    // buffers costs about what a byte of ops does.
    if (!tail->guess(text, text.size() / 2)) return nullptr;
    OpsTail* self = tail.get();
    tail->thread_ = std::jthread([self, text](std::stop_token stop) { self->read(text, stop); });
    return tail;
  }

  // Called before the main thread reads element `index` of "ops": when the
  // guess was right, moves its ops into `ops` (which holds the first `index`),
  // or rethrows its error, and moves the cursor past the array.
  bool take_over(JsonCursor& cur, size_t index, std::vector<Op>& ops) {
    if (index != index_ || cur.position() != start_) return false;
    thread_.join();
    if (error_) std::rethrow_exception(error_);
    // The tail's vector starts with `index` empty ops, so that the whole
    // array can be handed over without copying (or page-faulting) the tail.
    std::move(ops.begin(), ops.end(), ops_.begin());
    ops = std::move(ops_);
    cur.seek(end_);
    return true;
  }
  size_t index() const { return index_; }
  void cancel() { thread_.request_stop(); }

 private:
  // Finds the first `,{"id":K` at or after `from` (whitespace allowed
  // between the tokens), within a short stretch of text.
  bool guess(std::string_view text, size_t from) {
    const auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    const size_t stop = std::min(text.size(), from + (64 << 10));
    for (size_t at = text.find("\"id\"", from); at < stop; at = text.find("\"id\"", at + 1)) {
      size_t open = at;
      while (open > 0 && is_space(text[open - 1])) --open;
      if (open == 0 || text[--open] != '{') continue;
      size_t comma = open;
      while (comma > 0 && is_space(text[comma - 1])) --comma;
      if (comma == 0 || text[comma - 1] != ',') continue;
      size_t i = at + 4;
      while (i < text.size() && is_space(text[i])) ++i;
      if (i == text.size() || text[i++] != ':') continue;
      while (i < text.size() && is_space(text[i])) ++i;
      uint64_t id = 0;
      const size_t first = i;
      for (; i < text.size() && i - first < 10 && detail::is_digit(text[i]); ++i) {
        id = id * 10 + static_cast<uint64_t>(text[i] - '0');
      }
      if (i == first || id == 0 || id > kMaxId) continue;
      index_ = id;
      start_ = open;
      return true;
    }
    return false;
  }

  void read(std::string_view text, const std::stop_token& stop) {
    try {
      JsonCursor cur(text);
      cur.seek(start_);
      // Room for the tail, estimated from the size of its first op (with a
      // margin: later ops may be larger), before the placeholders go in.
      size_t bytes = kMinOpText;  // if the op is malformed: read_op reports it
      try {
        JsonCursor probe(text);
        probe.seek(start_);
        probe.skip_value();
        bytes = std::max<size_t>(probe.position() - start_, 1);
      } catch (const Error&) {
      }
      reserve_items(ops_, index_ + cur.remaining() / bytes * 3 / 2 + 2);
      ops_.resize(index_);
      read_elements(
          cur, "ops", "op", index_, ops_,
          [&](size_t index, Op& op) { read_object(cur, index, op, canonical_op, read_op); },
          [&](size_t) { return stop.stop_requested(); });
      end_ = cur.position();
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  size_t index_ = 0;  // the guess: element index_ of "ops" starts at start_
  size_t start_ = 0;
  size_t end_ = 0;  // just past the array
  std::vector<Op> ops_;
  std::exception_ptr error_;
  std::jthread thread_;  // last: stopped and joined before the rest is destroyed
};

// Training graphs have about one buffer per op, so the array read second is
// reserved at the size of the first, capped by what the rest of the text can
// hold (`min_text` bytes per object at least). This saves the copies and page
// faults of growing a vector of a million ops; a wrong guess costs nothing
// but unused capacity, or the usual growth.
template <typename T>
void reserve_like(std::vector<T>& items, size_t other_count, size_t remaining_text,
                  size_t min_text) {
  reserve_items(items, std::min(other_count, remaining_text / min_text));
}

nlohmann::json read_meta(JsonCursor& cur) {
  if (cur.peek_type() != JsonType::kObject) {
    fail("graph: \"meta\" must be an object, got {}", type_name(cur.peek_type()));
  }
  cur.set_context("\"meta\"", JsonCursor::kNoIndex);
  const std::string_view text = cur.skip_value();  // validates the syntax
  cur.set_context(nullptr, 0);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("graph: \"meta\" is not valid JSON: {}", e.what());
  }
}

constexpr std::array<std::string_view, 5> kTopFields = {"\"format\"", "\"name\"", "\"meta\"",
                                                        "\"buffers\"", "\"ops\""};

}  // namespace

Graph graph_from_json_text(std::string_view text) {
  enum { kFormat, kName, kMeta, kBuffers, kOps };
  JsonCursor cur(text);
  if (const JsonType type = cur.peek_type(); type != JsonType::kObject) {
    cur.skip_value();  // reports a syntax error first, if there is one
    fail("graph: the top level must be a JSON object, got {}", type_name(type));
  }
  Graph graph;
  Problem problem;  // reported after "format" is checked: a wrong format explains it
  Fields fields(kTopFields);
  std::optional<std::string> format;
  const std::unique_ptr<OpsTail> tail = OpsTail::start(text);
  fields.read(cur, problem, [&](int field) {
    switch (field) {
      case kFormat:
        if (const auto value = read_string(cur, "format", problem)) format.emplace(*value);
        if (format && *format != kGraphFormat) {
          fail("graph: unknown format {} (expected \"{}\")", in_quotes(*format), kGraphFormat);
        }
        break;
      case kName:
        if (const auto name = read_string(cur, "name", problem)) graph.name.assign(*name);
        break;
      case kMeta:
        graph.meta = read_meta(cur);
        break;
      case kBuffers:
        reserve_like(graph.buffers, graph.ops.size(), cur.remaining(), kMinBufferText);
        read_objects(
            cur, "buffers", "buffer", graph.buffers,
            [&](size_t index, Buffer& buffer) {
              read_object(cur, index, buffer, canonical_buffer, read_buffer);
            },
            [](size_t) { return false; });
        break;
      case kOps:
        if (tail) {
          reserve_items(graph.ops, tail->index());
        } else {
          reserve_like(graph.ops, graph.buffers.size(), cur.remaining(), kMinOpText);
        }
        read_objects(
            cur, "ops", "op", graph.ops,
            [&](size_t index, Op& op) { read_object(cur, index, op, canonical_op, read_op); },
            [&](size_t index) { return tail && tail->take_over(cur, index, graph.ops); });
        if (tail) tail->cancel();  // done with it, whether used or not
        break;
      default:
        cur.skip_value();
    }
  });
  cur.expect_end();
  if (!fields.has(kFormat) && !problem.any()) {
    fail("graph: missing field \"format\" (expected \"{}\")", kGraphFormat);
  }
  fields.require({kFormat, kName, kMeta, kBuffers, kOps}, problem);
  if (problem.any()) fail("graph: {}", problem.text());
  validate(graph);
  return graph;
}

Graph graph_from_json(const nlohmann::json& json) {
  // One reader for both paths keeps the rules and messages identical; the
  // extra dump costs little next to building the DOM in the first place.
  std::string text;
  try {
    text = json.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("graph: cannot read the JSON value: {}", e.what());
  }
  return graph_from_json_text(text);
}

Graph read_graph_file(const std::string& path) {
  const FileText file(path);
  try {
    return graph_from_json_text(file.text());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

}  // namespace memwall
