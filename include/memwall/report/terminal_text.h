// What memwall prints never drives the terminal: names come from files and
// command lines, and a graph named "\x1b]0;...\x07" must not retitle the
// window or hide a line (Note [Terminal text] in src/report/terminal_text.cc).
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace memwall {

// `text` with every control character but newline and tab written as
// \u00XX: C0 controls, DEL, and the C1 controls U+0080-U+009F (UTF-8
// C2 80 - C2 9F). The escape is valid inside JSON strings too.
std::string escape_control_characters(std::string_view text);

// From now on, everything written to `stream` goes through the escape above.
// For std::cout and std::cerr, for the life of the process.
void escape_control_characters(std::ostream& stream);

}  // namespace memwall
