// A run's values in memory, and the tracer's files read into them
// (memwall/exec/values.h).
#include "memwall/exec/values.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "memwall/base/error.h"

namespace memwall::exec {

void ValueSet::add(int64_t id, const std::string& name, std::span<const std::byte> bytes) {
  by_id_[id] = bytes;
  if (!name.empty()) by_name_[name] = bytes;
}

std::span<const std::byte> ValueSet::buffer(int64_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? std::span<const std::byte>{} : it->second;
}

std::optional<std::span<const std::byte>> ValueSet::named(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

// One index (JSON) and its blob, mapped read-only.
struct ValueFiles::File {
  File(const std::string& index_path, const std::string& blob_path);
  ~File() {
    if (data != nullptr) ::munmap(const_cast<std::byte*>(data), size);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // The bytes at {"offset","bytes"} of the blob.
  std::span<const std::byte> blob(const nlohmann::json& where) const;

  std::string index_path, blob_path;
  nlohmann::json index;
  const std::byte* data = nullptr;
  uint64_t size = 0;
  ValueSet buffers;
};

ValueFiles::File::File(const std::string& index_file, const std::string& blob_file)
    : index_path(index_file), blob_path(blob_file) {
  std::ifstream in(index_path);
  if (!in) fail("{}: cannot open: {}", index_path, std::strerror(errno));
  try {
    index = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail("{}: not JSON: {}", index_path, e.what());
  }
  const int fd = ::open(blob_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", blob_path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("{}: cannot stat: {}", blob_path, std::strerror(errno));
  }
  size = static_cast<uint64_t>(st.st_size);
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail("{}: cannot map: {}", blob_path, std::strerror(errno));
    }
    data = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  try {
    for (const nlohmann::json& e : index.at("buffers")) {
      buffers.add(e.at("id").get<int64_t>(),
                  e.contains("name") ? e.at("name").get<std::string>() : std::string(), blob(e));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("{}: malformed index: {}", index_path, e.what());
  }
}

std::span<const std::byte> ValueFiles::File::blob(const nlohmann::json& where) const {
  const uint64_t offset = where.at("offset").get<uint64_t>();
  const uint64_t bytes = where.at("bytes").get<uint64_t>();
  if (offset > size || bytes > size - offset) {
    fail("{}: an entry at {} of {} bytes runs past the file's {} bytes", blob_path, offset, bytes,
         size);
  }
  return {data + offset, bytes};
}

ValueFiles::ValueFiles(const std::string& dir, int rank, int ranks, bool eager) {
  values_.source = dir;
  const auto read = [&](const std::string& name) -> File& {
    files_.push_back(std::make_unique<File>(dir + "/" + name + ".json", dir + "/" + name + ".bin"));
    return *files_.back();
  };
  // Each index's own fields, read as the executor needs them.
  const auto fields = [](const File& f, const auto& take) {
    try {
      take(f.index);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail("{}: malformed index: {}", f.index_path, e.what());
    }
  };
  const File& state = read("state");
  values_.state = state.buffers;
  fields(state, [&](const nlohmann::json& index) {
    values_.threads = index.value("threads", 0);
    values_.rng = state.blob(index.at("rng"));
  });
  if (eager) {
    const File& file = read("eager");
    EagerReference& e = values_.eager.emplace();
    e.states = file.buffers;
    fields(file, [&](const nlohmann::json& index) {
      e.losses = index.at("losses").get<std::vector<double>>();
      if (index.contains("rank_losses")) {
        e.rank_losses = index.at("rank_losses").get<std::vector<std::vector<double>>>();
      }
      e.steps = index.value("steps", 0);
      e.ranks = index.value("ranks", 1);
    });
  }
  if (rank > 0) {
    const std::string name = "inputs" + std::to_string(rank);
    if (!std::filesystem::exists(dir + "/" + name + ".json")) {
      fail("{}: no micro-batch for rank {} (trace the values for {} ranks)", dir, rank, ranks);
    }
    values_.inputs = read(name).buffers;
  }
}

ValueFiles::~ValueFiles() = default;

}  // namespace memwall::exec
