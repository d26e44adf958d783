// The emulation's memory checks: shadow state for every byte of shared memory (per block)
// and of device memory (per grid) that kernel code touches, from which racecheck finds two
// accesses by different CUDA threads with no barrier between them, initcheck finds reads of
// shared memory the block never wrote, and cp.async data read before its wait is caught.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hg::cuda::emu {

enum class Access : uint8_t { read, write, atomic_read, atomic, async_write };

// From the environment, read once: HG_EMU_RACECHECK=1, HG_EMU_INITCHECK=1,
// HG_EMU_SCHEDULE=adversarial (hold a warp back, preempt between a load and its store),
// HG_EMU_PREEMPT=<per mille> (a seeded yield before that share of stores).
struct CheckOptions {
  bool race = false, init = false, adversarial = false;
  unsigned preempt_per_mille = 0;
  bool any() const { return race || init || adversarial || preempt_per_mille > 0; }
};
const CheckOptions& check_options();
// The options from those variables' values (nullptr: unset); hg::Error names a bad one.
CheckOptions parse_check_options(const char* race, const char* init, const char* schedule, const char* preempt);
void set_check_options(const CheckOptions& o);  // for tests; not while a grid runs

// One access: who made it and the synchronisation it had seen.
struct Stamp {
  uint64_t thread = ~uint64_t{0};  // block index << 32 | thread index in the block
  const void* pc = nullptr;
  uint32_t epoch = 0;   // barriers the block has passed
  uint32_t wepoch = 0;  // collectives the thread's warp has completed
  // The block's acquire clock when the access happened, and when the accessing thread last
  // acquired (an mbarrier wait or named barrier it passed; cuda/emu/async_units.cpp).
  uint32_t time = 0, acquired = 0;
  uint8_t mask = 0;     // bytes of the 4-byte granule
  bool atomic = false;
  bool valid() const { return thread != ~uint64_t{0}; }
};

// What one 4-byte granule remembers: its last writer, two readers, which bytes the block
// wrote (initcheck), which bytes a cp.async will still write (visibility).
struct Cell {
  uint32_t gen = 0;
  uint8_t init = 0, pending = 0;
  Stamp w, r[2];
};

struct Hazard {
  const char* kind = nullptr;  // nullptr: none
  Stamp earlier, later;
};

// The rule: can two accesses by these threads happen in either order on a GPU?
bool concurrent(const Stamp& a, const Stamp& b);
// Records `who` accessing the granule's bytes who.mask; returns the first hazard found.
Hazard record(Cell& c, const Stamp& who, Access kind);

// Shadow cells for one host thread's blocks: the dynamic shared memory and the modules'
// thread-local blocks (`__shared__` arrays live there under the emulation: the library's
// kernels in its block, test kernels in the executable's), minus the emulator's own
// thread-locals. A new generation per block forgets the last.
class SharedShadow {
 public:
  void attach(const void* smem, size_t smem_bytes);
  void exclude(const void* p, size_t n);
  void new_block() { ++gen_; }
  // The cell of address a, fresh for this block; nullptr when a is not shared memory.
  Cell* cell(uintptr_t a, bool* is_static);

 private:
  // Cells in fresh anonymous pages: zero until touched, so a launch pays only for the
  // cells its kernel uses (the static ranges span every thread-local of the process, and
  // a heap allocation of that size would be cleared at every launch).
  struct Range {
    uintptr_t begin = 0, end = 0;
    Cell* cells = nullptr;
    size_t bytes = 0;
    Range() = default;
    Range(Range&& o) noexcept : begin(o.begin), end(o.end), cells(o.cells), bytes(o.bytes) { o.cells = nullptr; }
    Range& operator=(Range&&) = delete;
    ~Range();
    void cover(uintptr_t b, uintptr_t e);
  };
  Range dynamic_;
  std::vector<Range> static_;  // the thread-local blocks of the loaded modules
  std::vector<std::pair<uintptr_t, uintptr_t>> excluded_;
  uint32_t gen_ = 0;
};

// Device memory seen by one grid, shared by the host threads that run its blocks; at most
// kMaxCells granules are followed (the first ones touched), the rest go unchecked.
class GlobalShadow {
 public:
  static constexpr size_t kMaxCells = size_t{1} << 18;
  GlobalShadow();
  bool covers(uintptr_t a) const;
  // Runs record() under the granule's lock; false when the granule is not followed.
  bool access(uintptr_t granule, const Stamp& who, Access kind, Hazard* out);
  void complete_async(uintptr_t granule, uint8_t mask);

 private:
  struct Shard {
    std::mutex mu;
    std::unordered_map<uintptr_t, Cell> cells;
  };
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;  // device allocations, sorted
  std::unique_ptr<Shard[]> shards_;
  std::atomic<size_t> count_{0};
};

// The function and "file:line" of a code address (a return address: the call or access
// just before it), from the library's line tables through addr2line.
struct CodeLocation {
  std::string function, where;
};
CodeLocation locate_code(const void* pc);

}  // namespace hg::cuda::emu
