// The tensor-core engine's shared-memory layout (cuda/mma_smem_layout.h), host only: for
// every operand layout and tile size, each ldmatrix phase and each tf32 fragment read hits
// 32 distinct banks, ldmatrix rows are 16-byte aligned and cover the fragment exactly once.
#include <catch2/catch.hpp>

#include <set>
#include <utility>

#include "cuda/mma_smem_layout.h"

using namespace hg::cuda;

namespace {

// Bank of each 4-byte word of the element at `offset` (elements) of `bytes` bytes.
int bank(int offset, int elem_bytes) { return offset * elem_bytes / 4 % 32; }

// ldmatrix_x4 of a 16 x 16 fragment (A) or two n8 blocks (B) at (r0, k0): the 8 lanes of a
// phase read 8 rows of 16 bytes, which must cover all 32 banks; the 32 rows together must
// cover the 16 x 16 block once.
template <class Op>
void check_ldmatrix(bool is_a, int r0, int k0) {
  std::set<std::pair<int, int>> covered;
  for (int phase = 0; phase < 4; ++phase) {
    std::set<int> banks;
    for (int lane = phase * 8; lane < phase * 8 + 8; ++lane) {
      const RowCol e = is_a ? ldmatrix_a_element(lane, Op::kK) : ldmatrix_b_element(lane, Op::kK);
      const int offset = Op::at(r0 + e.row, k0 + e.col);
      REQUIRE(offset * 2 % 16 == 0);
      for (int w = 0; w < 4; ++w) banks.insert((bank(offset, 2) + w) % 32);
      for (int j = 0; j < 8; ++j) {  // the row's 8 elements run along the line
        const std::pair<int, int> rk = Op::kK ? std::pair{e.row, e.col + j} : std::pair{e.row + j, e.col};
        REQUIRE((rk.first < 16 && rk.second < 16));
        covered.insert(rk);
      }
    }
    CHECK(banks.size() == 32);
  }
  CHECK(covered.size() == 256);
}

// The 32 lanes' reads of one tf32 fragment register (A 16 x 8 or B 8 x 8) at (r0, k0).
template <class Op>
void check_tf32(bool is_a, int r0, int k0) {
  for (int i = 0; i < (is_a ? 4 : 2); ++i) {
    std::set<int> banks;
    for (int lane = 0; lane < 32; ++lane) {
      const RowCol rc = is_a ? mma_m16n8k8_tf32_a(lane, i) : mma_m16n8k8_tf32_b(lane, i);
      const int r = is_a ? rc.row : rc.col, k = is_a ? rc.col : rc.row;
      banks.insert(bank(Op::at(r0 + r, k0 + k), 4));
    }
    CHECK(banks.size() == 32);
  }
}

template <bool KContiguous, int Rows>
void check_layouts() {
  INFO((KContiguous ? "lines along K, " : "lines along M/N, ") << Rows << " rows");
  using Op16 = MmaSmemOperand<2, KContiguous, Rows, 32>;
  using Op32 = MmaSmemOperand<4, KContiguous, Rows, 16>;
  for (const bool is_a : {true, false}) {
    for (int r0 = 0; r0 < Rows; r0 += 16)
      for (int k0 = 0; k0 < 32; k0 += 16) check_ldmatrix<Op16>(is_a, r0, k0);
    for (int r0 = 0; r0 < Rows; r0 += is_a ? 16 : 8)
      for (int k0 = 0; k0 < 16; k0 += 8) check_tf32<Op32>(is_a, r0, k0);
  }
}

}  // namespace

TEST_CASE("mma_gemm's shared-memory layout is free of bank conflicts", "[cuda][mma][indexing]") {
  check_layouts<true, 64>();
  check_layouts<true, 128>();
  check_layouts<false, 64>();
  check_layouts<false, 128>();
}
