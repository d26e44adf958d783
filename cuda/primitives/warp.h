// Warp shuffles and votes: shfl.sync (idx, up, down, bfly), vote.sync (ballot, all, any)
// and %laneid. The CUDA-style helpers (shfl_idx_sync(mask, v, src_lane, width) ...) encode
// width the way PTX's c operand does: segment mask (32 - width) << 8, clamp lane 31 (or 0
// for up), so lanes read within their width-sized segment and out-of-range reads return
// the caller's own value. 8-byte values move as two 32-bit shuffles.
#pragma once
#include <cstring>

#include "cuda/primitives/common.h"

namespace hg::cuda {

HG_DEVICE unsigned lane_id() {
#if defined(HG_CUDA_EMULATION)
  return emu::lane_id();
#else
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
#endif
}

#if defined(HG_CUDA_EMULATION)
#define HG_SHFL(mode, ptx_mode)                                                                   \
  HG_DEVICE uint32_t shfl_##mode##_b32(uint32_t mask, uint32_t a, uint32_t b, uint32_t c) {       \
    return emu::shfl_sync(emu::ShflMode::ptx_mode, mask, a, b, c);                                \
  }
#else
#define HG_SHFL(mode, ptx_mode)                                                                   \
  HG_DEVICE uint32_t shfl_##mode##_b32(uint32_t mask, uint32_t a, uint32_t b, uint32_t c) {       \
    uint32_t d;                                                                                   \
    asm volatile("shfl.sync." #ptx_mode ".b32 %0, %1, %2, %3, %4;"                                \
                 : "=r"(d)                                                                        \
                 : "r"(a), "r"(b), "r"(c), "r"(mask));                                            \
    return d;                                                                                     \
  }
#endif
// shfl.sync.{idx,up,down,bfly}.b32 d, a, b, c, mask: the raw instructions.
HG_SHFL(idx, idx)
HG_SHFL(up, up)
HG_SHFL(down, down)
HG_SHFL(xor, bfly)
#undef HG_SHFL

namespace detail {
template <class T, class Shfl>
HG_DEVICE T shfl_value(T v, Shfl shfl) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 4- or 8-byte values");
  uint32_t w[sizeof(T) / 4];
  memcpy(w, &v, sizeof(T));
  for (unsigned i = 0; i < sizeof(T) / 4; ++i) w[i] = shfl(w[i]);
  memcpy(&v, w, sizeof(T));
  return v;
}
HG_DEVICE uint32_t segment(int width) { return static_cast<uint32_t>(32 - width) << 8; }
}  // namespace detail

// The value of lane src_lane of the caller's width-sized segment (width a power of two <= 32).
template <class T>
HG_DEVICE T shfl_idx_sync(uint32_t mask, T v, int src_lane, int width = 32) {
  return detail::shfl_value(v, [&](uint32_t w) {
    return shfl_idx_b32(mask, w, static_cast<uint32_t>(src_lane), detail::segment(width) | 0x1f);
  });
}
// The value of lane (own - delta), or the own value when that leaves the segment.
template <class T>
HG_DEVICE T shfl_up_sync(uint32_t mask, T v, unsigned delta, int width = 32) {
  return detail::shfl_value(v, [&](uint32_t w) { return shfl_up_b32(mask, w, delta, detail::segment(width)); });
}
// The value of lane (own + delta), or the own value when that leaves the segment.
template <class T>
HG_DEVICE T shfl_down_sync(uint32_t mask, T v, unsigned delta, int width = 32) {
  return detail::shfl_value(v, [&](uint32_t w) { return shfl_down_b32(mask, w, delta, detail::segment(width) | 0x1f); });
}
// The value of lane (own ^ lane_mask), or the own value when that leaves the segment.
template <class T>
HG_DEVICE T shfl_xor_sync(uint32_t mask, T v, unsigned lane_mask, int width = 32) {
  return detail::shfl_value(v, [&](uint32_t w) { return shfl_xor_b32(mask, w, lane_mask, detail::segment(width) | 0x1f); });
}

// vote.sync.ballot.b32: bit i set when member lane i's predicate is true.
HG_DEVICE uint32_t ballot_sync(uint32_t mask, bool pred) {
#if defined(HG_CUDA_EMULATION)
  return emu::vote_ballot(mask, pred);
#else
  uint32_t d;
  asm volatile(
      "{ .reg .pred p; setp.ne.u32 p, %1, 0; vote.sync.ballot.b32 %0, p, %2; }"
      : "=r"(d)
      : "r"(static_cast<uint32_t>(pred)), "r"(mask));
  return d;
#endif
}

// vote.sync.all.pred: true when every member lane's predicate is true.
HG_DEVICE bool all_sync(uint32_t mask, bool pred) {
#if defined(HG_CUDA_EMULATION)
  return emu::vote_all(mask, pred);
#else
  uint32_t d;
  asm volatile(
      "{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync.all.pred q, p, %2; selp.u32 %0, 1, 0, q; }"
      : "=r"(d)
      : "r"(static_cast<uint32_t>(pred)), "r"(mask));
  return d != 0;
#endif
}

// vote.sync.any.pred: true when some member lane's predicate is true.
HG_DEVICE bool any_sync(uint32_t mask, bool pred) {
#if defined(HG_CUDA_EMULATION)
  return emu::vote_any(mask, pred);
#else
  uint32_t d;
  asm volatile(
      "{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync.any.pred q, p, %2; selp.u32 %0, 1, 0, q; }"
      : "=r"(d)
      : "r"(static_cast<uint32_t>(pred)), "r"(mask));
  return d != 0;
#endif
}

}  // namespace hg::cuda
