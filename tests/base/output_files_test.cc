// OutputFiles: what each kind of path gets, all-or-none, and no temporaries
// left behind (output_files.h, Note [Output files]). Every node is created
// in a private directory: FIFOs with mkfifo, character devices with mknod
// (the numbers of /dev/null, 1:3, and /dev/full, 1:7, from the Linux
// kernel's Documentation/admin-guide/devices.txt), never touching /dev.
#include "memwall/base/output_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "memwall/base/error.h"
#include "test_util.h"

namespace memwall {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void put(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// The names in `dir`, sorted: what a command left there.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A character device node like /dev/null (1:3) or /dev/full (1:7), or
// false when this process may not create one (not root, or no CAP_MKNOD).
bool make_char_device(const fs::path& path, unsigned minor) {
  return ::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, minor)) == 0;
}

TEST(OutputFiles, NewFileAppearsWholeWithNothingElse) {
  const fs::path dir = fresh_dir();
  write_file_atomically((dir / "out.json").string(), "{\"a\": 1}\n");
  EXPECT_EQ(slurp(dir / "out.json"), "{\"a\": 1}\n");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"out.json"});
}

TEST(OutputFiles, ReplacedFileKeepsItsPermissionBits) {
  const fs::path dir = fresh_dir();
  put(dir / "out.json", "old");
  fs::permissions(dir / "out.json",
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_file_atomically((dir / "out.json").string(), "new");
  EXPECT_EQ(slurp(dir / "out.json"), "new");
  EXPECT_EQ(fs::status(dir / "out.json").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(OutputFiles, UsersOwnTmpFileIsNeverTouched) {
  // The old writer went through "PATH.tmp", overwriting and deleting it.
  const fs::path dir = fresh_dir();
  put(dir / "out.json.tmp", "the user's own file");
  write_file_atomically((dir / "out.json").string(), "graph");
  EXPECT_EQ(slurp(dir / "out.json.tmp"), "the user's own file");
  EXPECT_EQ(slurp(dir / "out.json"), "graph");
}

TEST(OutputFiles, SymbolicLinkStaysALinkAndItsTargetIsWritten) {
  const fs::path dir = fresh_dir();
  fs::create_directories(dir / "real");
  put(dir / "real" / "target.json", "old");
  fs::create_symlink("real/target.json", dir / "link.json");
  fs::create_symlink("link.json", dir / "link2.json");  // a chain of two
  write_file_atomically((dir / "link2.json").string(), "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_TRUE(fs::is_symlink(dir / "link2.json"));
  EXPECT_EQ(slurp(dir / "real" / "target.json"), "new");
  EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"target.json"});
}

TEST(OutputFiles, DanglingLinkGetsItsTargetCreated) {
  const fs::path dir = fresh_dir();
  fs::create_symlink("made.json", dir / "link.json");
  write_file_atomically((dir / "link.json").string(), "text");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(slurp(dir / "made.json"), "text");
}

TEST(OutputFiles, LinkLoopIsRefused) {
  const fs::path dir = fresh_dir();
  fs::create_symlink("b", dir / "a");
  fs::create_symlink("a", dir / "b");
  const std::string path = (dir / "a").string();
  EXPECT_EQ(error_of([&] { write_file_atomically(path, "x"); }),
            "cannot write " + path + ": Too many levels of symbolic links");
}

TEST(OutputFiles, DirectoryIsRefusedWithOneLine) {
  const fs::path dir = fresh_dir();
  fs::create_directories(dir / "sub");
  fs::create_symlink("sub", dir / "to_sub");
  for (const fs::path& p : {dir / "sub", dir / "to_sub"}) {
    EXPECT_EQ(error_of([&] { write_file_atomically(p.string(), "x"); }),
              "cannot write " + p.string() + ": it is a directory");
  }
  EXPECT_TRUE(fs::is_empty(dir / "sub"));
}

TEST(OutputFiles, MissingDirectoryIsNamed) {
  const fs::path dir = fresh_dir();
  const std::string path = (dir / "no" / "such" / "out.json").string();
  EXPECT_EQ(error_of([&] { write_file_atomically(path, "x"); }),
            "cannot write " + path + ": no directory " + (dir / "no" / "such").string());
}

TEST(OutputFiles, FifoIsWrittenStraightInto) {
  const fs::path dir = fresh_dir();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  const std::string text(1 << 20, 'x');  // more than a pipe buffer
  write_file_atomically(fifo.string(), text);
  reader.join();
  EXPECT_EQ(got, text);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"pipe"});
}

TEST(OutputFiles, FifoWhoseReaderLeavesIsAnError) {
  const fs::path dir = fresh_dir();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    ::close(fd);  // gone before reading anything
  });
  const std::string message =
      error_of([&] { write_file_atomically(fifo.string(), std::string(1 << 20, 'x')); });
  reader.join();
  EXPECT_EQ(message, "cannot write " + fifo.string() + ": Broken pipe");
}

TEST(OutputFiles, CharacterDevicesStayDevices) {
  const fs::path dir = fresh_dir();
  if (!make_char_device(dir / "null", 3) || !make_char_device(dir / "full", 7)) {
    GTEST_SKIP() << "cannot create device nodes here (mknod needs root or CAP_MKNOD)";
  }
  write_file_atomically((dir / "null").string(), "discarded");
  EXPECT_TRUE(fs::is_character_file(dir / "null"));
  // /dev/full: every write fails with ENOSPC; the old writer turned the
  // system's /dev/full into a regular file instead.
  const std::string full = (dir / "full").string();
  EXPECT_EQ(error_of([&] { write_file_atomically(full, "graph"); }),
            "cannot write " + full + ": No space left on device");
  EXPECT_TRUE(fs::is_character_file(dir / "full"));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"full", "null"}));
}

TEST(OutputFiles, AllOrNoneWhenALaterOutputFails) {
  const fs::path dir = fresh_dir();
  put(dir / "a.json", "old a");
  if (!make_char_device(dir / "full", 7)) GTEST_SKIP() << "cannot create device nodes here";
  OutputFiles out;
  out.declare((dir / "a.json").string());
  out.declare((dir / "b.json").string());
  out.declare((dir / "full").string());
  out.set((dir / "a.json").string(), "new a");
  out.set((dir / "b.json").string(), "new b");
  out.set((dir / "full").string(), "plot");
  EXPECT_EQ(error_of([&] { out.commit(); }),
            "cannot write " + (dir / "full").string() + ": No space left on device");
  EXPECT_EQ(slurp(dir / "a.json"), "old a");
  EXPECT_FALSE(fs::exists(dir / "b.json"));
}

TEST(OutputFiles, AnUnwritableDestinationFailsAtDeclarationLeavingNothing) {
  const fs::path dir = fresh_dir();
  std::optional<OutputFiles> out(std::in_place);
  out->declare((dir / "a.json").string());
  const std::string bad = (dir / "missing" / "x.svg").string();
  EXPECT_NE(error_of([&] { out->declare(bad); }).find("cannot write " + bad), std::string::npos);
  EXPECT_EQ(names_in(dir).size(), 1u);  // a.json's temporary, until the verb gives up
  out.reset();
  EXPECT_TRUE(names_in(dir).empty());
}

TEST(OutputFiles, UncommittedSetLeavesTargetsAndNoTemporaries) {
  const fs::path dir = fresh_dir();
  put(dir / "a.json", "old");
  {
    OutputFiles out;
    out.declare((dir / "a.json").string());
    out.declare((dir / "b.json").string());
    out.set((dir / "a.json").string(), "new");
  }  // an exception in the work would leave the same way
  EXPECT_EQ(slurp(dir / "a.json"), "old");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"a.json"});
}

TEST(OutputFiles, TheSameFileTwiceIsRefused) {
  const fs::path dir = fresh_dir();
  put(dir / "a.json", "old");
  fs::create_symlink("a.json", dir / "link.json");
  OutputFiles out;
  out.declare((dir / "a.json").string());
  const std::string again = (dir / "link.json").string();
  EXPECT_EQ(error_of([&] { out.declare(again); }),
            "cannot write " + again + ": it is also the output " + (dir / "a.json").string());
}

TEST(OutputFiles, MessagesNameTheUsersPathNeverATemporary) {
  const fs::path dir = fresh_dir();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread reader([&] { ::close(::open(fifo.c_str(), O_RDONLY)); });
  const std::string message = error_of([&] {
    OutputFiles out;
    out.declare((dir / "a.json").string());
    out.declare(fifo.string());
    out.set((dir / "a.json").string(), "a");
    out.set(fifo.string(), std::string(1 << 20, 'x'));
    out.commit();
  });
  reader.join();
  EXPECT_EQ(message.find(".memwall-"), std::string::npos) << message;
  EXPECT_EQ(message.find(".tmp"), std::string::npos) << message;
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"pipe"});
}

}  // namespace
}  // namespace memwall
