// The atomic write shared by checkpoints, safetensors files and benchmark reports, and
// the removal of temporaries that killed writers left behind (only unlocked ones).
#include "framework/serialize/atomic_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "framework/error.h"

namespace hg {

namespace {

constexpr const char* kTag = ".hg-tmp.";
constexpr size_t kSuffixDigits = 16;
// A target name this long or longer is shortened in its temporaries' names, which must
// fit NAME_MAX (255) with the dot, tag and suffix.
constexpr size_t kLongName = 200;
constexpr char kHex[] = "0123456789abcdef";

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex64(uint64_t v) {
  std::string s(kSuffixDigits, '0');
  for (size_t i = kSuffixDigits; i-- > 0; v >>= 4) s[i] = kHex[v & 15];
  return s;
}

// Temporaries need names no other writer picks, in any pid namespace: random bits, and
// O_EXCL on top in case two writers draw the same.
uint64_t random_suffix() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v)) return v;
  static std::atomic<uint64_t> serial{0};
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  v = (static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec)) ^
      (static_cast<uint64_t>(::getpid()) << 40) ^ (serial++ * 0x9E3779B97F4A7C15u);
  v = (v ^ (v >> 31)) * 0xBF58476D1CE4E5B9u;  // splitmix finish: spread the bits
  return v ^ (v >> 29);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

bool is_suffix(const char* s) {
  size_t n = 0;
  for (; s[n] != '\0'; ++n)
    if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return false;
  return n == kSuffixDigits;
}

// A created and locked temporary. The lock lives on the open file description, shared
// by fd and lock_fd, so it outlasts close(fd) (whose error matters) until lock_fd closes.
struct Temporary {
  std::string name;
  int fd = -1, lock_fd = -1;
};

Temporary create_temporary(const std::string& path) {
  const std::string prefix = temporary_prefix(path);
  for (int attempt = 0; attempt < 16; ++attempt) {
    Temporary t{prefix + hex64(random_suffix())};
    t.fd = ::open(t.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (t.fd < 0 && errno == EEXIST) continue;
    HG_CHECK(t.fd >= 0, path, ": cannot create the temporary file ", t.name, ": ", std::strerror(errno));
    // A file system without flock (ENOLCK) leaves the file unlocked; cleaners there
    // cannot lock it either, so they keep it.
    while (::flock(t.fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    // A cleaner may have locked and removed the file between its creation and our lock:
    // the name must still be this file, or we start over with a new one.
    struct stat mine {}, named {};
    const bool still_ours =
        ::fstat(t.fd, &mine) == 0 && ::lstat(t.name.c_str(), &named) == 0 && same_file(mine, named);
    if (!still_ours) {
      ::close(t.fd);
      continue;
    }
    t.lock_fd = ::fcntl(t.fd, F_DUPFD_CLOEXEC, 0);
    if (t.lock_fd < 0) {
      const int err = errno;
      ::unlink(t.name.c_str());
      ::close(t.fd);
      throw Error(detail::concat(path, ": cannot duplicate the temporary file's descriptor: ", std::strerror(err)));
    }
    return t;
  }
  throw Error(detail::concat(path, ": could not create a temporary file ", prefix,
                             "<random> in 16 tries (names taken or removed as they were made)"));
}

// An empty path, one ending in '/' or naming a directory has no file to replace; refused
// here, before any temporary exists, rather than by a failing rename afterwards.
void check_target(const std::string& path) {
  HG_CHECK(!path.empty(), "cannot write a file at an empty path; give a file name such as \"model.safetensors\"");
  const std::string base = base_name(path);
  HG_CHECK(!base.empty() && base != "." && base != "..", path,
           ": names a directory, not a file; give a file name inside it");
  struct stat st {};
  HG_CHECK(::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), path,
           ": is a directory, not a file; give a file name inside it");
}

}  // namespace

std::string temporary_prefix(const std::string& path) {
  std::string base = base_name(path);
  if (base.size() >= kLongName) {
    uint64_t h = 0xcbf29ce484222325u;  // FNV-1a: tells apart long names with one start
    for (unsigned char c : base) h = (h ^ c) * 0x100000001b3u;
    base = base.substr(0, kLongName - 50) + "~" + hex64(h);
  }
  const size_t slash = path.find_last_of('/');
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "." + base + kTag;
}

int remove_stale_temporaries(const std::string& path) {
  if (path.empty()) return 0;
  const std::string prefix = base_name(temporary_prefix(path));
  DIR* d = ::opendir(parent_directory(path).c_str());
  if (!d) return 0;  // best effort: the save itself reports an unusable folder
  const int dfd = ::dirfd(d);
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0 || !is_suffix(e->d_name + prefix.size())) continue;
    const int fd = ::openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat held {}, named {};
    // A live writer holds LOCK_EX, so LOCK_NB fails on its file. Once locked here, the
    // name is removed only if it is still this file (the writer may have renamed it).
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(dfd, e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 && same_file(held, named))
      removed += ::unlinkat(dfd, e->d_name, 0) == 0;
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks) {
  check_target(path);
  remove_stale_temporaries(path);
  Temporary tmp = create_temporary(path);
  auto fail = [&](const std::string& step) {
    const int err = errno;
    ::unlink(tmp.name.c_str());  // under the lock: no cleaner touches it meanwhile
    if (tmp.fd >= 0) ::close(tmp.fd);
    ::close(tmp.lock_fd);
    throw Error(detail::concat(path, ": ", step, " failed: ", std::strerror(err),
                               "; the previous file, if any, is unchanged"));
  };
  for (const ByteChunk& c : chunks) {
    const auto* p = static_cast<const char*>(c.data);
    for (size_t left = c.size; left > 0;) {
      const ssize_t put = ::write(tmp.fd, p, left);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) fail("writing the temporary file");
      p += put;
      left -= static_cast<size_t>(put);
    }
  }
  if (::fsync(tmp.fd) != 0) fail("fsync of the temporary file");
  const int closed = ::close(tmp.fd);
  tmp.fd = -1;
  if (closed != 0) fail("closing the temporary file");
  if (::rename(tmp.name.c_str(), path.c_str()) != 0) fail("renaming " + tmp.name + " over it");
  ::close(tmp.lock_fd);  // the name is gone: nothing left to guard
  // The rename survives a power loss only once the directory entry is on disk.
  const std::string dir = parent_directory(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = dfd >= 0 && ::fsync(dfd) == 0;
  const int err = errno;
  if (dfd >= 0) ::close(dfd);
  HG_CHECK(synced, path, ": written, but syncing its directory ", dir, " failed: ", std::strerror(err));
}

}  // namespace hg
