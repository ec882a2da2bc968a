// Helpers shared by the NVMe engine tests: a fresh directory under
// ::testing::TempDir(), removed at the end, random buffers, and a way to
// the engine's nameless swap files behind its back.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memwall/runtime/nvme_engine.h"

namespace memwall::runtime::testing_nvme {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "memwall-nvme-XXXXXX";
    if (!mkdtemp(tmpl.data())) ADD_FAILURE() << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    for (const auto& name : entries()) unlink((path_ + "/" + name).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") out.push_back(name);
      }
      closedir(d);
    }
    return out;
  }

 private:
  std::string path_;
};

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// A descriptor of the engine's swap file `file` of its own (without
// O_DIRECT): the file has no name (Note [Swap files without names]).
inline int reopen(const NvmeEngine& engine, size_t file, int flags) {
  const std::string path = "/proc/self/fd/" + std::to_string(engine.file_descriptors()[file]);
  return open(path.c_str(), flags);
}

}  // namespace memwall::runtime::testing_nvme
