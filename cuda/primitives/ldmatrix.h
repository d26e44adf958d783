// ldmatrix: a warp loads 1, 2 or 4 8x8 matrices of 16-bit elements from shared memory into
// mma fragments. Lane r of lanes 8m..8m+7 gives the address of row r of matrix m (16
// contiguous bytes, 16-byte aligned); every lane then holds, in register m, elements
// (lane / 4, 2 * (lane % 4) + {0, 1}) of matrix m, or with .trans the transposed pair
// (2 * (lane % 4) + {0, 1}, lane / 4). Low 16 bits hold the first element.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

#if defined(HG_CUDA_EMULATION)
#define HG_LDMATRIX(name, n, trans, ptx)                                                         \
  HG_DEVICE void name(uint32_t (&r)[n], const void* row_address) { emu::ldmatrix(n, trans, row_address, r); }
#else
#define HG_LDMATRIX_ASM_x1 "{%0}, [%1];" : "=r"(r[0]) : "r"(a)
#define HG_LDMATRIX_ASM_x2 "{%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a)
#define HG_LDMATRIX_ASM_x4 "{%0, %1, %2, %3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a)
#define HG_LDMATRIX(name, n, trans, ptx)                                                        \
  HG_DEVICE void name(uint32_t (&r)[n], const void* row_address) {                              \
    const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));               \
    asm volatile(ptx HG_LDMATRIX_ASM_x##n);                                                     \
  }
#endif

HG_LDMATRIX(ldmatrix_x1, 1, false, "ldmatrix.sync.aligned.m8n8.x1.shared.b16 ")
HG_LDMATRIX(ldmatrix_x2, 2, false, "ldmatrix.sync.aligned.m8n8.x2.shared.b16 ")
HG_LDMATRIX(ldmatrix_x4, 4, false, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 ")
HG_LDMATRIX(ldmatrix_x1_trans, 1, true, "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 ")
HG_LDMATRIX(ldmatrix_x2_trans, 2, true, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 ")
HG_LDMATRIX(ldmatrix_x4_trans, 4, true, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 ")

}  // namespace hg::cuda
