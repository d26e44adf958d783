// Storage lifetime: memory comes from and goes back to its device's allocator.
#include "framework/storage.h"

#include "framework/error.h"

namespace hg {

Storage::Storage(size_t n, Device d, Allocator* a) : nbytes(n), device(d), allocator(a) {
  HG_CHECK(a != nullptr, "no allocator for device ", d.str());
  data = a->allocate(n);
}

Storage::~Storage() {
  if (data) allocator->deallocate(data, nbytes);
}

}  // namespace hg
