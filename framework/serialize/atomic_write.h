// Crash-safe file writes: a temporary file in the same folder, fsync, rename over the
// target, fsync of the folder. A crash at any point leaves the old file or the new one.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace hg {

struct ByteChunk {
  const void* data;
  size_t size;
};

// Writes the chunks, in order, as the new content of `path`; throws hg::Error naming the
// failing step (the previous file, if any, is then unchanged and no temporary is left).
// An empty path or one naming a directory is refused before anything is written.
// The temporary is ".<name>.hg-tmp.<16 hex digits>" next to the target, created with
// O_EXCL and held under flock(LOCK_EX) until it is renamed or removed. First removes,
// as remove_stale_temporaries does, what killed writers of the same target left.
void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks);

// Removes the temporaries of writes to `path` (regular files named as above, for this
// target only) that no live writer holds: those this call can flock. A writer in another
// pid namespace or process holds its lock, so its file is kept; names that are not this
// library's (e.g. "x.tmp.123.0") are never touched. Returns how many were removed. Best
// effort: an unreadable folder, or a file system without flock, removes nothing.
int remove_stale_temporaries(const std::string& path);

// The temporary-name prefix for writes to `path`, folder included: ".../.<name>.hg-tmp."
// (a name too long for a file name is shortened and tagged with its hash).
std::string temporary_prefix(const std::string& path);

}  // namespace hg
