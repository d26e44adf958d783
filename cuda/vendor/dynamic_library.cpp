// dlopen/dlsym behind hg::Error: a missing library is a reason string, a missing symbol an
// error naming the library file and the symbol.
#include "cuda/vendor/dynamic_library.h"

#include <dlfcn.h>

#include "framework/error.h"

namespace hg::cuda::vendor {

DynamicLibrary::DynamicLibrary(std::string label, std::initializer_list<const char*> file_names)
    : label_(std::move(label)) {
  std::string tried;
  for (const char* f : file_names) {
    // RTLD_LOCAL: the vendor's symbols must not interpose on anything else in the process.
    handle_ = dlopen(f, RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      file_ = f;
      return;
    }
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + f + ": " + (why ? why : "not found");
  }
  error_ = label_ + " could not be loaded (tried " + tried + ")";
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
