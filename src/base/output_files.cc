// Writing a command's outputs (output_files.h).
//
// Note [Output files]
// ~~~~~~~~~~~~~~~~~~~
// What a path names decides how it is written:
// - a regular file, or a path that does not exist yet: through a uniquely
//   named temporary in the target's directory (mkstemp, so that a user's
//   own "out.json.tmp" is never touched), synced, then renamed over the
//   target: the target is either old or complete, never half-written. The
//   temporary takes the replaced file's permission bits (and owner, where
//   allowed), as editing the file in place would have kept them;
// - a symbolic link: followed to its target, which is then written as
//   above; the link stays a link (a dangling link gets its target created);
// - a FIFO or a character device (/dev/null, a terminal): opened and
//   written straight into; renaming over one would replace the node itself
//   (a FIFO's reader would get nothing, /dev/full would become a file);
// - the process's own standard output or error, however it is named
//   (/dev/stdout, /proc/self/fd/1, or the very file stdout is redirected
//   to): written to that descriptor, after what the verb printed so far;
// - a directory, a socket or a block device: refused.
// All or none: every output is declared (and its temporary created) before
// the work, so an unwritable path fails fast; texts go to temporaries as
// they come; commit writes the streams and only then renames, so an error
// anywhere before the first rename leaves every target as it was. Renames
// within one directory do not fail for want of space, so the window in
// which some outputs have appeared and a later one fails is small, and
// the message then says so. Temporaries are removed on every error path,
// by the destructor, and on SIGINT/SIGTERM/SIGHUP (interrupt_cleanup.h).
#include "memwall/base/output_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "memwall/base/error.h"
#include "memwall/base/interrupt_cleanup.h"

namespace memwall {

// How an output reaches its path (Note [Output files]). Not in the
// anonymous namespace: OutputFiles::Output, a member of a public class,
// holds one.
enum class How { kReplace, kStream, kOwnDescriptor };

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// 1 or 2 when `info` is this process's standard output or error.
int own_descriptor(const struct stat& info) {
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat mine {};
    if (::fstat(fd, &mine) == 0 && same_file(mine, info)) return fd;
  }
  return -1;
}

std::string_view node_name(mode_t mode) {
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file, FIFO or character device";
}

// Writes all of `text` to `fd`; false with errno set on failure.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// SIGPIPE ignored while it lives: a FIFO whose reader went away is an
// error to report (EPIPE), not a reason to die silently.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &previous_);
  }
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &previous_, nullptr); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

 private:
  struct sigaction previous_ {};
};

mode_t new_file_mode() {
  const mode_t mask = ::umask(0);  // read it: umask has no getter
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

struct OutputFiles::Output {
  std::string path;  // as the user gave it: every message names this
  How how = How::kReplace;
  std::string target;     // kReplace: the file renamed over; kStream: the node opened
  int descriptor = -1;    // kOwnDescriptor: 1 or 2
  std::string temporary;  // kReplace
  int temporary_fd = -1;
  std::optional<RemoveOnInterrupt> cleanup;
  std::optional<struct stat> existing;  // kReplace over an existing file
  std::string text;                     // streams: written at commit
  bool is_set = false;

  ~Output() {
    if (temporary_fd >= 0) ::close(temporary_fd);
    if (!temporary.empty()) ::unlink(temporary.c_str());
  }

  // Follows `path` to what it names (Note [Output files]).
  void resolve() {
    std::string p = path;
    for (int hops = 0;; ++hops) {
      struct stat link {};
      if (::lstat(p.c_str(), &link) != 0) {
        if (errno != ENOENT) fail("cannot write {}: {}", path, std::strerror(errno));
        struct stat dir {};
        const std::string parent = directory_of(p);
        if (::stat(parent.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
          fail("cannot write {}: no directory {}", path, parent);
        }
        target = p;
        return;
      }
      // A non-link is what it names; a link is followed (it may dangle).
      struct stat info = link;
      const bool followed = !S_ISLNK(link.st_mode) || ::stat(p.c_str(), &info) == 0;
      if (followed) {
        if (const int fd = own_descriptor(info); fd >= 0) {
          how = How::kOwnDescriptor;
          descriptor = fd;
          return;
        }
        if (S_ISDIR(info.st_mode)) fail("cannot write {}: it is a directory", path);
        if (S_ISFIFO(info.st_mode) || S_ISCHR(info.st_mode)) {
          how = How::kStream;
          target = p;
          return;
        }
        if (!S_ISREG(info.st_mode))
          fail("cannot write {}: it is {}", path, node_name(info.st_mode));
      }
      if (!S_ISLNK(link.st_mode)) {
        if (::access(p.c_str(), W_OK) != 0) {
          fail("cannot write {}: {}", path, std::strerror(errno));
        }
        existing = link;
        target = p;
        return;
      }
      // A link to a regular file, or a dangling one: go one hop further.
      if (hops >= 40) fail("cannot write {}: {}", path, std::strerror(ELOOP));
      char buffer[PATH_MAX];
      const ssize_t n = ::readlink(p.c_str(), buffer, sizeof buffer - 1);
      if (n < 0) fail("cannot write {}: {}", path, std::strerror(errno));
      std::string next(buffer, static_cast<size_t>(n));
      p = next.starts_with('/') ? next : directory_of(p) + "/" + next;
    }
  }

  void create_temporary() {
    // ".NAME.memwall-XXXXXX": hidden, named after its target, unique.
    std::string base = base_of(target).substr(0, 200);
    std::string pattern = directory_of(target) + "/." + base + ".memwall-XXXXXX";
    const HoldInterrupts hold;  // until the temporary is registered
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) fail("cannot write {}: {}", path, std::strerror(errno));
    temporary = pattern;
    temporary_fd = fd;
    cleanup.emplace(temporary, RemoveOnInterrupt::Kind::kFile);
    const mode_t mode = existing ? existing->st_mode & 07777 : new_file_mode();
    if (existing) {
      // Keep the owner where we may (root replacing a user's file).
      [[maybe_unused]] const int ignored = ::fchown(fd, existing->st_uid, existing->st_gid);
    }
    if (::fchmod(fd, mode) != 0) fail("cannot write {}: {}", path, std::strerror(errno));
  }

  void write_temporary(std::string_view content) {
    // fsync before the rename: after a crash the target is old or complete.
    const bool written = write_all(temporary_fd, content) && ::fsync(temporary_fd) == 0;
    const int write_errno = errno;
    const bool closed = ::close(temporary_fd) == 0;
    const int close_errno = errno;
    temporary_fd = -1;
    if (!written) fail("cannot write {}: {}", path, std::strerror(write_errno));
    if (!closed) fail("cannot write {}: {}", path, std::strerror(close_errno));
  }

  void write_stream() const {
    std::fflush(nullptr);  // what the verb printed so far comes first
    const IgnoreSigpipe no_sigpipe;
    int fd = descriptor;
    if (how == How::kStream) {
      fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) fail("cannot write {}: {}", path, std::strerror(errno));
    }
    const bool ok = write_all(fd, text);
    const int saved = errno;
    if (how == How::kStream) ::close(fd);
    if (!ok) fail("cannot write {}: {}", path, std::strerror(saved));
  }
};

OutputFiles::OutputFiles() = default;
OutputFiles::~OutputFiles() = default;

void OutputFiles::declare(const std::string& path) {
  if (path.empty()) return;
  auto out = std::make_unique<Output>();
  out->path = path;
  out->resolve();
  if (out->how == How::kReplace) {
    for (const auto& other : outputs_) {
      if (other->how != How::kReplace) continue;
      const bool same = out->existing && other->existing
                            ? same_file(*out->existing, *other->existing)
                            : out->target == other->target;
      if (same) fail("cannot write {}: it is also the output {}", path, other->path);
    }
    out->create_temporary();
  }
  outputs_.push_back(std::move(out));
}

OutputFiles::Output& OutputFiles::find(const std::string& path) {
  for (const auto& out : outputs_) {
    if (out->path == path) return *out;
  }
  fail("internal error: output {} was not declared", path);
}

void OutputFiles::set(const std::string& path, std::string_view text) {
  Output& out = find(path);
  if (out.is_set) fail("internal error: output {} written twice", path);
  if (out.how == How::kReplace) {
    out.write_temporary(text);
  } else {
    out.text = std::string(text);
  }
  out.is_set = true;
}

void OutputFiles::commit() {
  for (const auto& out : outputs_) {
    if (!out->is_set) fail("internal error: output {} was declared but not written", out->path);
  }
  for (const auto& out : outputs_) {
    if (out->how != How::kReplace) out->write_stream();
  }
  std::string appeared;
  for (const auto& out : outputs_) {
    if (out->how != How::kReplace) continue;
    if (::rename(out->temporary.c_str(), out->target.c_str()) != 0) {
      const int saved = errno;
      fail("cannot write {}: {}{}", out->path, std::strerror(saved),
           appeared.empty() ? "" : fmt::format(" ({} already written)", appeared));
    }
    out->temporary.clear();
    out->cleanup.reset();
    appeared += (appeared.empty() ? "" : ", ") + out->path;
  }
  outputs_.clear();
}

void write_file_atomically(const std::string& path, std::string_view text) {
  OutputFiles out;
  out.declare(path);
  out.set(path, text);
  out.commit();
}

}  // namespace memwall
