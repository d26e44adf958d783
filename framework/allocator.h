// The allocator registry: each backend registers the allocator of its device kind.
#pragma once
#include <cstdint>
#include <memory>

#include "framework/storage.h"

namespace hg {

Allocator* allocator_for(Device d);

// Tensor memory of one device, as its allocator counts it.
struct MemoryStats {
  int64_t in_use = 0;       // bytes held by live storages
  int64_t peak = 0;         // highest in_use since the last reset
  int64_t allocations = 0;  // calls that reached the system allocator
};
MemoryStats memory_stats(Device d);
void reset_peak_memory(Device d);  // throws hg::Error when the device is unavailable
void register_allocator(DeviceKind kind, Allocator* (*get)(int index));
std::shared_ptr<Storage> new_storage(size_t nbytes, Device d);

}  // namespace hg
