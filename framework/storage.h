// A reference-counted block of device memory that tensors view. Each device's backend
// provides the allocator; under CUDA that is the caching allocator.
#pragma once
#include <cstddef>
#include <memory>

#include "framework/device.h"

namespace hg {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
};

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;

  Storage(size_t nbytes, Device device, Allocator* allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

}  // namespace hg
