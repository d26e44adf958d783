// A tensor a node keeps for its backward, with the version its storage had when saved.
// Unpacking it in backward checks that no in-place op wrote it since (PyTorch's rule), so
// a modified input is an error naming the op instead of a silently wrong gradient.
#pragma once
#include <cstdint>

#include "framework/tensor.h"

namespace hg {

class SavedTensor {
 public:
  SavedTensor() = default;  // nothing saved: unpack() gives an undefined tensor
  // t, detached, as the node's input or output `index`; other() is for anything else a
  // backward reads (a target, a class weight), named by `what` in the error.
  static SavedTensor input(const Tensor& t, uint32_t index) { return {t, Role::input, index, nullptr}; }
  static SavedTensor output(const Tensor& t, uint32_t index = 0) { return {t, Role::output, index, nullptr}; }
  static SavedTensor other(const Tensor& t, const char* what) { return {t, Role::other, 0, what}; }

  // The saved tensor; hg::Error if an in-place op has written its storage since.
  const Tensor& unpack() const {
    if (tensor_.defined() && tensor_.version() != version_) throw_modified();
    return tensor_;
  }

 private:
  enum class Role : uint8_t { input, output, other };
  SavedTensor(const Tensor& t, Role role, uint32_t index, const char* what);
  [[noreturn]] void throw_modified() const;

  Tensor tensor_;
  int64_t version_ = 0;
  Role role_ = Role::other;
  uint32_t index_ = 0;
  const char* what_ = nullptr;
};

}  // namespace hg
