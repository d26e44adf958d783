// The warp-wide instructions of the emulation, each computed for all member lanes at once
// by the last lane to arrive, following the PTX ISA: shfl.sync's lane arithmetic, vote,
// bar.warp.sync, mma's fragment tables (cuda/primitives/mma_layout.h) and ldmatrix's rows.
#include "cuda/emu/collectives.h"

#include <cstring>

#include "cuda/emu/executor.h"
#include "cuda/emu/racecheck.h"
#include "cuda/primitives/mma_layout.h"
#include "framework/bfloat16.h"
#include "framework/error.h"
#include "framework/half.h"

namespace hg::cuda::emu {

namespace {

struct ShflIn {
  ShflMode mode;
  uint32_t a, b, c;
};
struct ShflOut {
  uint32_t d;
  bool in_range;
};

void shfl_combine(const LaneSlot* lanes, uint32_t members) {
  for (int lane = 0; lane < 32; ++lane) {
    if (!(members >> lane & 1)) continue;
    const auto& in = *static_cast<const ShflIn*>(lanes[lane].in);
    auto& out = *static_cast<ShflOut*>(lanes[lane].out);
    const int b = static_cast<int>(in.b & 0x1f), clamp = static_cast<int>(in.c & 0x1f);
    const int segmask = static_cast<int>(in.c >> 8 & 0x1f);
    const int max_lane = (lane & segmask) | (clamp & ~segmask);
    const int min_lane = lane & segmask;
    int j = lane;
    bool p = false;
    switch (in.mode) {
      case ShflMode::up: j = lane - b; p = j >= max_lane; break;
      case ShflMode::down: j = lane + b; p = j <= max_lane; break;
      case ShflMode::bfly: j = lane ^ b; p = j <= max_lane; break;
      case ShflMode::idx: j = min_lane | (b & ~segmask); p = j <= max_lane; break;
    }
    if (!p) j = lane;
    out.in_range = p;
    out.d = members >> j & 1 ? static_cast<const ShflIn*>(lanes[j].in)->a : kShflPoison;
  }
}

const char* shfl_name(ShflMode m) {
  switch (m) {
    case ShflMode::idx: return "shfl.sync.idx.b32";
    case ShflMode::up: return "shfl.sync.up.b32";
    case ShflMode::down: return "shfl.sync.down.b32";
    case ShflMode::bfly: return "shfl.sync.bfly.b32";
  }
  return "shfl.sync";
}

struct VoteOut {
  uint32_t ballot;
};

void vote_combine(const LaneSlot* lanes, uint32_t members) {
  uint32_t ballot = 0;
  for (int lane = 0; lane < 32; ++lane)
    if ((members >> lane & 1) && *static_cast<const bool*>(lanes[lane].in)) ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane)
    if (members >> lane & 1) static_cast<VoteOut*>(lanes[lane].out)->ballot = ballot;
}

void nothing_combine(const LaneSlot*, uint32_t) {}

uint32_t vote(const char* op, uint32_t mask, bool pred) {
  VoteOut out{};
  warp_collective(mask, op, &vote_combine, &pred, &out);
  return out.ballot;
}

// mma needs every lane of the warp: .aligned instructions are executed by all 32 lanes.
void require_full_warp(uint32_t members, const char* op) {
  if (members != 0xffffffffu)
    fail(detail::concat(op, ": needs all 32 lanes of the warp, but lanes ", members, " (as a bit mask) take part"));
}

struct MmaIn {
  const uint32_t* a;
  const uint32_t* b;
  const float* c;
};

float element16(uint32_t reg, int half, MmaInput type) {
  const auto bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
  return type == MmaInput::f16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
}

// D = A * B + C with each product exact (f16, bf16 and tf32 products fit in a double) and
// the sum of the k products and c rounded once to f32.
template <int K>
void multiply(const float (&a)[16][K], const float (&b)[K][8], const LaneSlot* lanes) {
  for (int lane = 0; lane < 32; ++lane) {
    const auto& in = *static_cast<const MmaIn*>(lanes[lane].in);
    auto* d = static_cast<float*>(lanes[lane].out);
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = mma_m16n8_c(lane, i);
      double sum = in.c[i];
      for (int k = 0; k < K; ++k) sum += static_cast<double>(a[rc.row][k]) * b[k][rc.col];
      d[i] = static_cast<float>(sum);
    }
  }
}

template <MmaInput Type>
void mma_k16_combine(const LaneSlot* lanes, uint32_t members) {
  require_full_warp(members, "mma.m16n8k16");
  float a[16][16], b[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const auto& in = *static_cast<const MmaIn*>(lanes[lane].in);
    for (int i = 0; i < 8; ++i) {
      const RowCol rc = mma_m16n8k16_a(lane, i);
      a[rc.row][rc.col] = element16(in.a[i / 2], i % 2, Type);
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = mma_m16n8k16_b(lane, i);
      b[rc.row][rc.col] = element16(in.b[i / 2], i % 2, Type);
    }
  }
  multiply(a, b, lanes);
}

float tf32(uint32_t bits) {
  const uint32_t kept = bits & 0xffffe000u;  // the tensor core reads 19 bits: sign, 8 exponent, 10 fraction
  float f;
  std::memcpy(&f, &kept, 4);
  return f;
}

void mma_tf32_combine(const LaneSlot* lanes, uint32_t members) {
  require_full_warp(members, "mma.m16n8k8.tf32");
  float a[16][8], b[8][8];
  for (int lane = 0; lane < 32; ++lane) {
    const auto& in = *static_cast<const MmaIn*>(lanes[lane].in);
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = mma_m16n8k8_tf32_a(lane, i);
      a[rc.row][rc.col] = tf32(in.a[i]);
    }
    for (int i = 0; i < 2; ++i) {
      const RowCol rc = mma_m16n8k8_tf32_b(lane, i);
      b[rc.row][rc.col] = tf32(in.b[i]);
    }
  }
  multiply(a, b, lanes);
}

template <unsigned N, bool Trans>
void ldmatrix_combine(const LaneSlot* lanes, uint32_t members) {
  require_full_warp(members, "ldmatrix");
  for (unsigned m = 0; m < N; ++m)
    for (unsigned r = 0; r < 8; ++r) {
      const void* row = *static_cast<const void* const*>(lanes[8 * m + r].in);
      if (reinterpret_cast<uintptr_t>(row) % 16 != 0)
        fail(detail::concat("ldmatrix: lane ", 8 * m + r, " gives row address ", row,
                            ", which is not 16-byte aligned (each row is 16 contiguous, aligned bytes)"));
    }
  for (unsigned lane = 0; lane < 32; ++lane) {
    auto* regs = static_cast<uint32_t*>(lanes[lane].out);
    for (unsigned m = 0; m < N; ++m) {
      uint16_t e[2];
      for (unsigned j = 0; j < 2; ++j) {
        const unsigned row = Trans ? lane % 4 * 2 + j : lane / 4;
        const unsigned col = Trans ? lane / 4 : lane % 4 * 2 + j;
        const auto* p = *static_cast<const unsigned char* const*>(lanes[8 * m + row].in);
        std::memcpy(&e[j], p + 2 * col, 2);
      }
      regs[m] = uint32_t{e[0]} | uint32_t{e[1]} << 16;
    }
  }
}

}  // namespace

uint32_t shfl_sync(ShflMode mode, uint32_t mask, uint32_t a, uint32_t b, uint32_t c, bool* in_range) {
  const ShflIn in{mode, a, b, c};
  ShflOut out{};
  warp_collective(mask, shfl_name(mode), &shfl_combine, &in, &out);
  if (in_range) *in_range = out.in_range;
  return out.d;
}

uint32_t vote_ballot(uint32_t mask, bool pred) { return vote("vote.sync.ballot.b32", mask, pred); }
bool vote_all(uint32_t mask, bool pred) { return (vote("vote.sync.all.pred", mask, pred) | ~mask) == 0xffffffffu; }
bool vote_any(uint32_t mask, bool pred) { return vote("vote.sync.any.pred", mask, pred) != 0; }

void bar_warp_sync(uint32_t mask) { warp_collective(mask, "bar.warp.sync", &nothing_combine, nullptr, nullptr); }

void mma_m16n8k16(MmaInput type, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  const MmaIn in{a, b, c};
  float out[4];
  if (type == MmaInput::f16)
    warp_collective(0xffffffffu, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                    &mma_k16_combine<MmaInput::f16>, &in, out);
  else
    warp_collective(0xffffffffu, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                    &mma_k16_combine<MmaInput::bf16>, &in, out);
  std::memcpy(d, out, sizeof out);  // d may alias c: write only after every lane's c was read
}

void mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  const MmaIn in{a, b, c};
  float out[4];
  warp_collective(0xffffffffu, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", &mma_tf32_combine, &in, out);
  std::memcpy(d, out, sizeof out);
}

void ldmatrix(unsigned matrices, bool trans, const void* row_address, uint32_t* regs) {
  using Fn = Combine;
  static constexpr Fn table[2][3] = {{&ldmatrix_combine<1, false>, &ldmatrix_combine<2, false>, &ldmatrix_combine<4, false>},
                                     {&ldmatrix_combine<1, true>, &ldmatrix_combine<2, true>, &ldmatrix_combine<4, true>}};
  static constexpr const char* names[2][3] = {
      {"ldmatrix.sync.aligned.m8n8.x1.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
       "ldmatrix.sync.aligned.m8n8.x4.shared.b16"},
      {"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
       "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"}};
  const int k = matrices == 1 ? 0 : matrices == 2 ? 1 : 2;
  // The lanes that give a row address read its 16 bytes (the memory checks see them).
  if (lane_id() < 8 * matrices) memory_access(row_address, 16, Access::read, __builtin_return_address(0));
  uint32_t out[4];
  warp_collective(0xffffffffu, names[trans][k], table[trans][k], &row_address, out);
  std::memcpy(regs, out, 4 * matrices);
}

}  // namespace hg::cuda::emu
