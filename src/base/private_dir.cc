// A command's private temporary directory (private_dir.h).
#include "memwall/base/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "memwall/base/error.h"

namespace memwall {

PrivateDir::PrivateDir(const std::string& stem) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + stem + "-XXXXXX";
  const HoldInterrupts hold;  // until the directory is registered
  if (::mkdtemp(pattern.data()) == nullptr) {
    fail("cannot create a temporary directory {}: {}", pattern, std::strerror(errno));
  }
  path_ = pattern;
  cleanup_.emplace(path_, RemoveOnInterrupt::Kind::kDirectory);
}

PrivateDir::~PrivateDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string PrivateDir::file(const std::string& name) {
  entries_.emplace_back(path_ + "/" + name, RemoveOnInterrupt::Kind::kFile);
  return path_ + "/" + name;
}

std::string PrivateDir::subdir(const std::string& name) {
  const std::string path = path_ + "/" + name;
  const HoldInterrupts hold;  // until it is registered
  if (::mkdir(path.c_str(), 0700) != 0) {
    fail("cannot create a temporary directory {}: {}", path, std::strerror(errno));
  }
  entries_.emplace_back(path, RemoveOnInterrupt::Kind::kDirectory);
  return path;
}

}  // namespace memwall
