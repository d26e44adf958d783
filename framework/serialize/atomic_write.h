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
// First removes, as remove_stale_temporaries does, what killed writers left in the folder.
void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks);

// Removes the regular files "<name>.tmp.<pid>.<n>" in `dir` whose writer pid no longer
// runs (never those of this process or of a live one); returns how many. Best effort:
// an unreadable folder removes nothing. Writers in another pid namespace sharing the
// folder would look dead: the folder is assumed to be used from one pid namespace.
int remove_stale_temporaries(const std::string& dir);

}  // namespace hg
