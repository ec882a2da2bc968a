// Cleanup on SIGINT, SIGTERM and SIGHUP (interrupt_cleanup.h).
//
// Note [Interrupt cleanup]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A command interrupted while it plans must not leave its output
// temporaries (output_files.cc) or `memwall trace`'s private directory
// behind. The handler may run at any instruction of any thread, so it only
// reads a fixed table of slots and calls async-signal-safe functions
// (kill, waitpid, unlink, rmdir, sigaction, raise). A slot is claimed with a
// compare-and-swap, its path copied in, and only then published with a
// release store of its kind; the handler acts on published slots only. A
// slot released while the handler runs may be acted on once more: its path
// has then already been removed by its owner, or renamed away, and
// unlinking it again fails harmlessly with ENOENT.
// Order: children first (killed and reaped, so they write no more), then
// files, then directories (which are empty once their files are gone),
// in passes until one removes nothing: a directory registered inside
// another (a private directory's values/) goes before its parent,
// whichever slot each holds.
// SA_RESETHAND restores the default action, and raise() re-sends the signal
// so that the shell sees "killed by SIGINT" as usual.
#include "memwall/base/interrupt_cleanup.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "memwall/base/error.h"

extern char** environ;

namespace memwall {
namespace {

enum SlotState : int { kFree, kClaimed, kFile, kDirectory, kChild };

struct Slot {
  std::atomic<int> state{kFree};
  pid_t pid = 0;
  char path[4096] = {};
};

constexpr int kSlots = 256;
Slot g_slots[kSlots];

int claim(int kind, const std::string& path, pid_t pid) {
  if (path.size() >= sizeof(Slot::path)) fail("{}: path too long", path);
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kClaimed)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].pid = pid;
      g_slots[i].state.store(kind, std::memory_order_release);
      return i;
    }
  }
  fail("more than {} temporaries at once", kSlots);
}

void release(int slot) { g_slots[slot].state.store(kFree, std::memory_order_release); }

// Kills the registered children, then removes the files and directories.
void remove_registered() {
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) == kChild) {
      ::kill(s.pid, SIGKILL);
      int status = 0;
      while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) == kFile) ::unlink(s.path);
  }
  for (bool removed = true; removed;) {
    removed = false;
    for (Slot& s : g_slots) {
      if (s.state.load(std::memory_order_acquire) == kDirectory && ::rmdir(s.path) == 0) {
        removed = true;
      }
    }
  }
}

extern "C" void on_interrupt(int signal_number) {
  const int saved_errno = errno;
  remove_registered();
  errno = saved_errno;
  ::raise(signal_number);  // the default action, restored by SA_RESETHAND
}

}  // namespace

void exit_after_cleanup(int code) {
  remove_registered();
  std::_Exit(code);
}

void install_interrupt_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    action.sa_flags = SA_RESETHAND;
    sigfillset(&action.sa_mask);                     // no second handler inside the first
    for (const int s : {SIGINT, SIGTERM, SIGHUP}) {  // HoldInterrupts::signals()
      struct sigaction previous {};
      // A signal the caller ignores (nohup, `trap '' INT`) stays ignored.
      if (::sigaction(s, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
      ::sigaction(s, &action, nullptr);
    }
  });
}

RemoveOnInterrupt::RemoveOnInterrupt(const std::string& path, Kind kind)
    : slot_(claim(kind == Kind::kFile ? kFile : kDirectory, path, 0)) {}

RemoveOnInterrupt::~RemoveOnInterrupt() { release(slot_); }

KillOnInterrupt::KillOnInterrupt(pid_t pid) : slot_(claim(kChild, "", pid)) {}

KillOnInterrupt::~KillOnInterrupt() { release(slot_); }

SpawnedChild spawn_killed_on_interrupt(const std::string& path,
                                       const posix_spawn_file_actions_t* actions,
                                       char* const argv[]) {
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  SpawnedChild child;
  {
    const HoldInterrupts hold;  // until the child is registered
    child.error = ::posix_spawn(&child.pid, path.c_str(), actions, &attributes, argv, environ);
    if (child.error == 0) child.kill = std::make_unique<KillOnInterrupt>(child.pid);
  }
  posix_spawnattr_destroy(&attributes);
  return child;
}

sigset_t HoldInterrupts::signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  return set;
}

HoldInterrupts::HoldInterrupts() {
  const sigset_t held = signals();
  pthread_sigmask(SIG_BLOCK, &held, &previous_);
}

HoldInterrupts::~HoldInterrupts() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace memwall
