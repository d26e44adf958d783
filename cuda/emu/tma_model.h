// The emulation's model of TMA on sm_90: tensor maps (cuTensorMapEncodeTiled) and the tiled
// box copies of cp.async.bulk.tensor, as pure functions of a map, coordinates and a shared
// window, so that the executor can run them and host tests can check them against the docs.
//
// Rules implemented, in our words, with where they come from:
// Encoder (CUDA driver API, cuTensorMapEncodeTiled; every violation is CUDA_ERROR_INVALID_VALUE):
//  - the map pointer is non-null and 64-byte aligned; every enum is one of its documented values;
//  - rank 1..5, and 3..5 when the map is interleaved;
//  - the global address is 16-byte aligned, 32 with 32-byte interleave or a 16-byte-aligned packed
//    type; globalDim[i] is 1..2^32 (globalDim[0] a multiple of 128 for the 16-byte-aligned packed
//    types, of 2 for 16U4_ALIGN8B); the rank-1 globalStrides are multiples of 16 (32 with 32-byte
//    interleave or a 16-byte-aligned packed type) and below 2^40;
//  - boxDim[i] is 1..256; without interleave boxDim[0] * element size is a multiple of 16 bytes;
//    the 16-byte-aligned packed types need boxDim[0] == 128; elementStrides[i] is 1..8;
//  - without interleave, a swizzled box's inner extent in bytes is at most the swizzle span (32,
//    64, 128 for every 128B mode); 32-byte interleave needs the 32B swizzle; 16U6_ALIGN16B needs
//    no interleave; the packed 16-byte-aligned types allow only the swizzles the docs list;
//  - the NaN out-of-bounds fill needs a floating-point, non-packed type.
//  The docs also show each stride covering the one below it (globalStrides[i] >= globalDim[i] *
//  globalStrides[i-1]) as the usual layout; they do not state it as a requirement and the model
//  does not check it. The programming guide's swizzle table asks 128-byte global alignment for
//  swizzled maps where the driver API asks 16; the encoder follows the driver API.
// Copies (PTX ISA cp.async.bulk.tensor; CUDA programming guide, "Tensor Memory Access"):
//  - the shared address is 128-byte aligned in every swizzle mode (the guide's alignment table;
//    its swizzle table repeats 128 for the swizzled modes). The swizzle is a function of the
//    shared address (cuda/primitives/smem_swizzle.h), so a tile at a 128-aligned base that is
//    not aligned to the pattern's repeat (1024 bytes for 128B) sees the pattern shifted, as the
//    guide's "swizzle pattern pointer offset" describes; callers pairing it with wgmma want the
//    repeat alignment, which is theirs to keep;
//  - the box is laid out densely in shared memory, boxDim[0] innermost, each 16-byte chunk moved
//    to its swizzled address; a load writes out-of-bounds elements as zeros (or, with the NaN
//    fill, a NaN: the docs name a special NaN without its bits; the model writes the quiet NaN
//    with every mantissa bit set) and completes the whole box's bytes on the mbarrier;
//  - a load's coordinates may be negative or past the end; a store writes only in-bounds
//    elements, and its box's first corner may not be negative (the guide).
// The copies model elementStrides of 1 (elementStrides[0] is ignored without interleave, as the
// driver docs say), no interleave, the 16-byte-chunk swizzles and the 1/2/4/8-byte types; a map
// using anything else is encoded (as the driver would) but refused by a copy, naming the feature.
#pragma once
#include "cuda/emu/driver_api.h"

#include <cstdint>
#include <string>

#include "cuda/emu/shared_window.h"

namespace hg::cuda::emu {

// The shared-memory alignment every cp.async.bulk.tensor source or destination needs.
constexpr uint32_t kTmaSharedAlignment = 128;

// The emulated cuTensorMapEncodeTiled: the driver's signature and result codes. The map is kept
// in the opaque CUtensorMap as the model's own record, marked so that a copy can tell a map this
// encoder made from a zeroed or hand-filled one.
CUresult encode_tensor_map_tiled(CUtensorMap* tensor_map, CUtensorMapDataType data_type, cuuint32_t rank,
                                 void* global_address, const cuuint64_t* global_dim,
                                 const cuuint64_t* global_strides /* rank - 1 entries, bytes */,
                                 const cuuint32_t* box_dim, const cuuint32_t* element_strides,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill);

// Fault injection for tests: the next n encode_tensor_map_tiled calls (any thread) fail with
// CUDA_ERROR_INVALID_VALUE, as a driver that refuses a map would; 0 stops it. Returns how
// many injected failures were still pending.
int fail_next_tensor_map_encodes(int n);

// Why this thread's last encode_tensor_map_tiled call failed (empty after a success).
const std::string& last_tensor_map_error();

// cp.async.bulk.tensor.<rank>d.shared::cluster.global: the box at element coordinates
// coords[0..rank) (innermost first) into shared window address dst. Returns the bytes the copy
// completes on its mbarrier. hg::Error names the broken rule; nothing is written then.
uint32_t tma_load_tile(const CUtensorMap& map, const SharedWindow& smem, uint32_t dst, const int32_t* coords,
                       int rank);

// cp.async.bulk.tensor.<rank>d.global.shared::cta: the box at shared address src back to the
// tensor at coords; out-of-bounds elements are not written.
void tma_store_tile(const CUtensorMap& map, const SharedWindow& smem, uint32_t src, const int32_t* coords, int rank);

// The bytes of shared memory a copy through this map moves (the whole box).
uint32_t tma_box_bytes(const CUtensorMap& map, int rank);

}  // namespace hg::cuda::emu
