// Text for XML documents.
#pragma once

#include <string>
#include <string_view>

namespace memwall::report {

// Appends `text` escaped for XML character data and attribute values (&, <,
// >, both quotes). Characters XML 1.0 forbids (C0 controls but tab, newline
// and carriage return) and invalid UTF-8 become U+FFFD, so any input yields a
// well-formed document.
void append_xml_text(std::string& out, std::string_view text);

}  // namespace memwall::report
