// The TMA box copies (cuda/emu/tma_model.h) against NVIDIA's documentation: placements
// computed here from the programming guide's swizzle tables ("Swizzle Pattern Pointer Offset
// Formula and Index Relation"), out-of-bounds fills, stores, and the copies' refusals.
#include <catch2/catch.hpp>

#include "cuda/emu/driver_api.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda/emu/tma_model.h"
#include "framework/error.h"

using namespace hg::cuda::emu;
using Catch::Matchers::Contains;

namespace {

constexpr unsigned char kPad = 0xEE;        // global bytes between rows: never a value
constexpr unsigned char kUntouched = 0xDD;  // shared bytes no copy may write
constexpr uint32_t kBase = 4096;            // the shared window's first address

void for_each_index(const std::vector<int64_t>& shape, const std::function<void(const int64_t*, size_t)>& fn) {
  size_t n = 1;
  for (auto s : shape) n *= static_cast<size_t>(s);
  std::vector<int64_t> i(shape.size(), 0);
  for (size_t l = 0; l < n; ++l) {
    fn(i.data(), l);
    for (size_t d = 0; d < shape.size() && ++i[d] == shape[d]; ++d) i[d] = 0;
  }
}

// A global tensor, dims innermost first, with byte pitches (pitch[0] is the element size) and
// distinct bytes per element (1..200, so never 0, kPad or kUntouched); padding holds kPad.
struct Global {
  int eb;
  std::vector<int64_t> dims, pitch;
  std::vector<unsigned char> storage;
  unsigned char* data = nullptr;

  Global(int eb_, std::vector<int64_t> dims_, std::vector<int64_t> outer_pitch) : eb(eb_), dims(std::move(dims_)) {
    pitch.push_back(eb);
    pitch.insert(pitch.end(), outer_pitch.begin(), outer_pitch.end());
    int64_t bytes = eb;
    for (size_t d = 0; d < dims.size(); ++d) bytes += (dims[d] - 1) * pitch[d];
    storage.assign(static_cast<size_t>(bytes) + 256, kPad);
    data = storage.data() + (256 - reinterpret_cast<uintptr_t>(storage.data()) % 256);  // 256-byte aligned
    for_each_index(dims, [&](const int64_t* c, size_t l) {
      for (int j = 0; j < eb; ++j)
        at(c)[j] = static_cast<unsigned char>(1 + (j == 0 ? l % 200 : j == 1 ? l / 200 % 200 : (l * 7 + j) % 200));
    });
  }
  unsigned char* at(const int64_t* c) const {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d) off += c[d] * pitch[d];
    return data + off;
  }
  bool inside(const int64_t* c) const {
    for (size_t d = 0; d < dims.size(); ++d)
      if (c[d] < 0 || c[d] >= dims[d]) return false;
    return true;
  }
  CUtensorMap map(CUtensorMapDataType type, std::vector<cuuint32_t> box, CUtensorMapSwizzle swizzle,
                  CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) const {
    std::vector<cuuint64_t> d(dims.begin(), dims.end()), s(pitch.begin() + 1, pitch.end());
    std::vector<cuuint32_t> ones(dims.size(), 1);
    CUtensorMap m;
    const CUresult r = encode_tensor_map_tiled(&m, type, static_cast<cuuint32_t>(dims.size()), data, d.data(),
                                               s.data(), box.data(), ones.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE, oob);
    INFO(last_tensor_map_error());
    REQUIRE(r == CUDA_SUCCESS);
    return m;
  }
};

// Where the byte at dense box offset o lands for a box at shared address dst: the guide's index
// relation smem[y][x] <-> smem[y][((y + offset) % n) ^ x], y a 128-byte row, x a 16-byte chunk,
// n = span / 16, offset = (dst / 128) % n.
uint32_t guide_address(uint32_t dst, uint32_t o, uint32_t span) {
  if (span == 0) return dst + o;
  const uint32_t n = span / 16, y = o / 128, x = o % 128 / 16, offset = dst / 128 % n;
  return dst + y * 128 + (((y + offset) % n) ^ x) * 16 + o % 16;
}

struct Window {
  std::vector<unsigned char> bytes;
  explicit Window(uint32_t n) : bytes(n, kUntouched) {}
  SharedWindow view() { return {bytes.data(), kBase, static_cast<uint32_t>(bytes.size())}; }
};

// The window a load of `box` at `coords` to dst must leave, element by element.
std::vector<unsigned char> reference_load(const Global& g, const std::vector<int64_t>& box, const int32_t* coords,
                                          uint32_t dst, uint32_t span, const Window& before,
                                          const unsigned char* fill) {
  std::vector<unsigned char> want = before.bytes;
  for_each_index(box, [&](const int64_t* b, size_t l) {
    int64_t c[5];
    for (size_t d = 0; d < box.size(); ++d) c[d] = coords[d] + b[d];
    const uint32_t addr = guide_address(dst, static_cast<uint32_t>(l * g.eb), span);
    std::memcpy(&want[addr - kBase], g.inside(c) ? g.at(c) : fill, g.eb);
  });
  return want;
}

uint32_t span_of(CUtensorMapSwizzle s) { return s == CU_TENSOR_MAP_SWIZZLE_NONE ? 0 : 16u << s; }

const unsigned char kZeros[8] = {};

}  // namespace

TEST_CASE("tma load places a 2-D box as the programming guide's swizzle tables say", "[cuda][emu][tma]") {
  struct Type {
    CUtensorMapDataType type;
    int eb;
  };
  const Type types[] = {{CU_TENSOR_MAP_DATA_TYPE_UINT8, 1},
                        {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2},
                        {CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2},
                        {CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4},
                        {CU_TENSOR_MAP_DATA_TYPE_INT64, 8}};
  for (auto [type, eb] : types)
    for (auto swizzle : {CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_64B,
                         CU_TENSOR_MAP_SWIZZLE_128B}) {
      const uint32_t span = span_of(swizzle);
      const int64_t box0 = (span == 0 ? 48 : span) / eb, box1 = 5;  // a full swizzle span; 48 bytes unswizzled
      const int64_t W = box0 * 3 / 2 + 1, H = 11;
      const int64_t row_pitch = (W * eb + 15) / 16 * 16 + 32;  // strided: rows lie apart
      const Global g(eb, {W, H}, {row_pitch});
      const CUtensorMap map = g.map(type, {static_cast<cuuint32_t>(box0), static_cast<cuuint32_t>(box1)}, swizzle);
      const int32_t corners[][2] = {{0, 0},
                                    {static_cast<int32_t>(W - box0 / 2), 2},  // over the right edge
                                    {1, static_cast<int32_t>(H - 2)},         // over the bottom edge
                                    {-3, -1},                                 // negative: over left and top
                                    {static_cast<int32_t>(W - 1), static_cast<int32_t>(H - 1)},
                                    {static_cast<int32_t>(W + 5), 0},                // wholly past the end
                                    {static_cast<int32_t>(-box0), -box1}};           // wholly before the start
      for (auto& at : corners)
        for (uint32_t dst : {kBase, kBase + 128 * 3}) {  // the second shifts the swizzle pattern by 3 rows
          INFO("element bytes " << eb << ", swizzle span " << span << ", box at (" << at[0] << ", " << at[1]
                                << "), shared address " << dst);
          Window w(8192);
          const auto want = reference_load(g, {box0, box1}, at, dst, span, w, kZeros);
          CHECK(tma_load_tile(map, w.view(), dst, at, 2) == box0 * box1 * eb);
          CHECK(w.bytes == want);
        }
    }
}

TEST_CASE("tma load of 3-D boxes, the Hopper GEMM's operand tile among them", "[cuda][emu][tma]") {
  SECTION("int32, 32B swizzle, every dimension overhanging") {
    const Global g(4, {20, 6, 3}, {96, 96 * 7});  // rows and planes padded
    const CUtensorMap map = g.map(CU_TENSOR_MAP_DATA_TYPE_INT32, {8, 4, 2}, CU_TENSOR_MAP_SWIZZLE_32B);
    const int32_t corners[][3] = {{0, 0, 0}, {16, 4, 2}, {-4, -2, -1}, {5, 1, 1}, {0, 0, 3}};
    for (auto& at : corners) {
      INFO("box at (" << at[0] << ", " << at[1] << ", " << at[2] << ")");
      Window w(1024);
      const auto want = reference_load(g, {8, 4, 2}, at, kBase + 256, 32, w, kZeros);
      CHECK(tma_load_tile(map, w.view(), kBase + 256, at, 3) == 8 * 4 * 2 * 4);
      CHECK(w.bytes == want);
    }
  }
  SECTION("f16 {K, rows, batches}, box {64, 128, 1}, 128B swizzle, K not a multiple of 64") {
    const int64_t K = 100, rows = 150, ld = 104;
    const Global g(2, {K, rows, 2}, {ld * 2, ld * rows * 2});
    const CUtensorMap map = g.map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, {64, 128, 1}, CU_TENSOR_MAP_SWIZZLE_128B);
    const int32_t corners[][3] = {{0, 0, 1}, {64, 128, 0}};
    for (auto& at : corners) {
      Window w(kBase + 16384);
      const auto want = reference_load(g, {64, 128, 1}, at, kBase + 1024, 128, w, kZeros);
      CHECK(tma_load_tile(map, w.view(), kBase + 1024, at, 3) == 16384);
      CHECK(w.bytes == want);
    }
  }
}

TEST_CASE("tma swizzle addresses checked by hand against the guide's tables", "[cuda][emu][tma]") {
  // int32 rows of 128, 64 and 32 bytes; each entry: (row, column, byte offset from the box's
  // base), worked out on paper from the guide's index relation.
  struct Spot {
    int row, col;
    uint32_t offset;
  };
  struct Mode {
    CUtensorMapSwizzle swizzle;
    int cols;
    uint32_t dst;
    std::vector<Spot> spots;
  };
  const Mode modes[] = {
      {CU_TENSOR_MAP_SWIZZLE_128B, 32, kBase, {{1, 0, 144}, {3, 20, 480}, {7, 31, 908}, {0, 5, 20}}},
      {CU_TENSOR_MAP_SWIZZLE_128B, 32, kBase + 128, {{0, 0, 16}, {7, 0, 896}, {2, 4, 288}}},
      {CU_TENSOR_MAP_SWIZZLE_64B, 16, kBase, {{2, 4, 128}, {3, 0, 208}, {7, 12, 448}}},
      {CU_TENSOR_MAP_SWIZZLE_32B, 8, kBase, {{4, 0, 144}, {5, 4, 160}, {2, 4, 80}}},
  };
  for (const auto& m : modes) {
    const Global g(4, {m.cols, 8}, {m.cols * 4});
    const CUtensorMap map = g.map(CU_TENSOR_MAP_DATA_TYPE_INT32, {static_cast<cuuint32_t>(m.cols), 8}, m.swizzle);
    Window w(4096);
    const int32_t origin[2] = {0, 0};
    tma_load_tile(map, w.view(), m.dst, origin, 2);
    for (const auto& s : m.spots) {
      INFO("swizzle " << static_cast<int>(m.swizzle) << ", row " << s.row << ", column " << s.col);
      const int64_t c[2] = {s.col, s.row};
      CHECK(std::memcmp(&w.bytes[m.dst - kBase + s.offset], g.at(c), 4) == 0);
    }
  }
}

TEST_CASE("tma load's NaN fill marks out-of-bounds float elements", "[cuda][emu][tma]") {
  struct Type {
    CUtensorMapDataType type;
    int eb;
    std::function<bool(const unsigned char*)> is_nan;
  };
  const Type types[] = {
      {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
       [](const unsigned char* p) { return (p[1] & 0x7c) == 0x7c && ((p[1] & 3) | p[0]) != 0; }},
      {CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
       [](const unsigned char* p) { return (p[1] & 0x7f) == 0x7f && (p[0] & 0x80) && (p[0] & 0x7f) != 0; }},
      {CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, [](const unsigned char* p) {
         float f;
         std::memcpy(&f, p, 4);
         return f != f;
       }}};
  for (const auto& t : types) {
    const Global g(t.eb, {40, 5}, {176});
    const CUtensorMap map = g.map(t.type, {static_cast<cuuint32_t>(64 / t.eb), 4}, CU_TENSOR_MAP_SWIZZLE_64B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
    const int32_t at[2] = {40 - 64 / t.eb / 2, 3};
    Window w(2048);
    tma_load_tile(map, w.view(), kBase, at, 2);
    for_each_index({64 / t.eb, 4}, [&](const int64_t* b, size_t l) {
      const int64_t c[2] = {at[0] + b[0], at[1] + b[1]};
      const unsigned char* got = &w.bytes[guide_address(kBase, static_cast<uint32_t>(l * t.eb), 64) - kBase];
      INFO("element bytes " << t.eb << ", coordinate (" << c[0] << ", " << c[1] << ")");
      if (g.inside(c)) CHECK(std::memcmp(got, g.at(c), t.eb) == 0);
      else CHECK(t.is_nan(got));
    });
  }
}

TEST_CASE("tma store writes the in-bounds part of a box back, undoing the swizzle", "[cuda][emu][tma]") {
  for (auto swizzle : {CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_128B}) {
    const uint32_t span = span_of(swizzle);
    const int64_t box0 = (span == 0 ? 48 : span) / 2, W = 50, H = 9;
    const Global a(2, {W, H}, {128});
    Global b(2, {W, H}, {128});
    std::fill(b.storage.begin(), b.storage.end(), 0xF0);
    const std::vector<unsigned char> b_before = b.storage;
    const CUtensorMap map_a = a.map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, {static_cast<cuuint32_t>(box0), 4}, swizzle);
    const CUtensorMap map_b = b.map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, {static_cast<cuuint32_t>(box0), 4}, swizzle);
    const int32_t at[2] = {static_cast<int32_t>(W - box0 / 2), static_cast<int32_t>(H - 2)};  // over two edges
    INFO("swizzle span " << span);
    SECTION("a round trip through a load") {
      Window w(2048);
      tma_load_tile(map_a, w.view(), kBase + 128, at, 2);
      tma_store_tile(map_b, w.view(), kBase + 128, at, 2);
      for_each_index({W, H}, [&](const int64_t* c, size_t) {
        const bool in_box = c[0] >= at[0] && c[0] < at[0] + box0 && c[1] >= at[1] && c[1] < at[1] + 4;
        INFO("coordinate (" << c[0] << ", " << c[1] << ")");
        if (in_box) CHECK(std::memcmp(b.at(c), a.at(c), 2) == 0);
        else CHECK((b.at(c)[0] == 0xF0 && b.at(c)[1] == 0xF0));
      });
      // Bytes outside every element (the rows' padding, the buffer's ends) stay as they were.
      size_t changed = 0;
      for (size_t i = 0; i < b.storage.size(); ++i) changed += b.storage[i] != b_before[i];
      CHECK(changed == static_cast<size_t>(2 * (W - at[0]) * (H - at[1])));
    }
    SECTION("from shared bytes placed by the guide's relation") {
      Window w(2048);
      for (size_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<unsigned char>(i * 13 + 5);
      tma_store_tile(map_b, w.view(), kBase, at, 2);
      for_each_index({box0, 4}, [&](const int64_t* bx, size_t l) {
        const int64_t c[2] = {at[0] + bx[0], at[1] + bx[1]};
        if (!b.inside(c)) return;
        INFO("coordinate (" << c[0] << ", " << c[1] << ")");
        CHECK(std::memcmp(b.at(c), &w.bytes[guide_address(kBase, static_cast<uint32_t>(l * 2), span) - kBase], 2) == 0);
      });
    }
  }
}

TEST_CASE("tma copies refuse what the hardware would not do, changing nothing", "[cuda][emu][tma]") {
  const Global g(2, {64, 16}, {128});
  const CUtensorMap map = g.map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, {64, 8}, CU_TENSOR_MAP_SWIZZLE_128B);
  const int32_t origin[3] = {0, 0, 0};
  Window w(4096);
  const auto untouched = w.bytes;
  SECTION("a destination that is not 128-byte aligned") {
    CHECK_THROWS_WITH(tma_load_tile(map, w.view(), kBase + 64, origin, 2), Contains("must be 128-byte aligned"));
    CHECK_THROWS_WITH(tma_store_tile(map, w.view(), kBase + 16, origin, 2), Contains("must be 128-byte aligned"));
  }
  SECTION("a box that leaves the block's shared memory") {
    CHECK_THROWS_WITH(tma_load_tile(map, w.view(), kBase + 4096 - 512, origin, 2),
                      Contains("outside the block's shared memory"));
    CHECK_THROWS_WITH(tma_load_tile(map, w.view(), kBase - 1024, origin, 2),
                      Contains("outside the block's shared memory"));
    Window small(512);
    CHECK_THROWS_WITH(tma_load_tile(map, small.view(), kBase, origin, 2), Contains("more than the block's 512 bytes"));
  }
  SECTION("a map the encoder did not make, or changed since") {
    CUtensorMap zeroed{};
    CHECK_THROWS_WITH(tma_load_tile(zeroed, w.view(), kBase, origin, 2), Contains("not made by the encoder"));
    CHECK_THROWS_WITH(tma_store_tile(zeroed, w.view(), kBase, origin, 2), Contains("not made by the encoder"));
    CUtensorMap edited = map;
    edited.opaque[4] += 1;
    CHECK_THROWS_WITH(tma_load_tile(edited, w.view(), kBase, origin, 2), Contains("modified after encoding"));
  }
  SECTION("a copy whose dimensionality is not the map's rank") {
    CHECK_THROWS_WITH(tma_load_tile(map, w.view(), kBase, origin, 3), Contains("3-D copy through a rank-2"));
  }
  SECTION("a store whose box starts before the tensor") {
    const int32_t before[2] = {0, -1};
    const auto global = g.storage;
    CHECK_THROWS_WITH(tma_store_tile(map, w.view(), kBase, before, 2), Contains("may not start before"));
    CHECK(g.storage == global);
  }
  CHECK(w.bytes == untouched);
}

TEST_CASE("tma copies name the encoder features the model does not copy", "[cuda][emu][tma]") {
  alignas(256) static unsigned char data[8192];
  const cuuint64_t dims[3] = {32, 8, 4}, strides[2] = {64, 512};
  const cuuint32_t box[3] = {32, 8, 1};
  const int32_t origin[3] = {0, 0, 0};
  Window w(4096);
  const auto encode = [&](const cuuint32_t* elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw) {
    CUtensorMap m;
    REQUIRE(encode_tensor_map_tiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, data, dims, strides, box, elem, il, sw,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
    return m;
  };
  const cuuint32_t ones[3] = {1, 1, 1}, strided[3] = {1, 2, 1}, first_strided[3] = {4, 1, 1};
  CHECK_THROWS_WITH(tma_load_tile(encode(strided, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE), w.view(),
                                  kBase, origin, 3),
                    Contains("elementStrides[1] = 2 is not modelled"));
  CHECK_THROWS_WITH(tma_load_tile(encode(ones, CU_TENSOR_MAP_INTERLEAVE_16B, CU_TENSOR_MAP_SWIZZLE_NONE), w.view(),
                                  kBase, origin, 3),
                    Contains("interleaved tensor maps are not modelled"));
  CHECK_THROWS_WITH(tma_load_tile(encode(ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B),
                                  w.view(), kBase, origin, 3),
                    Contains("is not modelled by the emulation (only NONE, 32B, 64B, 128B)"));
  // Without interleave elementStrides[0] is ignored (driver API docs): the copy goes ahead.
  CHECK(tma_load_tile(encode(first_strided, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE), w.view(),
                      kBase, origin, 3) == 32 * 8 * 2);
}
