// The caching allocator's bins, stream bookkeeping and statistics. Under the emulation with
// AddressSanitizer, a block's bytes past the request and every cached block are poisoned,
// so a kernel that overruns a tensor, or uses one after it was freed, is reported.
#include "cuda/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <tuple>

#include "cuda/cuda_api.h"
#include "cuda/runtime.h"
#include "framework/error.h"
#include "framework/profiler_device.h"
#include "framework/profiler_hook.h"
#include "framework/tensor.h"

#if defined(HG_CUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define HG_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define HG_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define HG_POISON(p, n) ((void)(p), (void)(n))
#define HG_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace hg::cuda {

size_t CachingAllocator::round_size(size_t n) {
  if (n <= kMinBlock) return kMinBlock;
  if (n > kSmallLimit) return (n + kLargeRound - 1) / kLargeRound * kLargeRound;
  // Four classes per power of two: at most 25% of a block is rounding.
  const size_t step = std::max(kMinBlock, std::bit_floor(n - 1) / 4);
  return (n + step - 1) / step * step;
}

bool CachingAllocator::ByStreamSize::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

CachingAllocator::CachingAllocator(int device) : device_(device) {}

CachingAllocator::~CachingAllocator() {
  // Blocks still in use belong to live tensors; only the cache can be returned.
  empty_cache();
}

void* CachingAllocator::allocate(size_t nbytes) { return allocate(nbytes, current_stream(device_)); }

CachingAllocator::Block* CachingAllocator::find_free(size_t size, void* stream) {
  FreeSet& pool = size <= kSmallLimit ? small_free_ : large_free_;
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  // Small blocks must match their class exactly; a large block may be up to a quarter
  // bigger than asked (blocks are not split, so more would waste the difference).
  if (size <= kSmallLimit ? (*it)->size != size : (*it)->size > size + size / 4) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

void* CachingAllocator::device_malloc(size_t size) {
  const DeviceGuard guard(device_);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, size);
  if (e != cudaSuccess) {
    cudaGetLastError();
    // Out of memory with blocks cached: give them back and try once more.
    release_cached();
    e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error(detail::concat("cuda:", device_, ": out of memory: could not allocate ", size, " bytes (",
                                 stats_.in_use, " bytes in use by tensors, cache emptied): ", cudaGetErrorString(e)));
    }
  }
  ++stats_.malloc_calls;
  if (profiler_hook::recording()) profiler_hook::on_reserve(static_cast<int64_t>(size));
  return p;
}

void CachingAllocator::hand_out(Block* b, size_t requested) {
  b->requested = requested;
  active_.emplace(b->ptr, b);
  stats_.in_use += static_cast<int64_t>(b->size);
  stats_.requested += static_cast<int64_t>(requested);
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  HG_UNPOISON(b->ptr, requested);
  HG_POISON(static_cast<char*>(b->ptr) + requested, b->size - requested);
}

void* CachingAllocator::allocate(size_t nbytes, Stream stream) {
  if (nbytes == 0) return nullptr;
  HG_CHECK(stream.device() == device_, "CachingAllocator: cuda:", device_, " was asked to allocate on a stream of cuda:",
           stream.device());
  const size_t size = round_size(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  collect_pending(false);
  if (Block* b = find_free(size, stream.handle())) {
    stats_.cached -= static_cast<int64_t>(b->size);
    ++stats_.reuses;
    hand_out(b, nbytes);
    return b->ptr;
  }
  auto b = std::make_unique<Block>();
  b->ptr = device_malloc(size);
  b->size = size;
  b->stream = stream.handle();
  stats_.reserved += static_cast<int64_t>(size);
  hand_out(b.get(), nbytes);
  return b.release()->ptr;
}

void CachingAllocator::deallocate(void* p, size_t) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(p);
  HG_CHECK(it != active_.end(), "CachingAllocator: cuda:", device_, ": freeing ", p,
           ", which this allocator did not hand out or which was already freed");
  Block* b = it->second;
  active_.erase(it);
  stats_.in_use -= static_cast<int64_t>(b->size);
  stats_.requested -= static_cast<int64_t>(b->requested);
  stats_.cached += static_cast<int64_t>(b->size);
  HG_POISON(b->ptr, b->size);
  if (b->used_on.empty()) {
    (b->size <= kSmallLimit ? small_free_ : large_free_).insert(b);
    return;
  }
  // Work already issued on the other streams may still use the block. Freeing runs in
  // destructors, so a CUDA failure here is reported rather than thrown: the block is then
  // left out of the cache (never handed out again while that work might use it).
  Pending pending{b, {}};
  cudaError_t err = cudaSuccess;
  {
    int current = 0;
    err = cudaGetDevice(&current);
    if (err == cudaSuccess && current != device_) err = cudaSetDevice(device_);
    for (const Stream& s : b->used_on) {
      if (err != cudaSuccess) break;
      cudaEvent_t e = nullptr;
      err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      if (err == cudaSuccess) {
        pending.events.push_back(e);
        err = cudaEventRecord(e, static_cast<cudaStream_t>(s.handle()));
      }
    }
    if (current != device_ && cudaSetDevice(current) != cudaSuccess) cudaGetLastError();
  }
  b->used_on.clear();
  if (err != cudaSuccess) {
    cudaGetLastError();
    for (void* e : pending.events) cudaEventDestroy(static_cast<cudaEvent_t>(e));
    stats_.cached -= static_cast<int64_t>(b->size);
    std::fprintf(stderr, "halfgrad: cuda:%d: %s while freeing a block used on other streams; it is not reused\n",
                 device_, cudaGetErrorString(err));
    delete b;
    return;
  }
  pending_.push_back(std::move(pending));
}

void CachingAllocator::record_stream(void* p, Stream s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(p);
  HG_CHECK(it != active_.end(), "CachingAllocator::record_stream: ", p, " is not an allocation in use on cuda:", device_);
  HG_CHECK(s.device() == device_, "CachingAllocator::record_stream: a stream of cuda:", s.device(),
           " cannot use memory of cuda:", device_);
  Block* b = it->second;
  if (s.handle() == b->stream) return;
  if (std::find(b->used_on.begin(), b->used_on.end(), s) == b->used_on.end()) b->used_on.push_back(s);
}

void CachingAllocator::collect_pending(bool wait) {
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    bool done = true;
    for (void* e : p.events) {
      const cudaError_t r =
          wait ? cudaEventSynchronize(static_cast<cudaEvent_t>(e)) : cudaEventQuery(static_cast<cudaEvent_t>(e));
      if (r == cudaErrorNotReady) {
        cudaGetLastError();
        done = false;
        break;
      }
      HG_CUDA_CHECK(r);
    }
    if (!done) {
      still.push_back(std::move(p));
      continue;
    }
    for (void* e : p.events) cudaEventDestroy(static_cast<cudaEvent_t>(e));
    (p.block->size <= kSmallLimit ? small_free_ : large_free_).insert(p.block);
  }
  pending_ = std::move(still);
}

void CachingAllocator::release_cached() {
  collect_pending(true);
  const DeviceGuard guard(device_);
  for (FreeSet* pool : {&small_free_, &large_free_}) {
    for (Block* b : *pool) {
      HG_UNPOISON(b->ptr, b->size);
      HG_CUDA_CHECK(cudaFree(b->ptr));
      ++stats_.free_calls;
      if (profiler_hook::recording()) profiler_hook::on_reserve(-static_cast<int64_t>(b->size));
      stats_.cached -= static_cast<int64_t>(b->size);
      stats_.reserved -= static_cast<int64_t>(b->size);
      delete b;
    }
    pool->clear();
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached();
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int64_t CachingAllocator::bytes_in_use() const { return stats().in_use; }
int64_t CachingAllocator::peak_bytes() const { return stats().peak; }
int64_t CachingAllocator::allocation_count() const { return stats().malloc_calls; }

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.in_use;
}

void record_stream(const Tensor& t, Stream s) {
  HG_CHECK(t.defined(), "record_stream: the tensor is undefined");
  HG_CHECK(t.device().is_cuda() && t.device().index == s.device(), "record_stream: the tensor is on ", t.device().str(),
           " and the stream on cuda:", s.device(), "; both must be on one cuda device");
  // A view's data_ptr() may lie inside its block: the block is found by the storage's base.
  // Memory the caching allocator did not hand out (none, or borrowed) has nothing to record.
  const std::shared_ptr<Storage>& st = t.storage();
  CachingAllocator& alloc = caching_allocator(s.device());
  if (!st || !st->data || st->allocator != &alloc) return;
  alloc.record_stream(st->data, s);
}

CachingAllocator& caching_allocator(int device) {
  HG_CHECK(device >= 0 && device < device_count(), "cuda:", device, " does not exist: ", device_count(),
           " CUDA device(s) available", device_count() == 0 ? " (" + unavailable_reason() + ")" : std::string());
  static std::mutex mu;
  // Never destroyed: tensors freed during static destruction still return their blocks.
  static auto* per_device = new std::vector<std::unique_ptr<CachingAllocator>>();
  std::lock_guard<std::mutex> lock(mu);
  if (per_device->empty())
    for (int i = 0; i < device_count(); ++i) per_device->push_back(std::make_unique<CachingAllocator>(i));
  return *(*per_device)[static_cast<size_t>(device)];
}

}  // namespace hg::cuda
