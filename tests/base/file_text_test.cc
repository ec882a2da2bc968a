// FileText: whole-file input, mapped or read (file_text.h, Note [Mapped input]).
#include "memwall/base/file_text.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "memwall/base/error.h"
#include "test_util.h"

namespace memwall {
namespace {

namespace fs = std::filesystem;

std::string file_error(const std::string& path) {
  try {
    const FileText file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(FileText, RegularFileWholeText) {
  const fs::path dir = fresh_dir();
  const std::string path = (dir / "a.json").string();
  std::string text(100'000, 'x');
  text += "{\"end\": true}";
  std::ofstream(path, std::ios::binary) << text;
  const FileText file(path);
  EXPECT_EQ(file.text(), text);
  fs::remove_all(dir);
}

TEST(FileText, EmptyFileIsEmptyText) {
  const fs::path dir = fresh_dir();
  const std::string path = (dir / "empty").string();
  std::ofstream(path).close();
  EXPECT_EQ(FileText(path).text(), "");
  fs::remove_all(dir);
}

TEST(FileText, PipeIsReadToTheEnd) {
  const fs::path dir = fresh_dir();
  const std::string path = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string text(200'000, 'p');  // more than one read() and one pipe buffer
  std::thread writer([&] { std::ofstream(path, std::ios::binary) << text; });
  const FileText file(path);
  writer.join();
  EXPECT_EQ(file.text(), text);
  fs::remove_all(dir);
}

TEST(FileText, ErrorsNameThePath) {
  const fs::path dir = fresh_dir();
  const std::string missing = (dir / "missing.json").string();
  EXPECT_EQ(file_error(missing), missing + ": cannot open: No such file or directory");
  EXPECT_EQ(file_error(dir.string()), dir.string() + ": cannot open: Is a directory");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace memwall
