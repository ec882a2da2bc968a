// Writing memwall.graph/1 JSON.
//
// Streams text directly: a DOM of a 1M-op graph would take gigabytes. One
// buffer or op per line keeps files diffable (an op's "call" goes out as it
// was read, spaces and line breaks included). graph_to_json() parses this
// text, so the DOM and the file can never disagree.

#include <charconv>
#include <cmath>

#include "memwall/base/json_cursor.h"
#include "memwall/base/json_string.h"
#include "memwall/base/output_files.h"
#include "memwall/base/quote.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

using namespace std::string_view_literals;

class Writer {
 public:
  explicit Writer(const Graph& graph) : graph_(graph) {}

  std::string run() {
    // Generous: an unused tail of the reservation is never touched.
    out_.reserve(4096 + graph_.buffers.size() * 128 + graph_.ops.size() * 256);
    out_ += "{\"format\": "sv;
    string(kGraphFormat, "the format");
    out_ += ",\n\"name\": "sv;
    string(graph_.name, "the graph name");
    out_ += ",\n\"meta\": "sv;
    meta();
    out_ += ",\n\"buffers\": ["sv;
    for (size_t i = 0; i < graph_.buffers.size(); ++i) {
      out_ += i == 0 ? "\n"sv : ",\n"sv;
      buffer(graph_.buffers[i], i);
    }
    out_ += "\n],\n\"ops\": ["sv;
    for (size_t i = 0; i < graph_.ops.size(); ++i) {
      out_ += i == 0 ? "\n"sv : ",\n"sv;
      op(graph_.ops[i], i);
    }
    out_ += "\n]}\n"sv;
    return std::move(out_);
  }

 private:
  void buffer(const Buffer& b, size_t index) {
    where_ = "buffer";
    index_ = index;
    out_ += "{\"id\":"sv;
    integer(b.id);
    out_ += ",\"name\":"sv;
    string(b.name, "name");
    out_ += ",\"bytes\":"sv;
    integer(b.bytes);
    out_ += ",\"kind\":"sv;
    string(to_string(b.kind), "kind");
    out_ += ",\"dtype\":"sv;
    string(to_string(b.dtype), "dtype");
    out_ += ",\"shape\":["sv;
    for (size_t i = 0; i < b.shape.size(); ++i) {
      if (i) out_ += ',';
      integer(b.shape[i]);
    }
    out_ += ']';
    if (b.version_of != kNoBuffer) {
      out_ += ",\"version_of\":"sv;
      integer(b.version_of);
    }
    if (b.eager_free == kNoOp) {
      out_ += ",\"eager_free\":null"sv;
    } else if (b.eager_free != kEagerUnknown) {
      out_ += ",\"eager_free\":"sv;
      integer(b.eager_free);
    }
    out_ += '}';
  }

  void op(const Op& o, size_t index) {
    where_ = "op";
    index_ = index;
    out_ += "{\"id\":"sv;
    integer(o.id);
    out_ += ",\"name\":"sv;
    string(o.name, "name");
    out_ += ",\"type\":"sv;
    string(o.type, "type");
    out_ += ",\"phase\":"sv;
    string(to_string(o.phase), "phase");
    ids("in", o.in);
    ids("out", o.out);
    ids("updates", o.updates);
    out_ += ",\"workspace\":"sv;
    integer(o.workspace);
    if (o.workspace_span > o.workspace) {  // Note [Workspace span]
      out_ += ",\"workspace_span\":"sv;
      integer(o.workspace_span);
    }
    if (!o.scratch_first.empty()) counts("scratch_first", o.scratch_first);
    if (!o.scratch_at.empty()) counts("scratch_at", o.scratch_at);
    out_ += ",\"flops\":"sv;
    number(o.flops, "flops");
    out_ += ",\"bytes\":"sv;
    number(o.bytes, "bytes");
    out_ += ",\"time\":"sv;
    if (o.time) {
      number(*o.time, "time");
    } else {
      out_ += "null"sv;
    }
    if (!o.call.empty()) {
      check_call(o.call);
      out_ += ",\"call\":"sv;
      out_ += o.call;
    }
    out_ += '}';
  }

  // The op's "call" text goes out as it is (types.h), once it is known to be
  // one JSON object and nothing around it: the reader takes nothing else.
  void check_call(std::string_view text) {
    if (text.front() != '{' || text.back() != '}') {
      fail("graph: {}: \"call\" is not a JSON object", place());
    }
    try {
      detail::JsonCursor cur(text, "\"call\"");
      cur.skip_value();
      cur.expect_end();
    } catch (const Error& e) {
      fail("graph: {}: {}", place(), e.what());
    }
  }

  // `,"field":[...]` of integers: buffer ids, or Note [Scratch before its
  // output]'s and Note [Scratch offsets]' counts.
  template <typename List>
  void counts(const char* field, const List& list) {
    out_ += ",\""sv;
    out_ += field;
    out_ += "\":["sv;
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out_ += ',';
      integer(list[i]);
    }
    out_ += ']';
  }

  void ids(const char* field, const BufferIds& list) { counts(field, list); }

  // The graph's meta with its fingerprint, which describes this content.
  void meta() {
    try {
      nlohmann::json meta = graph_.meta;
      if (meta.is_object()) meta["fingerprint"] = graph_fingerprint(graph_);
      out_ += meta.dump();
    } catch (const nlohmann::json::exception& e) {
      fail("graph: cannot write \"meta\": {}", e.what());
    }
  }

  template <typename Int>
  void integer(Int value) {
    char text[24];
    const auto result = std::to_chars(text, text + sizeof text, value);
    out_.append(text, result.ptr);
  }

  void number(double value, const char* field) {
    if (!std::isfinite(value)) fail("graph: {}: \"{}\" is not finite", place(), field);
    char text[32];
    const auto result = std::to_chars(text, text + sizeof text, value);  // shortest round trip
    out_.append(text, result.ptr);
  }

  // JSON text must be UTF-8 (the reader rejects anything else).
  void string(std::string_view text, const char* field) {
    if (!append_json_string(out_, text)) {
      fail("graph: {}: {} is not valid UTF-8", place(), field);
    }
  }

  std::string place() const {
    if (!where_) return "graph";
    return fmt::format("{} {}", where_, index_);
  }

  const Graph& graph_;
  std::string out_;
  const char* where_ = nullptr;  // object being written, for error messages
  size_t index_ = 0;
};

}  // namespace

std::string graph_to_json_text(const Graph& graph) { return Writer(graph).run(); }

nlohmann::json graph_to_json(const Graph& graph) {
  const std::string text = graph_to_json_text(graph);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("graph: cannot convert to JSON: {}", e.what());  // not expected: the text is JSON
  }
}

void write_graph_file(const Graph& graph, const std::string& path) {
  write_file_atomically(path,
                        graph_to_json_text(graph));  // the text fails before the disk is touched
}

}  // namespace memwall
