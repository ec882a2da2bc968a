// The values a run starts from and eager's results (Note [Run inputs] in
// python/memwall/values/files.py): an index (JSON) and a blob (mapped read-only).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memwall::exec {

class ValueFile {
 public:
  // Throws BadInput (exec_error.h) naming the file when it is missing,
  // malformed or shorter than its index says.
  ValueFile(const std::string& index_path, const std::string& blob_path);
  ~ValueFile();
  ValueFile(const ValueFile&) = delete;
  ValueFile& operator=(const ValueFile&) = delete;

  // The bytes of buffer `id`; empty span when the file has none.
  std::span<const std::byte> buffer(int64_t id) const;
  // The bytes of the buffer named `name` (memwall's rewrites renumber
  // buffers and keep names); nullopt when the file has none by that name.
  std::optional<std::span<const std::byte>> named(const std::string& name) const;
  bool has(int64_t id) const { return entries_.count(id) != 0; }
  const std::map<int64_t, std::span<const std::byte>>& buffers() const { return entries_; }
  std::span<const std::byte> blob(const nlohmann::json& where) const;  // {"offset","bytes"}
  const nlohmann::json& index() const { return index_; }

 private:
  std::string blob_path_;
  nlohmann::json index_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  std::map<int64_t, std::span<const std::byte>> entries_;
  std::map<std::string, std::span<const std::byte>> by_name_;
};

}  // namespace memwall::exec
