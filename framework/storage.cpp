// Storage lifetime: memory comes from and goes back to its device's allocator.
#include "framework/storage.h"

#include "framework/error.h"
#include "framework/profiler_hook.h"

namespace hg {

Storage::Storage(size_t n, Device d, Allocator* a) : nbytes(n), device(d), allocator(a) {
  HG_CHECK(a != nullptr, "no allocator for device ", d.str());
  data = a->allocate(n);
  if (profiler_hook::recording()) profiler_hook::on_alloc(n);
}

Storage::~Storage() {
  if (data) allocator->deallocate(data, nbytes);
  if (data && profiler_hook::recording()) profiler_hook::on_free(nbytes);
}

}  // namespace hg
