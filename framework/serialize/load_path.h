// hg::load(std::filesystem::path): without it the path would bind to dtype.h's element
// load<T>(T), an exact match, and come back unchanged. Kept out of safetensors.h because
// <filesystem> declares std::quoted, which ADL would prefer to safetensors.cpp's quoted().
#pragma once
#include <filesystem>

#include "framework/serialize/safetensors.h"

namespace hg {

inline StateDict load(const std::filesystem::path& path) { return load(path.string()); }

}  // namespace hg
