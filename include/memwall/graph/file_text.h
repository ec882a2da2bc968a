// Whole-file input and atomic output for the readers and writers of graphs,
// plans, traces and plots. Regular input files are mapped rather than
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

// Writes `text` to `path` through a temporary file (fsync, then rename), so
// that `path` is never half-written. Throws Error naming the path.
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace memwall
