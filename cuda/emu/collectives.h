// The emulator's side of the primitives in cuda/primitives/: each function is one PTX
// instruction, computed from the definitions and fragment tables of the PTX ISA as a
// rendezvous of the warp's lanes (see warp_collective in executor.h).
#pragma once
#include <cstdint>

namespace hg::cuda::emu {

enum class ShflMode : uint8_t { idx, up, down, bfly };

// shfl.sync.<mode>.b32 d, a, b, c, membermask. c packs the segment mask (bits 12:8) and the
// clamp lane (bits 4:0). A source lane that is not a member, or does not exist, yields the
// poison value kShflPoison (the PTX result is undefined). *in_range gets PTX's predicate.
inline constexpr uint32_t kShflPoison = 0xffffffffu;
uint32_t shfl_sync(ShflMode mode, uint32_t mask, uint32_t a, uint32_t b, uint32_t c, bool* in_range = nullptr);
// vote.sync.ballot.b32 / vote.sync.all.pred / vote.sync.any.pred over the member lanes.
uint32_t vote_ballot(uint32_t mask, bool pred);
bool vote_all(uint32_t mask, bool pred);
bool vote_any(uint32_t mask, bool pred);
// bar.warp.sync: the member lanes wait for each other.
void bar_warp_sync(uint32_t mask);

enum class MmaInput : uint8_t { f16, bf16 };
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, c
void mma_m16n8k16(MmaInput type, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, c
void mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);
// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16 {regs}, [row_address]
void ldmatrix(unsigned matrices, bool trans, const void* row_address, uint32_t* regs);

}  // namespace hg::cuda::emu
