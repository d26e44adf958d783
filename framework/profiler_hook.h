// The profiler's hooks in the hot paths (DispatchStub, Storage, the autograd engine): one
// relaxed atomic load when no hg::Profiler records; the recording itself is out of line
// in profiler.cpp, so this header stays light enough for dispatch.h.
#pragma once
#include <atomic>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "framework/device.h"

namespace hg {

class Tensor;
class Node;

namespace profiler_hook {

extern std::atomic<bool> g_recording;
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

struct OpRecord;

// One op dispatch while a profiler records: built before the kernel runs (arguments are
// described first, then start() takes the time), committed by the destructor.
class OpScope {
 public:
  OpScope(const char* stub, Device device);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  void tensor(const Tensor& t);
  void tensors(const std::vector<Tensor>& ts);
  void label(const char* variant);  // the enum argument's name: "relu" for unary_stub
  void start();

 private:
  OpRecord* rec_;
};

// Describes one kernel argument: tensors by dtype and shape; an op enum by its name when
// an op_label(enum) overload is found by argument-dependent lookup; the rest not at all.
template <class T>
void describe(OpScope& s, const T& a) {
  if constexpr (std::is_same_v<T, Tensor>) {
    s.tensor(a);
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    s.tensors(a);
  } else if constexpr (std::is_enum_v<T>) {
    if constexpr (requires { op_label(a); }) s.label(op_label(a));
  }
}

// Storage's hooks: bytes taken from / given back to a device allocator.
void on_alloc(size_t nbytes);
void on_free(size_t nbytes);

// The autograd engine's hook: a range per backward node, carrying the forward op's name.
class NodeScope {
 public:
  explicit NodeScope(const Node& node) {
    if (recording()) begin(node);
  }
  ~NodeScope() {
    if (active_) end();
  }
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

 private:
  void begin(const Node& node);
  void end();
  bool active_ = false;
};

// The cuda backend reports each kernel it launches inside an op (its KernelLog name).
void note_kernel(const char* name);

}  // namespace profiler_hook
}  // namespace hg
