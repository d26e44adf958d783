// The atomic write shared by checkpoints, safetensors files and benchmark reports, and
// the removal of temporaries that killed writers left behind.
#include "framework/serialize/atomic_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "framework/error.h"

namespace hg {

namespace {
std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The writer pid in a temporary's name "<target>.tmp.<pid>.<serial>", or 0 if the name is
// not one of ours.
pid_t temporary_writer(const std::string& name) {
  const size_t tag = name.rfind(".tmp.");
  if (tag == std::string::npos || tag == 0) return 0;
  const std::string rest = name.substr(tag + 5);
  const size_t dot = rest.find('.');
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(rest.substr(0, dot)) || !digits(rest.substr(dot + 1))) return 0;
  const long long pid = std::stoll(rest.substr(0, dot));
  return pid > 0 && pid <= INT32_MAX ? static_cast<pid_t>(pid) : 0;
}
}  // namespace

int remove_stale_temporaries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;  // best effort: the save itself reports an unusable folder
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = temporary_writer(e->d_name);
    // ESRCH: no such process. A live writer (EPERM: another user's) keeps its file.
    if (pid == 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    removed += ::unlinkat(::dirfd(d), e->d_name, 0) == 0;
  }
  ::closedir(d);
  return removed;
}

void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks) {
  // pid and a counter: distinct temporaries for concurrent writers of one path.
  static std::atomic<uint64_t> serial{0};
  remove_stale_temporaries(parent_directory(path));
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
