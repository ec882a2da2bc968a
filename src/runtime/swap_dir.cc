#include "memwall/runtime/swap_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

namespace memwall::runtime {
namespace {

std::string swap_errno_text(int err) { return std::strerror(err); }

std::string swap_file_name(const std::string& dir) {
  // Note [Swap file names]: pid + 64 random bits, created with O_EXCL, so a
  // file of another run (alive, or crashed and not cleaned up) is never
  // opened, let alone overwritten or removed; a crashed run's files carry
  // its pid for whoever cleans up.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char name[96];
  std::snprintf(name, sizeof name, "/memwall-swap-%d-%016llx.bin", static_cast<int>(getpid()),
                static_cast<unsigned long long>(rng()));
  return dir + name;
}

}  // namespace

void check_swap_dir(const std::string& dir) {
  if (dir.empty()) throw std::runtime_error("nvme: swap directory is an empty path");
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    throw std::runtime_error("nvme: swap directory '" + dir + "': " + swap_errno_text(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw std::runtime_error("nvme: swap directory '" + dir + "' is not a directory");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error("nvme: swap directory '" + dir +
                             "' is not writable: " + swap_errno_text(errno));
  }
}

SwapFile::SwapFile(const std::string& dir, uint64_t bytes, bool direct, bool simulate_no_direct)
    : size_(bytes) {
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    path_ = swap_file_name(dir);
    int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
    if (direct && !simulate_no_direct) {
      fd_ = open(path_.c_str(), flags | O_DIRECT, 0600);
      if (fd_ >= 0) {
        direct_ = true;
        break;
      }
      if (errno != EINVAL) {
        if (errno == EEXIST) continue;
        throw std::runtime_error("nvme: cannot create swap file '" + path_ +
                                 "': " + swap_errno_text(errno));
      }
      // EINVAL: no O_DIRECT here; the file may exist now, created before
      // the flag was refused on some filesystems.
      unlink(path_.c_str());
    }
    fd_ = open(path_.c_str(), flags, 0600);
    if (fd_ < 0 && errno != EEXIST) {
      throw std::runtime_error("nvme: cannot create swap file '" + path_ +
                               "': " + swap_errno_text(errno));
    }
  }
  if (fd_ < 0) throw std::runtime_error("nvme: no unique swap file name in '" + dir + "'");
  int err = posix_fallocate(fd_, 0, static_cast<off_t>(bytes));
  if (err == EOPNOTSUPP || err == EINVAL) {
    err = ftruncate(fd_, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  }
  if (err != 0) {
    close(fd_);
    unlink(path_.c_str());
    throw std::runtime_error("nvme: cannot reserve " + std::to_string(bytes) + " bytes for '" +
                             path_ + "': " + swap_errno_text(err));
  }
}

SwapFile::~SwapFile() {
  if (fd_ >= 0) close(fd_);
  unlink(path_.c_str());
}

}  // namespace memwall::runtime
