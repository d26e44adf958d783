// The emulated cuTensorMapEncodeTiled (cuda/emu/tma_model.h) against the CUDA driver API's
// documented requirements: what the Hopper GEMM encodes is accepted, each violation refused.
#include <catch2/catch.hpp>

#include "cuda/emu/driver_api.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda/emu/tma_model.h"

using namespace hg::cuda::emu;
using Catch::Matchers::Contains;

TEST_CASE("tma encoder accepts the Hopper GEMM's operand maps", "[cuda][emu][tma]") {
  // As cuda/hopper_gemm.cpp's k_major_map(): {K, rows, batches}, 16-bit, box {64, 128, 1}, 128B swizzle.
  alignas(256) static unsigned char operand[16];
  const cuuint64_t K = 200, rows = 300, ld = 264, batches = 3;
  for (auto type : {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16})
    for (bool batched : {false, true}) {
      const cuuint64_t dims[3] = {K, rows, batched ? batches : cuuint64_t{1}};
      const cuuint64_t strides[2] = {ld * 2, ld * rows * 2};
      const cuuint32_t box[3] = {64, 128, 1}, elem[3] = {1, 1, 1};
      CUtensorMap map;
      CHECK(encode_tensor_map_tiled(&map, type, 3, operand, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
      CHECK(last_tensor_map_error().empty());
    }
}

TEST_CASE("tma encoder refuses each documented violation, naming the rule", "[cuda][emu][tma]") {
  struct Args {  // a valid 2-D f16 map; each case breaks one rule
    CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    cuuint32_t rank = 2;
    uintptr_t address = 0x100000;
    cuuint64_t dims[6] = {64, 32, 4, 1, 1, 1}, strides[5] = {128, 4096, 16384, 16384, 16384};
    cuuint32_t box[6] = {64, 8, 1, 1, 1, 1}, elem[6] = {1, 1, 1, 1, 1, 1};
    CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE;
    CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
    CUtensorMap* target = nullptr;
  };
  struct Case {
    const char* rule;
    std::function<void(Args&)> edit;
  };
  alignas(128) static unsigned char raw[256];
  const std::vector<Case> cases = {
      {"tensorRank 0 is outside 1..5", [](Args& a) { a.rank = 0; }},
      {"tensorRank 6 is outside 1..5", [](Args& a) { a.rank = 6; }},
      {"with interleave must be 3..5", [](Args& a) { a.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; }},
      {"must be 16-byte aligned", [](Args& a) { a.address += 8; }},
      {"must be 32-byte aligned",
       [](Args& a) { a.rank = 3, a.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, a.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, a.address += 16; }},
      {"globalDim[1] = 0 must be 1..2^32", [](Args& a) { a.dims[1] = 0; }},
      {"globalDim[0] = 4294967297 must be 1..2^32", [](Args& a) { a.dims[0] = (uint64_t{1} << 32) + 1; }},
      {"globalStrides[0] = 136 bytes must be a multiple of 16", [](Args& a) { a.strides[0] = 136; }},
      {"must be below 2^40", [](Args& a) { a.strides[0] = uint64_t{1} << 40; }},
      {"boxDim[1] = 0 must be 1..256", [](Args& a) { a.box[1] = 0; }},
      {"boxDim[1] = 257 must be 1..256", [](Args& a) { a.box[1] = 257; }},
      {"= 8 bytes must be a multiple of 16", [](Args& a) { a.box[0] = 4, a.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE; }},
      {"(boxDim[0] * element size = 256 bytes) exceeds the 128-byte swizzle span", [](Args& a) { a.box[0] = 128; }},
      {"exceeds the 32-byte swizzle span", [](Args& a) { a.box[0] = 32, a.swizzle = CU_TENSOR_MAP_SWIZZLE_32B; }},
      {"elementStrides[1] = 0 must be 1..8", [](Args& a) { a.elem[1] = 0; }},
      {"elementStrides[0] = 9 must be 1..8", [](Args& a) { a.elem[0] = 9; }},
      {"tensorDataType 16 is not", [](Args& a) { a.type = static_cast<CUtensorMapDataType>(16); }},
      {"interleave 3 is not", [](Args& a) { a.interleave = static_cast<CUtensorMapInterleave>(3); }},
      {"swizzle 7 is not", [](Args& a) { a.swizzle = static_cast<CUtensorMapSwizzle>(7); }},
      {"l2Promotion 4 is not", [](Args& a) { a.l2 = static_cast<CUtensorMapL2promotion>(4); }},
      {"oobFill 2 is not", [](Args& a) { a.oob = static_cast<CUtensorMapFloatOOBfill>(2); }},
      {"32-byte interleave requires CU_TENSOR_MAP_SWIZZLE_32B",
       [](Args& a) { a.rank = 3, a.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, a.swizzle = CU_TENSOR_MAP_SWIZZLE_64B; }},
      {"globalStrides[0] = 144 bytes must be a multiple of 32",
       [](Args& a) { a.rank = 3, a.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, a.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, a.strides[0] = 144; }},
      {"NaN out-of-bounds fill needs a floating-point",
       [](Args& a) { a.type = CU_TENSOR_MAP_DATA_TYPE_INT32, a.box[0] = 32, a.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; }},
      {"must be a multiple of 128 for a 16-byte-aligned packed type",
       [](Args& a) { a.type = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, a.dims[0] = 100, a.box[0] = 128; }},
      {"tensorMap is null", [](Args& a) { a.target = nullptr; }},
      {"tensorMap's address must be 64-byte aligned", [](Args& a) { a.target = reinterpret_cast<CUtensorMap*>(raw + 16); }},
  };
  for (const auto& c : cases) {
    INFO(c.rule);
    CUtensorMap map;
    std::memset(&map, 0x5A, sizeof map);
    Args a;
    a.target = &map;
    c.edit(a);
    const CUresult r = encode_tensor_map_tiled(a.target, a.type, a.rank, reinterpret_cast<void*>(a.address), a.dims,
                                               a.strides, a.box, a.elem, a.interleave, a.swizzle, a.l2, a.oob);
    CHECK(r == CUDA_ERROR_INVALID_VALUE);
    CHECK_THAT(last_tensor_map_error(), Contains(c.rule));
    const auto* bytes = reinterpret_cast<const unsigned char*>(&map);
    CHECK(std::all_of(bytes, bytes + sizeof map, [](unsigned char b) { return b == 0x5A; }));  // nothing written
  }
  Args ok;  // the unedited arguments are valid, so each refusal above is its one rule's
  CUtensorMap map;
  CHECK(encode_tensor_map_tiled(&map, ok.type, ok.rank, reinterpret_cast<void*>(ok.address), ok.dims, ok.strides,
                                ok.box, ok.elem, ok.interleave, ok.swizzle, ok.l2, ok.oob) == CUDA_SUCCESS);
  CHECK(last_tensor_map_error().empty());
}
