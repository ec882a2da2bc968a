// Wall-clock seconds since construction: planners' solve_seconds and their
// time limits read it.
#pragma once

#include <chrono>

namespace memwall {

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace memwall
