// The atomic write shared by checkpoints, safetensors files and benchmark reports.
#include "framework/serialize/atomic_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "framework/error.h"

namespace hg {

namespace {
std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks) {
  // pid and a counter: distinct temporaries for concurrent writers of one path.
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = detail::concat(path, ".tmp.", ::getpid(), ".", serial++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  HG_CHECK(fd >= 0, path, ": cannot create the temporary file ", tmp, ": ", std::strerror(errno));
  auto fail = [&](const std::string& step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(detail::concat(path, ": ", step, " failed: ", std::strerror(err),
                               "; the previous file, if any, is unchanged"));
  };
  for (const ByteChunk& c : chunks) {
    const auto* p = static_cast<const char*>(c.data);
    for (size_t left = c.size; left > 0;) {
      const ssize_t put = ::write(fd, p, left);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) fail("writing the temporary file");
      p += put;
      left -= static_cast<size_t>(put);
    }
  }
  if (::fsync(fd) != 0) fail("fsync of the temporary file");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("closing the temporary file");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming " + tmp + " over it");
  // The rename survives a power loss only once the directory entry is on disk.
  const std::string dir = parent_directory(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = dfd >= 0 && ::fsync(dfd) == 0;
  const int err = errno;
  if (dfd >= 0) ::close(dfd);
  HG_CHECK(synced, path, ": written, but syncing its directory ", dir, " failed: ", std::strerror(err));
}

}  // namespace hg
