// Reading memwall.graph/1 JSON (DESIGN.md, "Graph"): the document, its
// "buffers" and "ops" arrays (in two threads for a large graph) and "meta";
// each buffer and op object is json_objects.cc's (json_read.h).
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

#include "json_read.h"
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
using detail::JsonType;
using detail::Problem;
using detail::read_string;
using detail::type_name;
using graph_json::canonical_buffer;
using graph_json::canonical_op;
using graph_json::kMaxId;
using graph_json::read_buffer;
using graph_json::read_op;

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
    // Halfway: with the fast path (Note [Canonical fast path] in json_objects.cc) a byte of
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
