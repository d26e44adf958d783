// The allocator registry: each backend registers the allocator of its device kind.
#pragma once
#include <memory>

#include "framework/storage.h"

namespace hg {

Allocator* allocator_for(Device d);  // throws hg::Error when the device is unavailable
void register_allocator(DeviceKind kind, Allocator* (*get)(int index));
std::shared_ptr<Storage> new_storage(size_t nbytes, Device d);

}  // namespace hg
