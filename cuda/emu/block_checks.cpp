// The memory checks' side of the block runner (block_runner.h): each load and store of a
// kernel against the shadow cells of cuda/emu/racecheck.h, the preemption at stores, the
// adversarial warp hold-back, and the reports that name both accesses.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda/emu/block_runner.h"

namespace hg::cuda::emu::runner {

namespace {

// The bytes of [a, a + n) that lie in the 4-byte granule g.
uint8_t granule_mask(uintptr_t g, uintptr_t a, size_t n) {
  uint8_t m = 0;
  for (unsigned i = 0; i < 4; ++i)
    if (g + i >= a && g + i < a + n) m = static_cast<uint8_t>(m | 1u << i);
  return m;
}

std::string access_site(const Stamp& s) {
  return locate_code(static_cast<const char*>(s.pc) - 1).where;
}

}  // namespace

void BlockRunner::hold_a_warp() {
  hold_rounds_ = 0;
  if (!opts_.adversarial || warps_.size() < 2) return;
  held_warp_ = static_cast<unsigned>(check_rng_() % warps_.size());
  hold_rounds_ = 64;
}

void BlockRunner::access(CudaThread& t, uintptr_t a, size_t n, Access kind, const void* pc) {
  if (t.fiber.on_stack(a)) return;  // the thread's own locals: most accesses, never shared
  const bool read = kind == Access::read || kind == Access::atomic_read;
  Stamp who;
  who.thread = block_linear_ << 32 | t.linear;
  who.pc = pc;
  who.epoch = epoch_;
  who.wepoch = wepoch_[t.linear / 32];
  who.time = sync_clock_;
  who.acquired = t.acquired;
  who.atomic = kind == Access::atomic || kind == Access::atomic_read;
  bool tracked = false;
  for (uintptr_t g = a & ~uintptr_t{3}; g < a + n; g += 4) {
    who.mask = granule_mask(g, a, n);
    bool is_static = false;
    Hazard h;
    if (Cell* c = shadow_.cell(std::max(g, a), &is_static)) {
      tracked = true;
      const char* space = is_static ? "static __shared__ memory" : "dynamic shared memory";
      if (read && (c->pending & who.mask))
        report_read("cp.async check",
                    "reads the destination of a cp.async before the cp.async.wait_group that completes it", who, space);
      if (read && (c->init & who.mask) != who.mask) {
        if (opts_.init)
          report_read("initcheck", "reads shared memory that no thread of the block has written", who, space);
        // Poisoned as the dynamic shared memory is: the last block's values must not leak in.
        if (is_static)
          for (unsigned i = 0; i < 4; ++i)
            if ((who.mask & ~c->init) >> i & 1) *reinterpret_cast<unsigned char*>(g + i) = 0xff;
      }
      h = record(*c, who, kind);
      if (opts_.race && h.kind) report(h, space, std::max(g, a));
    } else if (global_ && global_->covers(std::max(g, a))) {
      tracked = true;
      if (global_->access(g, who, kind, &h) && opts_.race && h.kind) report(h, "device memory", std::max(g, a));
    }
  }
  if (!tracked) return;
  if (kind == Access::read) t.last_load = a & ~uintptr_t{3};
  if (kind != Access::write) return;
  // A yield before the store lets other threads run between this thread's load and store,
  // as a GPU interleaves warps, so a plain read-modify-write can lose updates here too.
  unsigned per_mille = opts_.preempt_per_mille;
  if (opts_.adversarial && t.last_load == (a & ~uintptr_t{3})) per_mille = std::max(per_mille, 500u);
  if (per_mille && check_rng_() % 1000 < per_mille) t.fiber.yield();
}

void BlockRunner::complete_async(uintptr_t a, size_t n) {
  for (uintptr_t g = a & ~uintptr_t{3}; g < a + n; g += 4) {
    bool is_static = false;
    if (Cell* c = shadow_.cell(std::max(g, a), &is_static))
      c->pending = static_cast<uint8_t>(c->pending & ~granule_mask(g, a, n));
  }
}

std::string BlockRunner::thread_name(uint64_t thread) const {
  const uint64_t b = thread >> 32;
  const unsigned i = static_cast<unsigned>(thread & 0xffffffffu);
  const uint3 tid{i % block_.x, (i / block_.x) % block_.y, i / (block_.x * block_.y)};
  const uint3 bid{static_cast<unsigned>(b % grid_.x), static_cast<unsigned>(b / grid_.x % grid_.y),
                  static_cast<unsigned>(b / (uint64_t{grid_.x} * grid_.y))};
  return detail::concat("thread ", dims(tid), " of block ", dims(bid));
}

std::string BlockRunner::kernel_name() const {
  return body_.name ? std::string(body_.name) : locate_code(body_.kernel).function;
}

void BlockRunner::report(const Hazard& h, const char* space, uintptr_t addr) const {
  const bool raw = std::strcmp(h.kind, "read-after-write") == 0, war = std::strcmp(h.kind, "write-after-read") == 0;
  auto verb = [](const Stamp& s, bool reads) {
    return detail::concat(reads ? "reads" : "writes", s.atomic ? " (atomically)" : "");
  };
  throw Error(detail::concat(
      "cuda emulation racecheck: ", h.kind, " hazard on ", space, " at ", reinterpret_cast<const void*>(addr),
      " in kernel ", kernel_name(), ": ", thread_name(h.earlier.thread), " ",
      verb(h.earlier, war), " it at ", access_site(h.earlier), ", then ", thread_name(h.later.thread), " ",
      verb(h.later, raw), " it at ", access_site(h.later),
      h.earlier.thread >> 32 != h.later.thread >> 32 ? " (different blocks: no barrier orders them)"
                                                       : " with no __syncthreads or warp collective between them",
      "; only two atomics may meet so"));
}

void BlockRunner::report_read(const char* check, const char* what, const Stamp& who, const char* space) const {
  throw Error(detail::concat("cuda emulation ", check, ": ", thread_name(who.thread),
                             " of kernel ", kernel_name(), " ", what, " (", space, ", at ",
                             access_site(who), ")"));
}

void complete_async(void* dst, unsigned bytes) {
  if (g_checks.load(std::memory_order_relaxed) && t_runner)
    t_runner->complete_async(reinterpret_cast<uintptr_t>(dst), bytes);
}

}  // namespace hg::cuda::emu::runner
