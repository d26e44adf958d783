// Device names, parsing, and the choice of device when the user says "auto".
#include "framework/device.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "framework/allocator.h"
#include "framework/error.h"

namespace hg {

namespace {
// CPU memory: 64-byte aligned so that kernels may use aligned vector loads. Blocks of 256 KiB
// and more are kept when freed and handed out again for a request of the same size class
// (sizes rounded up to an eighth of their power of two): glibc serves such sizes with mmap
// and returns them to the system on free, so without this cache every training step would
// page-fault (and have the kernel zero) every activation again; measured on the U-Net step
// (segbench w8 b16 64x64, Zen 3, 2 threads) that was 7-10% of the step. Idle cached bytes are
// bounded by the peak of live bytes (at least 64 MiB): the process never holds more than about
// twice its peak. in_use and peak count live tensors only. Under AddressSanitizer nothing is
// cached, so a use after free is still caught; HG_CPU_ALLOC_CACHE=0 turns it off too.
class CpuAllocator : public Allocator {
 public:
  void* allocate(size_t n) override {
    if (n == 0) return nullptr;
    const size_t size = size_class(n);
    void* p = take_cached(size);
    if (!p) {
      p = std::aligned_alloc(64, size);
      if (!p) {
        release_cache();  // the cache's idle blocks may be what stands in the way
        p = std::aligned_alloc(64, size);
      }
      if (!p) throw Error(detail::concat("out of CPU memory: could not allocate ", n, " bytes"));
      ++count_;
    }
    const int64_t now = in_use_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p;
  }
  void deallocate(void* p, size_t n) override {
    if (!p) return;
    in_use_.fetch_sub(static_cast<int64_t>(n));
    const size_t size = size_class(n);
    if (!keep(p, size)) std::free(p);
  }
  int64_t bytes_in_use() const override { return in_use_.load(); }
  int64_t peak_bytes() const override { return peak_.load(); }
  int64_t allocation_count() const override { return count_.load(); }
  void reset_peak() override { peak_.store(in_use_.load()); }

 private:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr size_t kCacheFrom = SIZE_MAX;
#else
  static constexpr size_t kCacheFrom = size_t{256} << 10;
#endif

  // n rounded up to 64 bytes; from kCacheFrom on, up to an eighth of its power of two.
  size_t size_class(size_t n) const {
    size_t s = (n + 63) / 64 * 64;
    if (s < cache_from_) return s;
    size_t step = 1;
    while ((step << 4) <= s) step <<= 1;  // s in [8 * step, 16 * step)
    return (s + step - 1) / step * step;
  }

  void* take_cached(size_t size) {
    if (size < cache_from_) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(size);
    if (it == cache_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= size;
    return p;
  }

  bool keep(void* p, size_t size) {
    if (size < cache_from_) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t limit = std::max<size_t>(size_t{64} << 20, static_cast<size_t>(std::max<int64_t>(0, peak_.load())));
    if (cached_bytes_ + size > limit) return false;
    cache_[size].push_back(p);
    cached_bytes_ += size;
    return true;
  }

  void release_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : cache_)
      for (void* p : blocks) std::free(p);
    cache_.clear();
    cached_bytes_ = 0;
  }

  // HG_CPU_ALLOC_CACHE=0 turns the cache off (every block goes back to the system at once).
  const size_t cache_from_ = [] {
    const char* e = std::getenv("HG_CPU_ALLOC_CACHE");
    return e && std::string(e) == "0" ? SIZE_MAX : kCacheFrom;
  }();
  std::atomic<int64_t> in_use_{0}, peak_{0}, count_{0};
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> cache_;  // size class -> idle blocks
  size_t cached_bytes_ = 0;
};

std::array<Allocator* (*)(int), 2>& registry() {
  static std::array<Allocator* (*)(int), 2> r{};
  return r;
}
}  // namespace

// Set by the CUDA backend when it is built in; otherwise no CUDA device is usable.
bool (*g_cuda_available)() = nullptr;

Device Device::automatic() {
  if (g_cuda_available && g_cuda_available()) return cuda(0);
  return cpu();
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "auto") return automatic();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    std::string idx = s.substr(5);
    HG_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos,
             "invalid device '", s, "'; valid: cpu, cuda, cuda:N, auto");
    // Digit by digit, so that an index past int's range is a message, not std::out_of_range.
    constexpr int kMaxIndex = 1 << 16;
    int n = 0;
    for (char c : idx) {
      n = n * 10 + (c - '0');
      HG_CHECK(n <= kMaxIndex, "invalid device '", s, "': the index is over ", kMaxIndex);
    }
    return cuda(n);
  }
  throw Error("invalid device '" + s + "'; valid: cpu, cuda, cuda:N, auto");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

void register_allocator(DeviceKind kind, Allocator* (*get)(int)) { registry()[static_cast<size_t>(kind)] = get; }

Allocator* allocator_for(Device d) {
  if (d.is_cpu()) {
    // Never destroyed: tensors held by other static objects are freed after main returns.
    static CpuAllocator* cpu = new CpuAllocator;
    return cpu;
  }
  auto get = registry()[static_cast<size_t>(d.kind)];
  HG_CHECK(get != nullptr, "device ", d.str(),
           " is not available: this build of halfgrad has no CUDA backend (nvcc was not found when it was "
           "configured); use the cpu device");
  return get(d.index);
}

MemoryStats memory_stats(Device d) {
  Allocator* a = allocator_for(d);
  return {a->bytes_in_use(), a->peak_bytes(), a->allocation_count()};
}

void reset_peak_memory(Device d) { allocator_for(d)->reset_peak(); }

std::shared_ptr<Storage> new_storage(size_t nbytes, Device d) {
  return std::make_shared<Storage>(nbytes, d, allocator_for(d));
}

}  // namespace hg
