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
void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks);

}  // namespace hg
