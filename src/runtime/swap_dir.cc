#include "memwall/runtime/swap_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string_view>

namespace memwall::runtime {
namespace {

std::string swap_errno_text(int err) { return std::strerror(err); }

constexpr std::string_view kSwapPrefix = "memwall-swap-";
constexpr std::string_view kSwapSuffix = ".bin";

std::string swap_file_name(const std::string& dir) {
  // Note [Swap file names]: pid + 64 random bits, created with O_EXCL, so a
  // file of another run (alive, or crashed and not cleaned up) is never
  // opened, let alone overwritten; a crashed run's files carry its pid for
  // whoever cleans up (Note [Stale swap files]).
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char name[96];
  std::snprintf(name, sizeof name, "/%s%d-%016llx%s", kSwapPrefix.data(),
                static_cast<int>(getpid()), static_cast<unsigned long long>(rng()),
                kSwapSuffix.data());
  return dir + name;
}

// The pid in a name swap_file_name made, or 0 for any other name.
pid_t swap_file_pid(std::string_view name) {
  if (!name.starts_with(kSwapPrefix) || !name.ends_with(kSwapSuffix)) return 0;
  name.remove_prefix(kSwapPrefix.size());
  name.remove_suffix(kSwapSuffix.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || name.size() - dash - 1 != 16) return 0;
  for (const char c : name.substr(dash + 1)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
  }
  int pid = 0;
  const auto [end, err] = std::from_chars(name.data(), name.data() + dash, pid);
  if (err != std::errc() || end != name.data() + dash || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

std::string swap_bytes_text(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
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

// Note [Stale swap files]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A swap file has a name only between its creation and its unlink a few
// system calls later (Note [Swap files without names]): a process killed
// in between, or a memwall from before swap files lost their names, leaves
// one behind. An engine starting in a directory removes the files named
// memwall-swap-<pid>-<16 hex>.bin whose pid is no process here (kill(pid,
// 0) fails with ESRCH) and that no process holds locked: their creator
// takes flock(LOCK_EX) before it unlinks, so the file of a live run in
// another pid namespace sharing the directory is left alone. A dead run's
// pid taken by a live process keeps its file until a later sweep: a sweep
// errs towards leaving a file, never removes a live run's. (Unlinking a
// file some process still has open would not disturb it anyway: its
// descriptor keeps the data until it closes.) The file is checked to be
// the regular file that was locked, under the same name, before it goes.
StaleSwapFiles remove_stale_swap_files(const std::string& dir) {
  StaleSwapFiles out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  const int dfd = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = swap_file_pid(e->d_name);
    if (pid == 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const int fd = ::openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat locked {
    }, named{};
    if (::fstat(fd, &locked) == 0 && S_ISREG(locked.st_mode) &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(dfd, e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        named.st_dev == locked.st_dev && named.st_ino == locked.st_ino &&
        ::unlinkat(dfd, e->d_name, 0) == 0) {
      out.paths.push_back(dir + "/" + e->d_name);
      out.bytes += static_cast<uint64_t>(locked.st_size);
    }
    ::close(fd);
  }
  ::closedir(d);
  std::sort(out.paths.begin(), out.paths.end());
  return out;
}

std::string stale_swap_note(const StaleSwapFiles& removed) {
  const size_t n = removed.paths.size();
  if (n == 0) return {};
  std::string note = "removed " + std::to_string(n) + " stale swap file" + (n == 1 ? "" : "s") +
                     " (" + swap_bytes_text(removed.bytes) + ") of " +
                     (n == 1 ? "a process that is" : "processes that are") + " gone: ";
  constexpr size_t kNamed = 3;
  for (size_t i = 0; i < std::min(n, kNamed); ++i) note += (i > 0 ? ", " : "") + removed.paths[i];
  if (n > kNamed) note += " and " + std::to_string(n - kNamed) + " more";
  return note;
}

// Note [Swap files without names]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The engine reaches its files through their descriptors only, so each is
// unlinked as soon as it is created and locked: the kernel frees its
// space when the descriptor closes, when the engine goes or when the
// process dies, by Ctrl-C, SIGTERM or kill -9 alike, with no handler to
// run (the runtime depends on no interrupt machinery, DESIGN.md). Nothing
// is left in the directory; the name stays for messages. `df` still counts
// the space while the run holds it.
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
  // Note [Stale swap files]: the lock says "alive" to a sweep that sees
  // the name before it goes. A sweep may have taken it first (it then
  // unlinks the name itself); the descriptor is ours either way.
  (void)flock(fd_, LOCK_EX | LOCK_NB);
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    throw std::runtime_error("nvme: cannot unlink swap file '" + path_ +
                             "' after creating it: " + swap_errno_text(err));
  }
  int err = posix_fallocate(fd_, 0, static_cast<off_t>(bytes));
  if (err == EOPNOTSUPP || err == EINVAL) {
    err = ftruncate(fd_, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  }
  if (err != 0) {
    close(fd_);
    throw std::runtime_error("nvme: cannot reserve " + std::to_string(bytes) + " bytes for '" +
                             path_ + "': " + swap_errno_text(err));
  }
}

SwapFile::~SwapFile() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace memwall::runtime
