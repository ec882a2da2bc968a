// A graph's content fingerprint (graph.h).
//
// Note [Graph fingerprint]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Plans name their graph, but a name does not say what the graph holds:
// two traces of one script at different batches or dtypes, or a LoRA and a
// full fine-tuning graph, could share one. The fingerprint hashes what a
// plan depends on: every buffer's name, bytes, kind, dtype and shape, and
// every op's name, type, phase, inputs, outputs, updates and workspace, in
// order. It leaves out the graph's name and meta (labels), the cost
// annotations (flops, bytes, time), so that a graph re-measured on another
// machine still runs the plans made for it, and each op's "call" (how the
// executor runs it, which no plan depends on). 64 bits are plenty to tell
// accidental mismatches apart; this is not a defence against forgery.
// Each field is folded in with the splitmix64 finalizer (Steele, Lea and
// Flood, "Fast Splittable Pseudorandom Number Generators", OOPSLA 2014;
// constants from David Stafford's "Mix13"), which is a bijection, so the
// state never loses information between fields. Strings go in eight bytes
// at a time after their length, assembled the same on any byte order.
#include <fmt/format.h>

#include "memwall/graph/graph.h"

namespace memwall {
namespace {

class Hasher {
 public:
  void add(uint64_t value) { state_ = mix(state_ ^ value) + 0x9e3779b97f4a7c15ULL; }

  // Eight bytes to a word, first byte lowest, on any host byte order.
  void add(std::string_view text) {
    add(static_cast<uint64_t>(text.size()));
    for (size_t at = 0; at < text.size(); at += 8) {
      uint64_t word = 0;
      for (size_t i = 0; i < 8 && at + i < text.size(); ++i) {
        word |= uint64_t{static_cast<unsigned char>(text[at + i])} << (8 * i);
      }
      add(word);
    }
  }

  template <typename List>
  void add_list(const List& ids) {
    add(static_cast<uint64_t>(ids.size()));
    for (const auto id : ids) add(static_cast<uint64_t>(id));
  }

  uint64_t value() const { return mix(state_); }

 private:
  static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }

  uint64_t state_ = 0x6d656d77616c6c31ULL;  // "memwall1"
};

}  // namespace

std::string graph_fingerprint(const Graph& graph) {
  Hasher h;
  h.add(static_cast<uint64_t>(graph.buffers.size()));
  for (const Buffer& b : graph.buffers) {
    h.add(b.name);
    h.add(b.bytes);
    h.add(static_cast<uint64_t>(b.kind));
    h.add(static_cast<uint64_t>(b.dtype));
    h.add_list(b.shape);
    // Only when set, so that graphs without versions keep their fingerprints.
    if (b.version_of != kNoBuffer) h.add(static_cast<uint64_t>(b.version_of) | (1ULL << 63));
  }
  h.add(static_cast<uint64_t>(graph.ops.size()));
  for (const Op& op : graph.ops) {
    h.add(op.name);
    h.add(op.type);
    h.add(static_cast<uint64_t>(op.phase));
    h.add_list(op.in);
    h.add_list(op.out);
    h.add_list(op.updates);
    h.add(op.workspace);
    // Only when it says more, so that graphs without spans keep their fingerprints.
    if (op.workspace_span > op.workspace) h.add(op.workspace_span | (1ULL << 63));
  }
  return fmt::format("{:016x}", h.value());
}

void record_rewrite(const Graph& from, Graph& to) {
  to.meta["rewritten_from"] = from.meta.contains("rewritten_from")
                                  ? from.meta["rewritten_from"]
                                  : nlohmann::json(graph_fingerprint(from));
}

}  // namespace memwall
