// Running work in a child process that a wall-clock deadline can stop
// (Note [Child under a deadline] in child_process.cc). Internal to
// src/remat; checkmate runs CBC this way (cbc_process.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "memwall/base/deadline.h"

namespace memwall::remat_detail {

// What a child process wrote to its pipe, and how it ended.
struct ChildRun {
  bool finished = false;  // it exited with status 0 by itself; false: killed at the deadline
  std::string bytes;      // everything it wrote before it ended or was killed
};

// Runs `work` in a forked child, which writes its answer to the file
// descriptor it is given (write_all) and then exits; waits for it until
// `deadline`, then kills it (SIGKILL). Either way the child is reaped before
// this returns, so none is left behind, running or a zombie. Throws Error
// naming `what` when the child dies of a signal before the deadline, exits
// with a nonzero status (work threw), or fork, pipe or poll fail.
ChildRun run_in_child(const std::function<void(int fd)>& work, Deadline deadline,
                      std::string_view what);

// write(2) until every byte is written, retrying on EINTR; false on error.
bool write_all(int fd, const void* data, size_t size);

// The exit status of a child whose work could not write its answer.
constexpr int kChildWriteFailed = 4;

}  // namespace memwall::remat_detail
