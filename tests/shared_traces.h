// Note [Shared test traces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// ctest runs every test in a process of its own, so a suite's
// SetUpTestSuite runs once per test: the fourteen RunKept tests each
// traced the same CNN on real tensors (a Python process importing torch
// and torchvision, 13-17 s of a core each), 180 s of every `make test`.
// A trace that several test processes read goes instead to a directory
// under the build tree, made once by whichever process asks first while
// the others wait on a lock, and reused by later processes of the same
// build. Its name holds a fingerprint of everything the trace depends on:
// the command, the memwall binary and executor library (size and mtime),
// and the Python sources (python/, tests/exec/models.py, tests/python/):
// a rebuild or an edited tracer traces again, and the older entries of the
// same name are removed then. Readers never write into it (`memwall run
// --keep-values` only reads a directory that holds values); a test that
// writes beside the values copies them into its own directory first
// (copy_shared_trace).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/run_memwall.h"

namespace memwall::testing {

namespace shared_trace_detail {

inline void mix(uint64_t& h, const std::string& bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;  // FNV-1a, 64 bits
  h = (h ^ 0xff) * 1099511628211ull;                             // ends each part
}

inline void mix_file_identity(uint64_t& h, const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  const auto time = std::filesystem::last_write_time(file, ec);
  mix(h, fmt::format("{} {} {}", file.string(), ec ? 0 : size,
                     ec ? 0 : time.time_since_epoch().count()));
}

inline void mix_sources(uint64_t& h, const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".py") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    mix(h, f.filename().string());
    mix(h, std::string(std::istreambuf_iterator<char>(in), {}));
  }
}

}  // namespace shared_trace_detail

// The directory of values that `memwall run <run_args> --keep-values DIR`
// keeps, made once per build (Note [Shared test traces]); "" after a
// failed trace, which is reported as a test failure.
inline std::string shared_trace(const std::string& name, const std::string& run_args) {
  namespace fs = std::filesystem;
  using namespace shared_trace_detail;
  const fs::path build = fs::path(MEMWALL_BINARY).parent_path();
  uint64_t h = 14695981039346656037ull;
  mix(h, run_args);
  mix_file_identity(h, MEMWALL_BINARY);
  mix_file_identity(h, build / "libmemwall_exec.so");
  for (const char* d : {"python", "tests/exec", "tests/python"}) {
    mix_sources(h, fs::path(MEMWALL_SOURCE_DIR) / d);
  }
  const fs::path cache = build / "test-traces";
  const std::string entry = fmt::format("{}-{:016x}", name, h);
  const fs::path dir = cache / entry;
  std::error_code ec;
  fs::create_directories(cache, ec);
  const int lock = ::open((cache / (name + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    ADD_FAILURE() << "cannot lock " << (cache / (name + ".lock"));
    if (lock >= 0) ::close(lock);
    return "";
  }
  std::string result = dir.string();
  if (!fs::exists(dir / ".complete")) {
    // An older build's entries of this name go; so does a half-made one.
    for (fs::directory_iterator it(cache, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.rfind(name + "-", 0) == 0 && it->is_directory()) fs::remove_all(it->path(), ec);
    }
    const RunResult r = run_memwall(run_args + " --keep-values " + dir.string());
    if (r.exit_code == 0) {
      std::ofstream(dir / ".complete") << run_args << "\n";
    } else {
      ADD_FAILURE() << "memwall " << run_args << ": exit " << r.exit_code << ": " << r.err;
      fs::remove_all(dir, ec);
      result.clear();
    }
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return result;
}

// The shared values copied into `to` (made), for a test that writes its
// own files beside them.
inline bool copy_shared_trace(const std::string& shared, const std::string& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(to, ec);
  for (fs::directory_iterator it(shared, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == ".complete") continue;
    fs::copy_file(it->path(), fs::path(to) / it->path().filename(),
                  fs::copy_options::overwrite_existing, ec);
    if (ec) break;
  }
  if (ec) ADD_FAILURE() << "cannot copy " << shared << " to " << to << ": " << ec.message();
  return !ec;
}

}  // namespace memwall::testing
