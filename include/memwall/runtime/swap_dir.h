// Swap files of the NVMe engine: created in a directory the user names, with
// a name no other run can hold (pid + 64 random bits, O_CREAT | O_EXCL),
// opened with O_DIRECT when the filesystem allows it, and unlinked as soon
// as they are created (Note [Swap files without names] in swap_dir.cc): the
// kernel frees their space when the engine closes them or the process dies,
// however it dies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memwall::runtime {

// Throws std::runtime_error with one line naming the directory when it does
// not exist, is not a directory, or is not writable.
void check_swap_dir(const std::string& dir);

// Swap files left in `dir` by processes that are gone (Note [Stale swap
// files]): removed, with their bytes.
struct StaleSwapFiles {
  std::vector<std::string> paths;
  uint64_t bytes = 0;
};
StaleSwapFiles remove_stale_swap_files(const std::string& dir);
// One line for the user about what remove_stale_swap_files removed; empty
// when nothing.
std::string stale_swap_note(const StaleSwapFiles& removed);

class SwapFile {
 public:
  // Creates a fresh file of `bytes` bytes (fallocate'd, so that a full drive
  // is reported here rather than mid-run) in `dir`, and unlinks it. `direct`:
  // ask for O_DIRECT; if the filesystem refuses it (EINVAL, e.g. tmpfs on
  // older kernels, or `simulate_no_direct`), the file is opened buffered and
  // direct() is false.
  SwapFile(const std::string& dir, uint64_t bytes, bool direct, bool simulate_no_direct = false);
  ~SwapFile();  // closes: the kernel frees the space
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  int fd() const { return fd_; }
  // The name it was created under, for messages: no longer in the directory.
  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  uint64_t size_ = 0;
};

}  // namespace memwall::runtime
