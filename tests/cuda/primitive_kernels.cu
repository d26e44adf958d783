// Kernels that run each primitive of cuda/primitives/ once per lane with inputs and outputs
// indexed by lane, so the tests can compare against the PTX ISA's definitions.
// claims: tensor cores (.ci/sass_check requires HMMA, what mma.sync becomes, in this file's machine code)
#include <cstring>

#include "cuda/launch.h"
#include "cuda/primitives/atomics.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/cp_async.h"
#include "cuda/primitives/ldmatrix.h"
#include "cuda/primitives/mma.h"
#include "cuda/primitives/warp.h"
#include "tests/cuda/device_buffer.h"
#include "tests/cuda/test_kernels.h"

namespace hg::test::kernels {

using cuda::launch;

namespace {

template <MmaKind Kind>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  const unsigned t = threadIdx.x;
  uint32_t ra[4], rb[2];
  float rc[4], rd[4];
  for (int i = 0; i < 4; ++i) ra[i] = a[t * 4 + i], rc[i] = c[t * 4 + i];
  for (int i = 0; i < 2; ++i) rb[i] = b[t * 2 + i];
  if constexpr (Kind == MmaKind::f16) cuda::mma_m16n8k16_f16(rd, ra, rb, rc);
  else if constexpr (Kind == MmaKind::bf16) cuda::mma_m16n8k16_bf16(rd, ra, rb, rc);
  else cuda::mma_m16n8k8_tf32(rd, ra, rb, rc);
  for (int i = 0; i < 4; ++i) d[t * 4 + i] = rd[i];
}

template <unsigned N, bool Trans>
__global__ void ldmatrix_kernel(const uint16_t* rows, const int* row_of_lane, uint32_t* out) {
  __shared__ __align__(16) uint16_t tile[32 * 8];
  const unsigned lane = threadIdx.x;
  for (int i = 0; i < 8; ++i) tile[lane * 8 + i] = rows[lane * 8 + i];
  cuda::sync_threads();
  uint32_t r[N];
  if constexpr (N == 1) Trans ? cuda::ldmatrix_x1_trans(r, &tile[row_of_lane[lane] * 8]) : cuda::ldmatrix_x1(r, &tile[row_of_lane[lane] * 8]);
  if constexpr (N == 2) Trans ? cuda::ldmatrix_x2_trans(r, &tile[row_of_lane[lane] * 8]) : cuda::ldmatrix_x2(r, &tile[row_of_lane[lane] * 8]);
  if constexpr (N == 4) Trans ? cuda::ldmatrix_x4_trans(r, &tile[row_of_lane[lane] * 8]) : cuda::ldmatrix_x4(r, &tile[row_of_lane[lane] * 8]);
  for (unsigned m = 0; m < N; ++m) out[lane * N + m] = r[m];
}

__global__ void shfl_kernel(ShflKind kind, uint32_t active, uint32_t mask, const uint32_t* value, const uint32_t* arg,
                            int width, uint32_t* out) {
  const unsigned lane = threadIdx.x;
  if (!(active >> lane & 1)) return;
  const uint32_t v = value[lane], a = arg[lane];
  uint32_t r = 0;
  switch (kind) {
    case ShflKind::idx: r = cuda::shfl_idx_sync(mask, v, static_cast<int>(a), width); break;
    case ShflKind::up: r = cuda::shfl_up_sync(mask, v, a, width); break;
    case ShflKind::down: r = cuda::shfl_down_sync(mask, v, a, width); break;
    case ShflKind::bfly: r = cuda::shfl_xor_sync(mask, v, a, width); break;
  }
  out[lane] = r;
}

__global__ void vote_kernel(uint32_t active, const uint8_t* pred, uint32_t* out) {
  const unsigned lane = threadIdx.x;
  if (!(active >> lane & 1)) return;
  const bool p = pred[lane] != 0;
  out[3 * lane] = cuda::ballot_sync(active, p);
  out[3 * lane + 1] = cuda::all_sync(active, p);
  out[3 * lane + 2] = cuda::any_sync(active, p);
}

// Lane L's shared slots: 4 words from a 16-byte copy (group 0), 4 words from two 8-byte
// copies (group 1), 4 words from four 4-byte copies of which the last copies only 2 bytes
// and zero-fills the rest (group 2). Slots start at 0xdeadbeef.
__global__ void cp_async_kernel(const uint32_t* src, uint32_t* after2, uint32_t* after1, uint32_t* after0) {
  __shared__ __align__(16) uint32_t slots[32 * 12];
  const unsigned lane = threadIdx.x;
  for (int i = 0; i < 12; ++i) slots[lane * 12 + i] = 0xdeadbeefu;
  uint32_t* mine = &slots[lane * 12];
  const uint32_t* from = &src[lane * 12];
  cuda::cp_async<16>(mine, from);
  cuda::cp_async_commit();
  cuda::cp_async<8>(mine + 4, from + 4);
  cuda::cp_async<8>(mine + 6, from + 6);
  cuda::cp_async_commit();
  for (int i = 0; i < 3; ++i) cuda::cp_async<4>(mine + 8 + i, from + 8 + i);
  cuda::cp_async<4>(mine + 11, from + 11, 2);
  cuda::cp_async_commit();
  cuda::cp_async_wait<2>();
  for (int i = 0; i < 12; ++i) after2[lane * 12 + i] = mine[i];
  cuda::cp_async_wait<1>();
  for (int i = 0; i < 12; ++i) after1[lane * 12 + i] = mine[i];
  cuda::cp_async_wait<0>();
  for (int i = 0; i < 12; ++i) after0[lane * 12 + i] = mine[i];
}

__global__ void atomics_kernel(float* f, int32_t* i, unsigned long long* u, int32_t* mx, uint32_t* cas) {
  const auto id = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  cuda::atomic_add(f, 1.0f);
  cuda::atomic_add(i, id);
  cuda::atomic_add(u, (1ull << 40) + static_cast<unsigned long long>(id));
  cuda::atomic_max(mx, id);
  uint32_t old = cuda::atomic_cas(cas, 0u, 0u), seen;
  while ((seen = cuda::atomic_cas(cas, old, old + 1)) != old) old = seen;
}

__global__ void shfl_exited_kernel(uint32_t* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = cuda::shfl_idx_sync(0xffffffffu, threadIdx.x, 0);
}

__global__ void shfl_without_self_kernel(uint32_t* out) {
  out[threadIdx.x] = cuda::shfl_idx_sync(0xfffffffeu, threadIdx.x, 1);
}

__global__ void ldmatrix_misaligned_kernel(uint32_t* out) {
  __shared__ __align__(16) uint16_t tile[33 * 8];
  for (int i = 0; i < 8; ++i) tile[threadIdx.x * 8 + i] = 0;
  cuda::sync_threads();
  uint32_t r[1];
  cuda::ldmatrix_x1(r, &tile[threadIdx.x * 8 + 1]);
  out[threadIdx.x] = r[0];
}

}  // namespace

std::vector<float> mma(MmaKind kind, int warps, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                       const std::vector<float>& c) {
  DeviceBuffer<uint32_t> da(a), db(b);
  DeviceBuffer<float> dc(c), dd(c.size());
  const cuda::LaunchConfig cfg{.grid = 1, .block = 32u * static_cast<unsigned>(warps), .name = "mma_kernel"};
  if (kind == MmaKind::f16) launch(mma_kernel<MmaKind::f16>, cfg, da.get(), db.get(), dc.get(), dd.get());
  if (kind == MmaKind::bf16) launch(mma_kernel<MmaKind::bf16>, cfg, da.get(), db.get(), dc.get(), dd.get());
  if (kind == MmaKind::tf32) launch(mma_kernel<MmaKind::tf32>, cfg, da.get(), db.get(), dc.get(), dd.get());
  return dd.read();
}

std::vector<uint32_t> ldmatrix(unsigned matrices, bool trans, const std::vector<uint16_t>& rows,
                               const std::vector<int>& row_of_lane) {
  DeviceBuffer<uint16_t> dr(rows);
  DeviceBuffer<int> dl(row_of_lane);
  DeviceBuffer<uint32_t> out(32 * matrices);
  const cuda::LaunchConfig cfg{.grid = 1, .block = 32, .name = "ldmatrix_kernel"};
  auto go = [&](auto kernel) { launch(kernel, cfg, dr.get(), dl.get(), out.get()); };
  if (matrices == 1) trans ? go(ldmatrix_kernel<1, true>) : go(ldmatrix_kernel<1, false>);
  if (matrices == 2) trans ? go(ldmatrix_kernel<2, true>) : go(ldmatrix_kernel<2, false>);
  if (matrices == 4) trans ? go(ldmatrix_kernel<4, true>) : go(ldmatrix_kernel<4, false>);
  return out.read();
}

std::vector<uint32_t> shfl(ShflKind kind, unsigned lanes, uint32_t active, uint32_t mask,
                           const std::vector<uint32_t>& value, const std::vector<uint32_t>& arg, int width) {
  DeviceBuffer<uint32_t> dv(value), da(arg), out(std::vector<uint32_t>(32, 0));
  launch(shfl_kernel, {.grid = 1, .block = lanes, .name = "shfl_kernel"}, kind, active, mask, dv.get(), da.get(), width,
         out.get());
  return out.read();
}

std::vector<uint32_t> vote(uint32_t active, const std::vector<uint8_t>& pred) {
  DeviceBuffer<uint8_t> dp(pred);
  DeviceBuffer<uint32_t> out(std::vector<uint32_t>(96, 0));
  launch(vote_kernel, {.grid = 1, .block = 32, .name = "vote_kernel"}, active, dp.get(), out.get());
  return out.read();
}

CpAsyncResult cp_async(const std::vector<uint32_t>& src) {
  DeviceBuffer<uint32_t> ds(src), a2(src.size()), a1(src.size()), a0(src.size());
  launch(cp_async_kernel, {.grid = 1, .block = 32, .name = "cp_async_kernel"}, ds.get(), a2.get(), a1.get(), a0.get());
  return {a2.read(), a1.read(), a0.read()};
}

AtomicTotals atomics(unsigned blocks, unsigned threads) {
  DeviceBuffer<float> f(std::vector<float>{0});
  DeviceBuffer<int32_t> i(std::vector<int32_t>{0}), mx(std::vector<int32_t>{-1});
  DeviceBuffer<unsigned long long> u(std::vector<unsigned long long>{0});
  DeviceBuffer<uint32_t> cas(std::vector<uint32_t>{0});
  launch(atomics_kernel, {.grid = blocks, .block = threads, .name = "atomics_kernel"}, f.get(), i.get(), u.get(),
         mx.get(), cas.get());
  return {f.read()[0], i.read()[0], u.read()[0], mx.read()[0], cas.read()[0]};
}

void shfl_with_exited_lane() {
  DeviceBuffer<uint32_t> out(32);
  launch(shfl_exited_kernel, {.grid = 1, .block = 32, .name = "shfl_exited_kernel"}, out.get());
}

void shfl_mask_without_self() {
  DeviceBuffer<uint32_t> out(32);
  launch(shfl_without_self_kernel, {.grid = 1, .block = 32, .name = "shfl_without_self_kernel"}, out.get());
}

void ldmatrix_misaligned() {
  DeviceBuffer<uint32_t> out(32);
  launch(ldmatrix_misaligned_kernel, {.grid = 1, .block = 32, .name = "ldmatrix_misaligned_kernel"}, out.get());
}

}  // namespace hg::test::kernels
