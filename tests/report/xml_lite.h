// Test helper: a minimal XML reader, strict enough to tell whether a document
// is well-formed (one root, balanced and matching tags, quoted unique
// attributes, only known entities, no raw '<' or '&') and simple enough to
// query the SVG report. No DTDs, no CDATA: memory_svg writes neither.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memwall::testing {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;  // values decoded
  std::string text;                               // own character data, decoded
  int depth = 0;                                  // the root is 0
};

class XmlReader {
 public:
  // Elements in document order; throws std::runtime_error at the first
  // well-formedness error, naming the offset.
  static std::vector<XmlElement> parse(std::string_view text) {
    XmlReader reader(text);
    reader.document();
    return std::move(reader.elements_);
  }

 private:
  explicit XmlReader(std::string_view text) : text_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("xml: " + what + " at offset " + std::to_string(pos_));
  }
  bool at(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  bool done() const { return pos_ >= text_.size(); }
  void expect(std::string_view s) {
    if (!at(s)) fail("expected '" + std::string(s) + "'");
    pos_ += s.size();
  }
  void skip_space() {
    while (!done() && std::string_view(" \t\r\n").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
  }
  static bool name_char(char c, bool first) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    return letter || (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
  }
  std::string name() {
    const size_t start = pos_;
    while (!done() && name_char(text_[pos_], pos_ == start)) ++pos_;
    if (pos_ == start) fail("expected a name");
    return std::string(text_.substr(start, pos_ - start));
  }
  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }
  // At '&': appends the character the reference stands for.
  void reference(std::string& out) {
    const size_t end = text_.find(';', pos_);
    if (end == std::string_view::npos || end - pos_ > 10) fail("unterminated reference");
    const std::string_view ref = text_.substr(pos_ + 1, end - pos_ - 1);
    static const std::map<std::string_view, char> kNamed = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    if (const auto it = kNamed.find(ref); it != kNamed.end()) {
      out += it->second;
    } else if (ref.size() > 1 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string digits(ref.substr(hex ? 2 : 1));
      if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF"
                                                         : "0123456789") != std::string::npos) {
        fail("bad character reference");
      }
      append_utf8(out, static_cast<uint32_t>(std::stoul(digits, nullptr, hex ? 16 : 10)));
    } else {
      fail("unknown entity '" + std::string(ref) + "'");
    }
    pos_ = end + 1;
  }
  std::string attribute_value() {
    if (done() || (text_[pos_] != '"' && text_[pos_] != '\'')) fail("unquoted attribute");
    const char quote = text_[pos_++];
    std::string value;
    while (true) {
      if (done()) fail("unterminated attribute");
      const char c = text_[pos_];
      if (c == quote) break;
      if (c == '<') fail("'<' in attribute");
      if (c == '&') {
        reference(value);
      } else {
        value += c;
        ++pos_;
      }
    }
    ++pos_;
    return value;
  }
  // Comments and processing instructions (the XML declaration included).
  bool misc() {
    if (at("<!--")) {
      const size_t end = text_.find("-->", pos_ + 4);
      if (end == std::string_view::npos) fail("unterminated comment");
      pos_ = end + 3;
      return true;
    }
    if (at("<?")) {
      const size_t end = text_.find("?>", pos_ + 2);
      if (end == std::string_view::npos) fail("unterminated processing instruction");
      pos_ = end + 2;
      return true;
    }
    if (at("<!")) fail("DTDs and CDATA are not supported");
    return false;
  }
  void element(int depth) {
    expect("<");
    XmlElement node;
    node.depth = depth;
    node.name = name();
    while (true) {
      const size_t before = pos_;
      skip_space();
      if (at("/>") || at(">")) break;
      if (pos_ == before) fail("expected space before an attribute");
      std::string key = name();
      skip_space();
      expect("=");
      skip_space();
      if (!node.attributes.emplace(key, attribute_value()).second) {
        fail("duplicate attribute " + key);
      }
    }
    const size_t index = elements_.size();
    elements_.push_back(node);
    if (at("/>")) {
      pos_ += 2;
      return;
    }
    expect(">");
    while (true) {
      if (done()) fail("unclosed <" + node.name + ">");
      if (at("</")) break;
      if (misc()) continue;
      if (at("<")) {
        element(depth + 1);
      } else if (at("]]>")) {
        fail("']]>' in text");
      } else if (at("&")) {
        reference(elements_[index].text);
      } else {
        elements_[index].text += text_[pos_++];
      }
    }
    expect("</");
    if (name() != node.name) fail("mismatched end tag for <" + node.name + ">");
    skip_space();
    expect(">");
  }
  void document() {
    int roots = 0;
    while (true) {
      skip_space();
      if (done()) break;
      if (misc()) continue;
      if (roots++ > 0) fail("a second root element");
      element(0);
    }
    if (roots != 1) fail("no root element");
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<XmlElement> elements_;
};

}  // namespace memwall::testing
