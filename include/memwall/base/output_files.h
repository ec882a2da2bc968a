// The files one command writes: all of them, or none (Note [Output files]
// in output_files.cc). A verb declares every output before its work, so a
// path that cannot be written is reported before minutes of planning; sets
// each text when it has it; and commits at the end.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memwall {

class OutputFiles {
 public:
  OutputFiles();
  ~OutputFiles();  // removes the temporaries of a set that was not committed
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;

  // Declares an output: resolves `path` (symbolic links followed to their
  // target; the process's own standard output or error, FIFOs and character
  // devices are written straight into at commit) and, for a regular file or
  // a new path, creates its temporary next to the target now. Throws Error
  // "cannot write PATH: reason" naming the user's path: a directory, a
  // missing directory, no permission, a socket or block device, the same
  // file declared twice. An empty path (an option not given) is ignored.
  void declare(const std::string& path);

  // The text of a declared output: written to its temporary and synced now,
  // or kept for a stream until commit. Throws Error naming the path.
  void set(const std::string& path, std::string_view text);

  // Makes the outputs appear: streams are written first, then every
  // temporary is renamed over its target. Throws Error naming the output
  // that failed; before the first rename nothing has appeared.
  void commit();

 private:
  struct Output;
  Output& find(const std::string& path);
  std::vector<std::unique_ptr<Output>> outputs_;
};

// One output alone: `path` is never half-written (see OutputFiles).
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace memwall
