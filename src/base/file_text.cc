// Reading input files whole (see file_text.h).
//
// Note [Mapped input]
// ~~~~~~~~~~~~~~~~~~~
// A 1M-op graph file is ~280 MB. Copying it into a string costs a copy plus
// faulting in 280 MB of fresh anonymous memory, about 0.3 s on a small VM,
// as long as parsing half of it. Mapping the file read-only shares the page
// cache's pages instead (the kernel maps them in batches on first touch), so
// reading costs little more than the parse itself. The text is read once,
// front to back and in two halves by two threads, hence MADV_WILLNEED.
// Pipes and other non-regular files, and empty files (which cannot be
// mapped), are read into a string as before. A file truncated by another
// process while it is mapped would fault on access; inputs are not expected
// to change under a running command.
#include "memwall/base/file_text.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "memwall/base/error.h"

namespace memwall {
namespace {

// Closes the descriptor on every path out of the constructor.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FileText::FileText(const std::string& path) {
  const Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  if (S_ISDIR(info.st_mode)) fail("{}: cannot open: {}", path, std::strerror(EISDIR));
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    const auto size = static_cast<size_t>(info.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (map != MAP_FAILED) {
      ::madvise(map, size, MADV_WILLNEED);
      map_ = map;
      text_ = std::string_view(static_cast<const char*>(map), size);
      return;
    }
    copy_.reserve(size);  // not mappable: read it below
  }
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(file.fd, chunk, sizeof chunk);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("{}: cannot read: {}", path, std::strerror(errno));
    }
    copy_.append(chunk, static_cast<size_t>(got));
  }
  text_ = copy_;
}

FileText::~FileText() {
  if (map_) ::munmap(map_, text_.size());
}

}  // namespace memwall
