// A fresh private directory under $TMPDIR (or /tmp) for one command's
// temporaries: removed with everything in it when it goes, and by an
// interrupt while it lives, with the files and subdirectories named through
// it (Note [Interrupt cleanup] in src/base/interrupt_cleanup.cc).
#pragma once

#include <list>
#include <optional>
#include <string>

#include "memwall/base/interrupt_cleanup.h"

namespace memwall {

class PrivateDir {
 public:
  // Creates `$TMPDIR/<stem>-XXXXXX` (mkdtemp); throws Error naming it when it
  // cannot.
  explicit PrivateDir(const std::string& stem);
  ~PrivateDir();  // removes the directory and all it holds
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name, a file someone will create there (this process or a
  // child), removed if interrupted.
  std::string file(const std::string& name);
  // path()/name, created now as a directory, removed if interrupted once
  // its files (registered through file("name/...")) are gone.
  std::string subdir(const std::string& name);

 private:
  std::string path_;
  std::optional<RemoveOnInterrupt> cleanup_;
  std::list<RemoveOnInterrupt> entries_;
};

}  // namespace memwall
