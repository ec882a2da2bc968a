// Whole-file input for the readers of graphs, plans and lifetimes (output:
// output_files.h). Regular input files are mapped rather than
// copied: see Note [Mapped input] in file_text.cc.
#pragma once

#include <string>
#include <string_view>

namespace memwall {

class FileText {
 public:
  // Throws Error "<path>: cannot open: <reason>" (or "cannot read").
  explicit FileText(const std::string& path);
  ~FileText();
  FileText(const FileText&) = delete;
  FileText& operator=(const FileText&) = delete;

  std::string_view text() const { return text_; }

 private:
  void* map_ = nullptr;  // the mapping, when the file is mapped
  std::string copy_;     // the text, when it is not (pipes, empty files)
  std::string_view text_;
};

}  // namespace memwall
