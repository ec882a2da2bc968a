// The one JSON string writer (memwall/base/json_string.h): the exact text of
// every kind of character, both flavours.
#include "memwall/base/json_string.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace memwall {
namespace {

using namespace std::string_view_literals;

struct Case {
  std::string_view text;
  std::string_view strict;  // append_json_string; empty: not UTF-8, refused
  std::string_view lossy;   // append_json_string_lossy
};

// What graph and plan files (strict) and the Chrome trace (lossy) hold for
// each input; the strict column is what src/graph/json_write.cc and
// src/plan/json_write.cc wrote before they shared this writer, the lossy
// one what nlohmann::json's dump() writes with error_handler_t::replace.
const Case kCases[] = {
    {""sv, R"("")"sv, R"("")"sv},
    {"plain h0.attn"sv, R"("plain h0.attn")"sv, R"("plain h0.attn")"sv},
    {"a\"b"sv, R"("a\"b")"sv, R"("a\"b")"sv},
    {"a\\b"sv, R"("a\\b")"sv, R"("a\\b")"sv},
    {"/"sv, R"("/")"sv, R"("/")"sv},
    {"\0"sv, R"("\u0000")"sv, R"("\u0000")"sv},
    {"\x01"sv, R"("\u0001")"sv, R"("\u0001")"sv},
    {"\b"sv, R"("\u0008")"sv, R"("\b")"sv},
    {"\t"sv, R"("\u0009")"sv, R"("\t")"sv},
    {"\n"sv, R"("\u000a")"sv, R"("\n")"sv},
    {"\x0b"sv, R"("\u000b")"sv, R"("\u000b")"sv},
    {"\f"sv, R"("\u000c")"sv, R"("\f")"sv},
    {"\r"sv, R"("\u000d")"sv, R"("\r")"sv},
    {"\x1b[31m"sv, R"("\u001b[31m")"sv, R"("\u001b[31m")"sv},
    {"\x1f"sv, R"("\u001f")"sv, R"("\u001f")"sv},
    {" ~"sv, R"(" ~")"sv, R"(" ~")"sv},
    {"\x7f"sv, "\"\x7f\""sv, "\"\x7f\""sv},                          // DEL is not escaped
    {"caf\xC3\xA9"sv, "\"caf\xC3\xA9\""sv, "\"caf\xC3\xA9\""sv},     // U+00E9
    {"\xC2\x80"sv, "\"\xC2\x80\""sv, "\"\xC2\x80\""sv},              // U+0080, a C1 control
    {"\xE2\x86\x92"sv, "\"\xE2\x86\x92\""sv, "\"\xE2\x86\x92\""sv},  // U+2192
    {"\xEF\xBF\xBF"sv, "\"\xEF\xBF\xBF\""sv, "\"\xEF\xBF\xBF\""sv},  // U+FFFF
    {"\xF0\x9F\x98\x80"sv, "\"\xF0\x9F\x98\x80\""sv, "\"\xF0\x9F\x98\x80\""sv},  // U+1F600
    {"\xF4\x8F\xBF\xBF"sv, "\"\xF4\x8F\xBF\xBF\""sv, "\"\xF4\x8F\xBF\xBF\""sv},  // U+10FFFF
    // Not UTF-8: refused, or U+FFFD for each maximal invalid subpart.
    {"\x80"sv, ""sv, "\"\xEF\xBF\xBD\""sv},                                  // lone continuation
    {"a\xFFz"sv, ""sv, "\"a\xEF\xBF\xBDz\""sv},                              // never in UTF-8
    {"\xC0\xAF"sv, ""sv, "\"\xEF\xBF\xBD\xEF\xBF\xBD\""sv},                  // overlong '/'
    {"\xC3"sv, ""sv, "\"\xEF\xBF\xBD\""sv},                                  // cut at the end
    {"\xE2\x82x"sv, ""sv, "\"\xEF\xBF\xBDx\""sv},                            // cut before 'x'
    {"\xE0\x80\x80"sv, ""sv, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""sv},  // overlong
    {"\xED\xA0\x80"sv, ""sv, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""sv},  // surrogate
    {"\xF0\x9F\x98"sv, ""sv, "\"\xEF\xBF\xBD\""sv},                          // 3 of 4 bytes
    {"\xF4\x90\x80\x80"sv, ""sv,
     "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""sv},  // above U+10FFFF
    {"\xF0\x9F\x98\n"sv, ""sv, "\"\xEF\xBF\xBD\\n\""sv},         // cut by a control
};

TEST(JsonString, EveryKindOfCharacterExactly) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::PrintToString(std::string(c.text)));
    std::string strict = "[";
    const bool ok = append_json_string(strict, c.text);
    EXPECT_EQ(ok, !c.strict.empty());
    if (ok) {
      EXPECT_EQ(strict, "[" + std::string(c.strict));
    }
    std::string lossy = "[";
    append_json_string_lossy(lossy, c.text);
    EXPECT_EQ(lossy, "[" + std::string(c.lossy));
  }
}

// Random byte strings, most of them not UTF-8: the lossy flavour writes what
// nlohmann::json writes, and the strict one writes text that reads back as
// the string, or refuses exactly what nlohmann::json refuses.
TEST(JsonString, AgreesWithNlohmannJsonOnRandomBytes) {
  std::mt19937_64 rng(46);
  // Bytes at the edges of UTF-8's ranges, and any byte.
  const unsigned char edges[] = {0x00, 0x08, 0x0a, 0x1f, 0x20, '"',  '\\', 'a',
                                 0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2,
                                 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
  int refused = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    std::string text;
    const size_t length = rng() % 8;
    for (size_t k = 0; k < length; ++k) {
      text += static_cast<char>(rng() % 3 == 0 ? rng() % 256 : edges[rng() % sizeof edges]);
    }
    SCOPED_TRACE(testing::PrintToString(text));
    const nlohmann::json value(text);
    std::string lossy;
    append_json_string_lossy(lossy, text);
    ASSERT_EQ(lossy, value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::string strict;
    bool utf8 = true;
    try {
      (void)value.dump();
    } catch (const nlohmann::json::type_error&) {
      utf8 = false;
    }
    ASSERT_EQ(append_json_string(strict, text), utf8);
    if (utf8) {
      ASSERT_EQ(nlohmann::json::parse(strict).get<std::string>(), text);
    } else {
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000);  // the invalid side was exercised
}

}  // namespace
}  // namespace memwall
