// Device names, parsing, and the choice of device when the user says "auto".
#include "framework/device.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>
#include <ostream>

#include "framework/allocator.h"
#include "framework/error.h"

namespace hg {

namespace {
// CPU memory: 64-byte aligned so that kernels may use aligned vector loads.
class CpuAllocator : public Allocator {
 public:
  void* allocate(size_t n) override {
    if (n == 0) return nullptr;
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p)
      throw Error(detail::concat("out of CPU memory: could not allocate ", n, " bytes"));
    const int64_t now = in_use_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    ++count_;
    return p;
  }
  void deallocate(void* p, size_t n) override {
    if (p) in_use_.fetch_sub(static_cast<int64_t>(n));
    std::free(p);
  }
  int64_t bytes_in_use() const override { return in_use_.load(); }
  int64_t peak_bytes() const override { return peak_.load(); }
  int64_t allocation_count() const override { return count_.load(); }
  void reset_peak() override { peak_.store(in_use_.load()); }

 private:
  std::atomic<int64_t> in_use_{0}, peak_{0}, count_{0};
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
    static CpuAllocator cpu;
    return &cpu;
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
