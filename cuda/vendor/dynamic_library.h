// A shared library opened with dlopen on first use and the few symbols halfgrad calls in
// it: the cuBLAS/cuDNN references are optional at run time, so libhalfgrad must load (and
// say why a reference is missing) on machines where those libraries are not installed.
#pragma once
#include <initializer_list>
#include <string>

namespace hg::cuda::vendor {

class DynamicLibrary {
 public:
  // Tries each file name in order (e.g. libcublas.so.13, .so.12, .so); keeps the first that
  // opens. `label` names the library in messages ("cuBLAS").
  // The library stays open until the process ends: handles and plans made from it live in
  // function-local statics whose destruction order we do not control.
  DynamicLibrary(std::string label, std::initializer_list<const char*> file_names);
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  // "" when loaded; else every file name tried with dlopen's message for it.
  const std::string& load_error() const { return error_; }
  const std::string& file_name() const { return file_; }

  // The address of `name`, cast to the function-pointer type F. Throws hg::Error when the
  // library is not loaded or lacks the symbol (an older version than the one we build for).
  template <class F>
  F function(const char* name) const {
    return reinterpret_cast<F>(symbol(name));
  }

 private:
  void* symbol(const char* name) const;

  std::string label_, file_, error_;
  void* handle_ = nullptr;
};

}  // namespace hg::cuda::vendor
