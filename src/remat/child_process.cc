// Work in a child process under a deadline (child_process.h).
//
// Note [Child under a deadline]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The child writes its answer to a pipe and exits; the parent polls the
// pipe until the deadline, then kills the child with SIGKILL, which nothing
// delays, and reaps it on every path out (Reaper), so no zombie is left.
// Reads and writes retry on EINTR and partial transfers; a child that dies
// of a signal or exits nonzero before the deadline is one Error line.
//
// Fork safety: the child runs only the caller's work (CBC, single-threaded
// here: its `threads` parameter stays 0) and leaves with _exit: it never
// returns into the caller, runs no atexit handlers or destructors (nor
// LeakSanitizer's check, which would report CBC's leaks), and flushes none
// of the stdio buffers it inherited. memwall plans on one thread (the JSON
// reader's second thread is joined before reading returns, json_io.cc), and
// glibc's fork resets malloc's and stdio's locks in the child besides. The
// child's stdout and stderr go to /dev/null (CBC prints even at log level
// 0, and a flush there would repeat what the parent had buffered), its
// interrupt handlers are reset to the default (the parent's cleanup, Note
// [Interrupt cleanup], kills the child instead), and it dies with the
// parent (PR_SET_PDEATHSIG).
#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/interrupt_cleanup.h"

namespace memwall::remat_detail {
namespace {

// Exit statuses of the child besides 0.
constexpr int kWorkThrew = 3;

struct Fds {
  int read = -1;
  int write = -1;
  Fds() {
    int fd[2];
    if (::pipe2(fd, O_CLOEXEC) != 0) fail("cannot create a pipe: {}", std::strerror(errno));
    read = fd[0];
    write = fd[1];
  }
  ~Fds() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
  Fds(const Fds&) = delete;
  Fds& operator=(const Fds&) = delete;
};

// The child's side: never returns.
[[noreturn]] void child_main(const std::function<void(int)>& work, Fds& fds, pid_t parent,
                             const sigset_t& parent_mask) {
  ::close(fds.read);
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kWorkThrew);  // the parent died before prctl
  ::pthread_sigmask(SIG_SETMASK, &parent_mask, nullptr);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  try {
    work(fds.write);
  } catch (...) {
    ::_exit(kWorkThrew);
  }
  ::_exit(0);
}

// Kills (when still running) and reaps the child on every path out.
class Reaper {
 public:
  explicit Reaper(pid_t pid) : pid_(pid) {}
  ~Reaper() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  // Waits for the child to end; its wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0) {
      if (errno != EINTR) break;  // ECHILD: already reaped
    }
    pid_ = -1;
    return status;
  }
  void kill() const { ::kill(pid_, SIGKILL); }

 private:
  pid_t pid_;
};

// Reads from `fd` into `out` until end of file (true) or the deadline (false).
bool read_until(int fd, Deadline deadline, std::string& out, std::string_view what) {
  char chunk[1 << 16];
  pollfd p{fd, POLLIN, 0};
  while (true) {
    const double left = deadline.left();
    if (left <= 0) return false;
    timespec wait{};
    const double capped = std::min(left, 3600.0);
    wait.tv_sec = static_cast<time_t>(capped);
    wait.tv_nsec = static_cast<long>((capped - static_cast<double>(wait.tv_sec)) * 1e9);
    const int ready = ::ppoll(&p, 1, &wait, nullptr);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("{}: waiting for its process: {}", what, std::strerror(errno));
    }
    if (ready == 0) continue;  // the deadline, checked above
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail("{}: reading from its process: {}", what, std::strerror(errno));
    }
    if (n == 0) return true;
    out.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace

bool write_all(int fd, const void* data, size_t size) {
  const char* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, at, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

ChildRun run_in_child(const std::function<void(int fd)>& work, Deadline deadline,
                      std::string_view what) {
  Fds fds;
  const pid_t parent = ::getpid();
  pid_t pid = -1;
  std::optional<KillOnInterrupt> kill_on_interrupt;
  {
    // An interrupt between fork and registration would leave the child
    // running; the child restores the mask it had before.
    sigset_t previous;
    const sigset_t held = HoldInterrupts::signals();
    ::pthread_sigmask(SIG_BLOCK, &held, &previous);
    pid = ::fork();
    if (pid == 0) child_main(work, fds, parent, previous);
    if (pid > 0) kill_on_interrupt.emplace(pid);
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }
  if (pid < 0) fail("{}: cannot start its process: {}", what, std::strerror(errno));
  Reaper reaper(pid);
  ::close(fds.write);
  fds.write = -1;

  ChildRun run;
  const bool ended = read_until(fds.read, deadline, run.bytes, what);
  if (!ended) reaper.kill();
  const int status = reaper.wait();
  if (!ended) return run;  // killed at the deadline; what it wrote is the caller's to judge
  if (WIFSIGNALED(status)) {
    fail("{}: its process died of signal {} ({}) before the time limit", what, WTERMSIG(status),
         ::strsignal(WTERMSIG(status)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    fail("{}: its process failed ({})", what,
         WEXITSTATUS(status) == kChildWriteFailed
             ? "it could not write its answer"
             : fmt::format("exit status {}", WEXITSTATUS(status)));
  }
  run.finished = true;
  return run;
}

}  // namespace memwall::remat_detail
