// Note [Test files]
// ~~~~~~~~~~~~~~~~~
// Tests write their files under the system's temp directory with the
// process id in the name (temp_path, fresh_dir, and the suites' own
// "memwall_<what>_<pid>" names), since ctest runs each test in a process of
// its own, in parallel. Nothing removed them: every `make test` left ~500
// files and directories in /tmp. Linked into every test executable, this
// removes, when the process exits, each entry of the temp directory whose
// name starts with "memwall" and holds "_<pid>" as a whole number. The pid
// is read at exit, so a forked child that exits (a death test) removes
// only its own. MEMWALL_KEEP_TEST_FILES=1 keeps them, to look at a failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>

namespace {

bool names_process(const std::string& name, const std::string& pid) {
  if (name.rfind("memwall", 0) != 0) return false;
  const std::string token = "_" + pid;
  for (size_t at = name.find(token); at != std::string::npos; at = name.find(token, at + 1)) {
    const size_t end = at + token.size();
    if (end == name.size() || !std::isdigit(static_cast<unsigned char>(name[end]))) return true;
  }
  return false;
}

struct RemoveTestFilesAtExit {
  RemoveTestFilesAtExit() = default;
  RemoveTestFilesAtExit(const RemoveTestFilesAtExit&) = delete;
  RemoveTestFilesAtExit& operator=(const RemoveTestFilesAtExit&) = delete;
  ~RemoveTestFilesAtExit() {
    const char* keep = std::getenv("MEMWALL_KEEP_TEST_FILES");
    if (keep != nullptr && std::string(keep) == "1") return;
    const std::string pid = std::to_string(::getpid());
    std::error_code ec;
    std::set<std::filesystem::path> dirs{std::filesystem::path(::testing::TempDir())};
    if (auto system = std::filesystem::temp_directory_path(ec); !ec) dirs.insert(system);
    for (const std::filesystem::path& dir : dirs) {
      std::filesystem::directory_iterator it(dir, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        if (names_process(it->path().filename().string(), pid)) {
          std::error_code ignored;  // best effort: a file a test still holds open stays
          std::filesystem::remove_all(it->path(), ignored);
        }
      }
    }
  }
};

const RemoveTestFilesAtExit remove_test_files_at_exit;

}  // namespace
