// dlopen/dlsym behind hg::Error: a missing library is a reason string, a missing symbol an
// error naming the library file and the symbol.
#include "cuda/vendor/dynamic_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "framework/error.h"

namespace hg::cuda::vendor {

namespace {

// Where a CUDA toolkit keeps its libraries when the loader's cache does not know them.
std::vector<std::string> toolkit_dirs() {
  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) dirs.push_back(std::string(v) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

}  // namespace

DynamicLibrary::DynamicLibrary(std::string label, std::initializer_list<const char*> file_names)
    : label_(std::move(label)) {
  std::string tried;
  // The loader's search (LD_LIBRARY_PATH, the ld.so cache) first, then the toolkit folders.
  std::vector<std::string> candidates(file_names.begin(), file_names.end());
  for (const std::string& dir : toolkit_dirs())
    for (const char* f : file_names) candidates.push_back(dir + "/" + f);
  for (size_t k = 0; k < candidates.size(); ++k) {
    const std::string& f = candidates[k];
    // RTLD_LOCAL: the vendor's symbols must not interpose on anything else in the process.
    handle_ = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      file_ = f;
      return;
    }
    // Only the given names' messages: the toolkit folders' ones repeat "No such file" for each.
    if (k < file_names.size()) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + (why ? std::string(why) : f + ": not found");
    } else {
      dlerror();
    }
  }
  std::string dirs;
  for (const std::string& d : toolkit_dirs()) dirs += (dirs.empty() ? "" : ", ") + d;
  error_ = label_ + " could not be loaded (" + tried + "; also looked in " + dirs + ")";
}

void* DynamicLibrary::symbol(const char* name) const {
  HG_CHECK(handle_, error_);
  dlerror();
  void* p = dlsym(handle_, name);
  HG_CHECK(p, label_, " (", file_, ") has no function ", name,
           ": this halfgrad needs a newer version of the library");
  return p;
}

}  // namespace hg::cuda::vendor
