// Escaping control characters on the way to the terminal (terminal_text.h).
//
// Note [Terminal text]
// ~~~~~~~~~~~~~~~~~~~~
// Graph, op, buffer and hardware names reach the tables and error lines
// unchanged from user files. Rather than escape them at each of the
// hundreds of places that print one, std::cout and std::cerr write through
// a filter that replaces each control character (except newline and tab)
// with the six characters \u00XX. nlohmann::json already escapes C0
// controls inside strings, so --json output passes through unchanged, and
// the C1 controls it leaves raw become the JSON escape of the same code
// point: the document means the same. A C1 control is two bytes in UTF-8
// (C2 80 to C2 9F), so a lone C2 at the end of one write is held until the
// next byte arrives (or the stream is flushed).
#include "memwall/report/terminal_text.h"

#include <fmt/format.h>

#include <streambuf>

namespace memwall {
namespace {

bool is_c0_control(unsigned char c) { return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f; }
bool is_c1_second_byte(unsigned char c) { return c >= 0x80 && c <= 0x9f; }

// Appends `text` escaped to `out`; `pending_c2` carries a trailing 0xC2.
void escape_into(std::string& out, std::string_view text, bool& pending_c2) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (pending_c2) {
      pending_c2 = false;
      if (is_c1_second_byte(c)) {
        out += fmt::format("\\u{:04x}", c);
        continue;
      }
      out += '\xc2';
    }
    if (c == 0xc2) {
      pending_c2 = true;
    } else if (is_c0_control(c)) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
}

class EscapingBuffer final : public std::streambuf {
 public:
  explicit EscapingBuffer(std::streambuf* sink) : sink_(sink) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    scratch_.clear();
    escape_into(scratch_, std::string_view(s, static_cast<size_t>(n)), pending_c2_);
    const auto size = static_cast<std::streamsize>(scratch_.size());
    return sink_->sputn(scratch_.data(), size) == size ? n : 0;
  }

  int sync() override {
    if (pending_c2_) {
      pending_c2_ = false;
      sink_->sputc('\xc2');
    }
    return sink_->pubsync();
  }

 private:
  std::streambuf* sink_;
  std::string scratch_;
  bool pending_c2_ = false;
};

}  // namespace

std::string escape_control_characters(std::string_view text) {
  std::string out;
  bool pending = false;
  escape_into(out, text, pending);
  if (pending) out += '\xc2';
  return out;
}

void escape_control_characters(std::ostream& stream) {
  // Never freed: std::cout is flushed after every static object is gone,
  // so the buffer must outlive them; the stream keeps it reachable.
  stream.rdbuf(new EscapingBuffer(stream.rdbuf()));
}

}  // namespace memwall
