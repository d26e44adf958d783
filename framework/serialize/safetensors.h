// safetensors files, the public format every framework reads: named tensors behind a
// JSON header. Writes are atomic (a crash leaves the old file or the new, never a mix);
// reads check the whole header against the file before making any tensor.
#pragma once
#include <map>
#include <string>

#include "framework/state_dict.h"

namespace hg {

// Tensors on any device are copied to the CPU and made contiguous for writing. Names
// and metadata must be valid UTF-8; "__metadata__" is reserved by the format.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  StateDict tensors;  // on the CPU
  std::map<std::string, std::string> metadata;
};
// Throws hg::Error naming the file and the fault on anything malformed or truncated.
// Reads what the reference reader (the safetensors package) reads, with these choices:
// I32, I16, I8, U32, U16 and U8 tensors come in as i64 (exact); BOOL bytes other than 0
// count as true (stored as 1); other dtypes (U64, F8_*, ...) are refused. As in the
// reference, "__metadata__": null is no metadata, a repeated metadata key or tensor name
// keeps its last value, and fields of a tensor's entry other than dtype, shape and
// data_offsets are skipped (they must still be valid JSON).
SafetensorsFile load_safetensors(const std::string& path);

// Short names for files without metadata.
void save(const std::string& path, const StateDict& tensors);
StateDict load(const std::string& path);
// Without this, a string literal would pick dtype.h's generic load<T>(T), an exact match
// (load_path.h does the same for std::filesystem::path).
inline StateDict load(const char* path) { return load(std::string(path)); }

}  // namespace hg
