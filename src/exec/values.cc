#include "values.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "exec_error.h"

namespace memwall::exec {

ValueFile::ValueFile(const std::string& index_path, const std::string& blob_path)
    : blob_path_(blob_path) {
  std::ifstream in(index_path);
  if (!in) bad_input("{}: cannot open: {}", index_path, std::strerror(errno));
  try {
    index_ = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    bad_input("{}: not JSON: {}", index_path, e.what());
  }
  const int fd = ::open(blob_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad_input("{}: cannot open: {}", blob_path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    bad_input("{}: cannot stat: {}", blob_path, std::strerror(errno));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      bad_input("{}: cannot map: {}", blob_path, std::strerror(errno));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  try {
    for (const nlohmann::json& e : index_.at("buffers")) {
      entries_[e.at("id").get<int64_t>()] = blob(e);
      if (e.contains("name")) by_name_[e.at("name").get<std::string>()] = blob(e);
    }
  } catch (const BadInput&) {
    throw;
  } catch (const std::exception& e) {
    bad_input("{}: malformed index: {}", index_path, e.what());
  }
}

ValueFile::~ValueFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

std::span<const std::byte> ValueFile::blob(const nlohmann::json& where) const {
  const uint64_t offset = where.at("offset").get<uint64_t>();
  const uint64_t bytes = where.at("bytes").get<uint64_t>();
  if (offset > size_ || bytes > size_ - offset) {
    bad_input("{}: an entry at {} of {} bytes runs past the file's {} bytes", blob_path_, offset,
              bytes, size_);
  }
  return {data_ + offset, bytes};
}

std::optional<std::span<const std::byte>> ValueFile::named(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::span<const std::byte> ValueFile::buffer(int64_t id) const {
  const auto it = entries_.find(id);
  return it == entries_.end() ? std::span<const std::byte>{} : it->second;
}

}  // namespace memwall::exec
