// The CUDA caching allocator: cudaMalloc is slow and synchronising, and a training step
// allocates the same sizes every step, so freed blocks are kept in bins and handed out
// again. Blocks belong to the stream they were allocated on: a block freed on stream S is
// reused by S at once (S's later work runs after its earlier work); a block that was also
// used on other streams (record_stream) is reused only after events recorded on those
// streams at free time have completed. The same code serves native and emulated devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "cuda/stream.h"
#include "framework/storage.h"

namespace hg {
class Tensor;
}

namespace hg::cuda {

struct CachingAllocatorStats {
  int64_t in_use = 0;        // bytes of blocks handed out (rounded sizes)
  int64_t requested = 0;     // bytes asked for by the blocks handed out
  int64_t peak = 0;          // highest in_use since construction or reset_peak()
  int64_t cached = 0;        // bytes of free blocks kept for reuse (incl. waiting on events)
  int64_t reserved = 0;      // in_use + cached: what cudaMalloc holds for this allocator
  int64_t malloc_calls = 0;  // cudaMalloc calls made
  int64_t free_calls = 0;    // cudaFree calls made
  int64_t reuses = 0;        // allocations served from the cache
};

class CachingAllocator : public Allocator {
 public:
  // Requests up to kSmallLimit go to the small pool (size classes, four per power of two,
  // from 512 bytes); larger ones to the large pool (multiples of 2 MiB, best fit).
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kLargeRound = size_t{2} << 20;
  // The block size a request of n bytes gets.
  static size_t round_size(size_t n);

  explicit CachingAllocator(int device);
  ~CachingAllocator() override;

  void* allocate(size_t nbytes) override;  // on the device's current stream
  void* allocate(size_t nbytes, Stream stream);
  void deallocate(void* p, size_t nbytes) override;
  // p (from this allocator) is used by work on s as well as on its own stream.
  void record_stream(void* p, Stream s);
  // Returns every cached block to the driver (waits for pending cross-stream uses first).
  void empty_cache();

  CachingAllocatorStats stats() const;
  int64_t bytes_in_use() const override;
  int64_t peak_bytes() const override;
  int64_t allocation_count() const override;
  void reset_peak() override;
  int device() const { return device_; }

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;
    void* stream = nullptr;        // the stream it was allocated on (a cudaStream_t)
    std::vector<Stream> used_on;   // other streams, from record_stream
  };
  struct Pending {
    Block* block;
    std::vector<void*> events;  // cudaEvent_t, one per stream in used_on
  };
  struct ByStreamSize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, ByStreamSize>;

  Block* find_free(size_t size, void* stream);
  void* device_malloc(size_t size);
  void collect_pending(bool wait);
  void release_cached();
  void hand_out(Block* b, size_t requested);

  int device_;
  mutable std::mutex mu_;
  FreeSet small_free_, large_free_;
  std::unordered_map<void*, Block*> active_;
  std::vector<Pending> pending_;
  CachingAllocatorStats stats_;
};

// The rule for tensors used on a stream other than the one current when they were made:
// call record_stream(t, s) after issuing that work, or the memory may be handed out again
// (to work on its own stream) while s still reads it. A no-op for s = t's own stream.
void record_stream(const Tensor& t, Stream s);

// The allocator of cuda:device (what memory_stats(Device::cuda(device)) reports).
CachingAllocator& caching_allocator(int device = 0);

}  // namespace hg::cuda
