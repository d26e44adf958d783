// A reference-counted block of device memory that tensors view. Each device's backend
// provides the allocator; under CUDA that is the caching allocator.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "framework/device.h"

namespace hg {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual int64_t bytes_in_use() const { return 0; }
  virtual int64_t peak_bytes() const { return 0; }
  virtual int64_t allocation_count() const { return 0; }
  virtual void reset_peak() {}
};

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;
  // Counts the in-place writes to this memory. It lives here, not on the tensor, because
  // every view, detach() and saved copy of a tensor shares the storage, so all of them see
  // one counter with no bookkeeping in the view ops; autograd compares it with the value a
  // node saved (framework/saved_tensor.h). Atomic: two threads may write views of one storage.
  std::atomic<int64_t> version{0};

  Storage(size_t nbytes, Device device, Allocator* allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

}  // namespace hg
