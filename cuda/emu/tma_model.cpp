// The TMA model: the tensor-map encoder's checks and record, and the box copies between a
// global tensor and the shared window (the rules and their sources are in tma_model.h).
#include "cuda/emu/tma_model.h"

#include <cstddef>
#include <atomic>
#include <cstring>

#include "cuda/primitives/smem_swizzle.h"
#include "framework/error.h"

namespace hg::cuda::emu {

namespace {

constexpr uint64_t kMagic = 0x686732746d61a5c3ull;  // marks a record this encoder wrote
constexpr int kMaxRank = 5;

// What a map holds: the encoder's arguments, kept in the 128-byte opaque CUtensorMap.
struct TiledMap {
  uint64_t magic, checksum;
  unsigned char* global;
  uint64_t dims[kMaxRank];
  uint64_t strides[kMaxRank - 1];  // bytes, of dimensions 1..rank-1
  uint16_t box[kMaxRank];
  uint8_t element_strides[kMaxRank];
  uint8_t rank, element_bits, data_type, interleave, swizzle, oob_fill;
};
static_assert(sizeof(TiledMap) <= sizeof(CUtensorMap), "the record must fit the opaque tensor map");

// FNV-1a over the record after its checksum, so a map edited after encoding is told apart too.
uint64_t checksum(const TiledMap& m) {
  const auto* p = reinterpret_cast<const unsigned char*>(&m) + offsetof(TiledMap, global);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < sizeof(TiledMap) - offsetof(TiledMap, global); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string& error_slot() {
  thread_local std::string why;
  return why;
}

// Bits one element occupies in global memory (the packed types' 16 values fill 8 or 16 bytes).
uint32_t element_bits(CUtensorMapDataType t) {
  switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64: case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B: case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B: return 8;
    default: return 32;  // UINT32, INT32, FLOAT32(_FTZ), TFLOAT32(_FTZ)
  }
}

bool is_float(CUtensorMapDataType t) {
  return t >= CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && t <= CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

bool is_packed16(CUtensorMapDataType t) {  // the packed types aligned to 16 bytes
  return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

uint32_t swizzle_span(int swizzle) {  // bytes; every 128B variant spans 128
  return swizzle == CU_TENSOR_MAP_SWIZZLE_NONE ? 0 : swizzle >= CU_TENSOR_MAP_SWIZZLE_128B ? 128 : 16u << swizzle;
}

// The first documented requirement the arguments break, or an empty string.
std::string violation(const CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, const void* global,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      const cuuint32_t* elem_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                      CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  using detail::concat;
  if (map == nullptr) return "tensorMap is null";
  if (reinterpret_cast<uintptr_t>(map) % 64 != 0) return "tensorMap's address must be 64-byte aligned";
  const auto enum_outside = [](auto v, auto last) { return static_cast<int>(v) < 0 || v > last; };
  if (enum_outside(type, CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B))
    return concat("tensorDataType ", static_cast<int>(type), " is not a CUtensorMapDataType (0..15)");
  if (enum_outside(interleave, CU_TENSOR_MAP_INTERLEAVE_32B))
    return concat("interleave ", static_cast<int>(interleave), " is not a CUtensorMapInterleave (0..2)");
  if (enum_outside(swizzle, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B))
    return concat("swizzle ", static_cast<int>(swizzle), " is not a CUtensorMapSwizzle (0..6)");
  if (enum_outside(l2, CU_TENSOR_MAP_L2_PROMOTION_L2_256B))
    return concat("l2Promotion ", static_cast<int>(l2), " is not a CUtensorMapL2promotion (0..3)");
  if (enum_outside(oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA))
    return concat("oobFill ", static_cast<int>(oob), " is not a CUtensorMapFloatOOBfill (0..1)");
  const bool interleaved = interleave != CU_TENSOR_MAP_INTERLEAVE_NONE;
  if (rank < 1 || rank > kMaxRank) return concat("tensorRank ", rank, " is outside 1..5");
  if (interleaved && rank < 3) return concat("tensorRank ", rank, " with interleave must be 3..5");
  if (dims == nullptr || box == nullptr || elem_strides == nullptr || (rank > 1 && strides == nullptr))
    return "globalDim, boxDim and elementStrides (and globalStrides for rank > 1) must not be null";
  const bool align32 = interleave == CU_TENSOR_MAP_INTERLEAVE_32B || is_packed16(type);
  const uint64_t address_align = align32 ? 32 : 16;
  if (reinterpret_cast<uintptr_t>(global) % address_align != 0)
    return concat("globalAddress ", global, " must be ", address_align, "-byte aligned",
                  align32 ? " (32-byte interleave or a 16-byte-aligned packed type)" : "");
  for (cuuint32_t i = 0; i < rank; ++i)
    if (dims[i] == 0 || dims[i] > (uint64_t{1} << 32))
      return concat("globalDim[", i, "] = ", dims[i], " must be 1..2^32");
  if (is_packed16(type) && dims[0] % 128 != 0)
    return concat("globalDim[0] = ", dims[0], " must be a multiple of 128 for a 16-byte-aligned packed type");
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dims[0] % 2 != 0)
    return concat("globalDim[0] = ", dims[0], " must be even for 16U4_ALIGN8B");
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    if (strides[i] % address_align != 0)
      return concat("globalStrides[", i, "] = ", strides[i], " bytes must be a multiple of ", address_align);
    if (strides[i] >= (uint64_t{1} << 40)) return concat("globalStrides[", i, "] = ", strides[i], " must be below 2^40");
  }
  const uint32_t bits = element_bits(type);
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (box[i] == 0 || box[i] > 256) return concat("boxDim[", i, "] = ", box[i], " must be 1..256");
    if (elem_strides[i] == 0 || elem_strides[i] > 8)
      return concat("elementStrides[", i, "] = ", elem_strides[i], " must be 1..8");
  }
  const uint64_t inner_bits = uint64_t{box[0]} * bits;
  if (!interleaved && inner_bits % 128 != 0)
    return concat("boxDim[0] * element size = ", inner_bits / 8.0, " bytes must be a multiple of 16");
  if (is_packed16(type) && box[0] != 128)
    return concat("boxDim[0] = ", box[0], " must be 128 for a 16-byte-aligned packed type");
  const uint32_t span = swizzle_span(swizzle);
  if (!interleaved && span != 0 && inner_bits > span * 8u)
    return concat("the box's inner extent (boxDim[0] * element size = ", inner_bits / 8, " bytes) exceeds the ", span,
                  "-byte swizzle span");
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
    return "32-byte interleave requires CU_TENSOR_MAP_SWIZZLE_32B";
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && interleaved) return "16U6_ALIGN16B requires no interleave";
  if (is_packed16(type) && swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_128B &&
      swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B &&
      !(type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B))
    return concat("swizzle ", static_cast<int>(swizzle), " is not allowed for a 16-byte-aligned packed type");
  if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(type))
    return "the NaN out-of-bounds fill needs a floating-point, non-packed tensorDataType";
  return {};
}

// The map's record, after the checks every copy makes: an encoder's map of this rank whose
// features the model copies.
TiledMap checked_map(const CUtensorMap& map, int rank, const char* op) {
  TiledMap m;
  std::memcpy(&m, &map, sizeof m);
  HG_CHECK(m.magic == kMagic, op, ": the CUtensorMap was not made by the encoder (encode_tensor_map_tiled); "
           "a zeroed or hand-filled map has no defined meaning");
  HG_CHECK(m.checksum == checksum(m), op, ": the CUtensorMap was modified after encoding");
  HG_CHECK(rank == m.rank, op, ": a ", rank, "-D copy through a rank-", int{m.rank},
           " tensor map (the instruction's dimensionality must equal the map's rank)");
  HG_CHECK(m.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE, op,
           ": interleaved tensor maps are not modelled by the emulation (only CU_TENSOR_MAP_INTERLEAVE_NONE)");
  HG_CHECK(m.swizzle <= CU_TENSOR_MAP_SWIZZLE_128B, op, ": swizzle mode ", int{m.swizzle},
           " (a 128B mode with 32/64-byte atoms) is not modelled by the emulation (only NONE, 32B, 64B, 128B)");
  HG_CHECK(m.element_bits % 8 == 0 && !is_packed16(static_cast<CUtensorMapDataType>(m.data_type)), op,
           ": packed sub-byte tensor types are not modelled by the emulation");
  for (int d = 1; d < rank; ++d)
    HG_CHECK(m.element_strides[d] == 1, op, ": elementStrides[", d, "] = ", int{m.element_strides[d]},
             " is not modelled by the emulation (only 1)");
  HG_CHECK(m.global != nullptr, op, ": the tensor map's global address is null");
  return m;
}

// Visits the box chunk by chunk: fn(shared bytes of the 16-byte chunk, global row base, first
// element's coordinate along dimension 0, whether the row's outer coordinates are in bounds).
// Every chunk's shared address is checked against the window before fn first runs, so a copy
// that leaves the window changes nothing.
template <class Fn>
uint32_t for_each_chunk(const TiledMap& m, const SharedWindow& smem, uint32_t base, const int32_t* coords,
                        const char* op, Fn&& fn) {
  HG_CHECK(base % kTmaSharedAlignment == 0, op, ": shared address ", base, " must be ", kTmaSharedAlignment,
           "-byte aligned (cp.async.bulk.tensor, every swizzle mode)");
  const uint32_t eb = m.element_bits / 8, row_bytes = m.box[0] * eb, span = swizzle_span(m.swizzle);
  uint64_t rows = 1;
  for (int d = 1; d < m.rank; ++d) rows *= m.box[d];
  const uint64_t total = rows * row_bytes;
  HG_CHECK(total <= smem.bytes, op, ": the box is ", total, " bytes, more than the block's ", smem.bytes,
           " bytes of shared memory");
  for (uint32_t off = 0; off < total; off += 16) smem.at(swizzle_smem_address(base + off, span), 16, op);
  int64_t at[kMaxRank] = {};  // the row's position inside the box, dimensions 1..rank-1
  for (uint64_t r = 0; r < rows; ++r) {
    bool inside = true;
    int64_t row_offset = 0;
    for (int d = 1; d < m.rank; ++d) {
      const int64_t c = int64_t{coords[d]} + at[d];
      inside = inside && c >= 0 && c < static_cast<int64_t>(m.dims[d]);
      row_offset += c * static_cast<int64_t>(m.strides[d - 1]);
    }
    for (uint32_t k = 0; k < row_bytes; k += 16) {
      const uint32_t addr = static_cast<uint32_t>(base + r * row_bytes + k);
      fn(smem.at(swizzle_smem_address(addr, span), 16, op), row_offset, int64_t{coords[0]} + k / eb, inside);
    }
    for (int d = 1; d < m.rank && ++at[d] == m.box[d]; ++d) at[d] = 0;
  }
  return static_cast<uint32_t>(total);
}

// The fill of an out-of-bounds element: zero, or a quiet NaN with every mantissa bit set.
void oob_value(const TiledMap& m, unsigned char* out) {
  std::memset(out, 0, 8);
  if (m.oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) return;
  const uint32_t eb = m.element_bits / 8;
  std::memset(out, 0xff, eb);
  out[eb - 1] = 0x7f;  // sign clear; little-endian, as the emulation's host is
}

}  // namespace

namespace {
std::atomic<int> g_injected_encode_failures{0};
}  // namespace

int fail_next_tensor_map_encodes(int n) { return g_injected_encode_failures.exchange(n < 0 ? 0 : n); }

CUresult encode_tensor_map_tiled(CUtensorMap* tensor_map, CUtensorMapDataType data_type, cuuint32_t rank,
                                 void* global_address, const cuuint64_t* global_dim, const cuuint64_t* global_strides,
                                 const cuuint32_t* box_dim, const cuuint32_t* element_strides,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill) {
  for (int pending = g_injected_encode_failures.load(); pending > 0;)
    if (g_injected_encode_failures.compare_exchange_weak(pending, pending - 1)) {
      error_slot() = "cuTensorMapEncodeTiled: a failure injected by emu::fail_next_tensor_map_encodes";
      return CUDA_ERROR_INVALID_VALUE;
    }
  std::string why = violation(tensor_map, data_type, rank, global_address, global_dim, global_strides, box_dim,
                              element_strides, interleave, swizzle, l2_promotion, oob_fill);
  if (!why.empty()) {
    error_slot() = "cuTensorMapEncodeTiled: " + why;
    return CUDA_ERROR_INVALID_VALUE;
  }
  TiledMap m;
  std::memset(&m, 0, sizeof m);  // padding too: the checksum covers every byte
  m.magic = kMagic;
  m.global = static_cast<unsigned char*>(global_address);
  for (cuuint32_t i = 0; i < rank; ++i) {
    m.dims[i] = global_dim[i];
    m.box[i] = static_cast<uint16_t>(box_dim[i]);
    m.element_strides[i] = static_cast<uint8_t>(element_strides[i]);
    if (i > 0) m.strides[i - 1] = global_strides[i - 1];
  }
  m.rank = static_cast<uint8_t>(rank);
  m.element_bits = static_cast<uint8_t>(element_bits(data_type));
  m.data_type = static_cast<uint8_t>(data_type);
  m.interleave = static_cast<uint8_t>(interleave);
  m.swizzle = static_cast<uint8_t>(swizzle);
  m.oob_fill = static_cast<uint8_t>(oob_fill);
  m.checksum = checksum(m);
  std::memset(tensor_map, 0, sizeof *tensor_map);
  std::memcpy(tensor_map, &m, sizeof m);
  error_slot().clear();
  return CUDA_SUCCESS;
}

const std::string& last_tensor_map_error() { return error_slot(); }

uint32_t tma_load_tile(const CUtensorMap& map, const SharedWindow& smem, uint32_t dst, const int32_t* coords,
                       int rank) {
  constexpr const char* op = "cp.async.bulk.tensor load (global -> shared)";
  const TiledMap m = checked_map(map, rank, op);
  const uint32_t eb = m.element_bits / 8;
  unsigned char fill[8];
  oob_value(m, fill);
  return for_each_chunk(m, smem, dst, coords, op, [&](unsigned char* chunk, int64_t row, int64_t x, bool inside) {
    for (uint32_t e = 0; e < 16 / eb; ++e, ++x) {
      const bool in = inside && x >= 0 && x < static_cast<int64_t>(m.dims[0]);
      std::memcpy(chunk + e * eb, in ? m.global + row + x * eb : fill, eb);
    }
  });
}

uint32_t tma_box_bytes(const CUtensorMap& map, int rank) {
  const TiledMap m = checked_map(map, rank, "cp.async.bulk.tensor");
  uint64_t bytes = m.element_bits / 8;
  for (int d = 0; d < m.rank; ++d) bytes *= m.box[d];
  return static_cast<uint32_t>(bytes);
}

void tma_store_tile(const CUtensorMap& map, const SharedWindow& smem, uint32_t src, const int32_t* coords,
                    int rank) {
  constexpr const char* op = "cp.async.bulk.tensor store (shared -> global)";
  const TiledMap m = checked_map(map, rank, op);
  for (int d = 0; d < rank; ++d)
    HG_CHECK(coords[d] >= 0, op, ": coordinate ", d, " is ", coords[d],
             "; a store's box may hang past the end of the tensor but may not start before it");
  const uint32_t eb = m.element_bits / 8;
  for_each_chunk(m, smem, src, coords, op, [&](unsigned char* chunk, int64_t row, int64_t x, bool inside) {
    if (!inside) return;
    for (uint32_t e = 0; e < 16 / eb; ++e, ++x)
      if (x < static_cast<int64_t>(m.dims[0])) std::memcpy(m.global + row + x * eb, chunk + e * eb, eb);
  });
}

}  // namespace hg::cuda::emu
