// What an interrupted command leaves behind: nothing. Temporary files,
// private directories and child processes registered here are removed (or
// killed) when SIGINT, SIGTERM or SIGHUP arrives; then the signal takes its
// default action, so the exit status still says which signal it was. See
// Note [Interrupt cleanup] in interrupt_cleanup.cc.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/types.h>

#include <memory>
#include <string>

namespace memwall {

// Installs the handlers; idempotent. The command line calls it first thing.
// Without it, registrations are bookkeeping only (libraries and tests).
void install_interrupt_cleanup();

// Ends the process with `code` now, from any thread, leaving what an
// interrupt would: the registered children killed, files and directories
// removed (Note [Dead ranks] in src/exec/api/ranks.cc).
[[noreturn]] void exit_after_cleanup(int code);

// For as long as it lives: `path` (a file, or a directory that is empty
// once the registered files are gone) is removed if the process is
// interrupted. The owner removes it itself on every other path out.
class RemoveOnInterrupt {
 public:
  enum class Kind { kFile, kDirectory };
  RemoveOnInterrupt(const std::string& path, Kind kind);
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  int slot_;
};

// For as long as it lives: child `pid` is killed (SIGKILL) and reaped before
// the files are removed, so that it cannot recreate them.
class KillOnInterrupt {
 public:
  explicit KillOnInterrupt(pid_t pid);
  ~KillOnInterrupt();
  KillOnInterrupt(const KillOnInterrupt&) = delete;
  KillOnInterrupt& operator=(const KillOnInterrupt&) = delete;

 private:
  int slot_;
};

// A child started by spawn_killed_on_interrupt: `error` is posix_spawn's
// (0: started), and while `kill` lives the child is KillOnInterrupt's.
struct SpawnedChild {
  int error = 0;
  pid_t pid = 0;
  std::unique_ptr<KillOnInterrupt> kill;
};
// posix_spawn of `path` with `argv`, `actions` and this process's
// environment, registered with KillOnInterrupt before an interrupt can run
// in between; the child starts with no signal held.
SpawnedChild spawn_killed_on_interrupt(const std::string& path,
                                       const posix_spawn_file_actions_t* actions,
                                       char* const argv[]);

// Holds SIGINT, SIGTERM and SIGHUP for this thread while it lives: for the
// moment between creating something and registering it for removal.
class HoldInterrupts {
 public:
  HoldInterrupts();
  ~HoldInterrupts();
  HoldInterrupts(const HoldInterrupts&) = delete;
  HoldInterrupts& operator=(const HoldInterrupts&) = delete;

  // The signals held, for a child that must start without them held.
  static sigset_t signals();

 private:
  sigset_t previous_;
};

}  // namespace memwall
