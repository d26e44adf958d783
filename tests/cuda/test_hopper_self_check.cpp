// The Hopper kernel's first-use check (cuda/hopper_self_check.h) on the host: its cases
// cover what the issue asks (f16/bf16/f32 outputs, bias, relu, a broadcast B, ragged
// M/N/K), its tolerance, the deadline wait, and that a throwing check is recorded once and
// never re-run. Under the emulation the whole check runs with stand-in kernels (a right
// one, a wrong one, one that throws, one that never finishes), since device memory is host memory there.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <stdexcept>

#include "cuda/hopper_self_check.h"
#include "cuda/runtime.h"
#include "framework/bfloat16.h"
#include "framework/half.h"
#include "tests/cuda/emulated_sm90.h"
#include "tests/devices.h"

using namespace hg;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("the Hopper self-check covers both output dtypes, bias, relu, a broadcast B, ragged tiles and every layout",
          "[cuda][hopper]") {
  bool f32_out = false, own_out = false, bias = false, relu = false, broadcast = false, ragged_m = false,
       ragged_n = false, ragged_k = false, batched = false, k_major = false, a_m_major = false, b_n_major = false;
  for (const cuda::SelfCheckCase& c : cuda::hopper_self_check_cases()) {
    REQUIRE((c.M >= 64 && c.N >= 64 && c.K >= 64 && c.K % 8 == 0));  // what the kernel accepts
    REQUIRE((c.out == DType::f32 || c.out == DType::f64));  // the kernel writes f32 or the input dtype
    f32_out |= c.out == DType::f32, own_out |= c.out == DType::f64;
    if (c.a_m_major) REQUIRE(c.M % 8 == 0);  // MN-major rows are whole multiples of 16 bytes
    if (c.b_n_major) REQUIRE(c.N % 8 == 0);
    k_major |= !c.a_m_major && !c.b_n_major, a_m_major |= c.a_m_major, b_n_major |= c.b_n_major;
    bias |= c.bias, relu |= c.relu, broadcast |= c.broadcast_b && c.batches > 1, batched |= c.batches > 1;
    ragged_m |= c.M % 128 != 0, ragged_n |= c.N % 128 != 0, ragged_k |= c.K % 64 != 0;
  }
  REQUIRE((f32_out && own_out && bias && relu && broadcast && batched && k_major && a_m_major && b_n_major));
  REQUIRE((ragged_m && ragged_n && ragged_k));
}

TEST_CASE("the self-check's tolerance: accumulation error plus one rounding of the output", "[cuda][hopper]") {
  // f32 output: 2^-14 of the terms' absolute sum.
  REQUIRE(cuda::self_check_agrees(10.0 + 0.5 * std::ldexp(100.0, -14), 10.0, 100.0, DType::f32));
  REQUIRE_FALSE(cuda::self_check_agrees(10.0 + 2 * std::ldexp(100.0, -14), 10.0, 100.0, DType::f32));
  // f16 output near 1: one ulp (2^-10) passes, four do not; bf16: one ulp is 2^-7.
  REQUIRE(cuda::self_check_agrees(1.0 + std::ldexp(1.0, -10), 1.0, 1.0, DType::f16));
  REQUIRE_FALSE(cuda::self_check_agrees(1.0 + std::ldexp(1.0, -8), 1.0, 1.0, DType::f16));
  REQUIRE(cuda::self_check_agrees(1.0 + std::ldexp(1.0, -7), 1.0, 1.0, DType::bf16));
  REQUIRE_FALSE(cuda::self_check_agrees(1.0 + std::ldexp(1.0, -5), 1.0, 1.0, DType::bf16));
  // A NaN (the poisoned output left unwritten) never agrees.
  REQUIRE_FALSE(cuda::self_check_agrees(std::nan(""), 1.0, 1.0, DType::f32));
}

TEST_CASE("wait_with_deadline returns when the work finishes, or false at the deadline", "[cuda][hopper]") {
  int polls = 0;
  REQUIRE(cuda::wait_with_deadline([&] { return ++polls >= 3; }, 10s));
  REQUIRE(polls == 3);
  REQUIRE_FALSE(cuda::wait_with_deadline([] { return false; }, 5ms));
}

TEST_CASE("a verdict is reached once per device and dtype, even when the check throws", "[cuda][hopper]") {
  cuda::HopperVerdicts v;
  int calls = 0;
  const auto throwing = [&]() -> cuda::SelfCheckResult {
    ++calls;
    throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult 1");
  };
  for (int i = 0; i < 3; ++i) REQUIRE_FALSE(v.trusted(0, DType::f16, throwing));
  REQUIRE(calls == 1);
  REQUIRE_THAT(v.why(0, DType::f16), Contains("threw") && Contains("cuTensorMapEncodeTiled"));
  const auto passing = [&] {
    ++calls;
    return cuda::SelfCheckResult{true, ""};
  };
  REQUIRE(v.trusted(0, DType::bf16, passing));  // the other dtype has its own verdict
  REQUIRE(v.trusted(0, DType::bf16, throwing));
  REQUIRE(v.trusted(1, DType::f16, passing));  // so has another device
  REQUIRE(calls == 3);
  REQUIRE(v.why(0, DType::bf16).empty());
  REQUIRE_THROWS_WITH(v.trusted(64, DType::f16, passing), Contains("out of range"));
}

namespace {

template <class T>
double load(const void* p, int64_t i) {
  return static_cast<double>(static_cast<float>(static_cast<const T*>(p)[i]));
}

double load(DType dt, const void* p, int64_t i) {
  switch (dt) {
    case DType::f16: return load<half>(p, i);
    case DType::bf16: return load<bfloat16>(p, i);
    default: return load<float>(p, i);
  }
}

void store(DType dt, void* p, int64_t i, double v) {
  switch (dt) {
    case DType::f16: static_cast<half*>(p)[i] = half(v); break;
    case DType::bf16: static_cast<bfloat16*>(p)[i] = bfloat16(v); break;
    default: static_cast<float*>(p)[i] = static_cast<float>(v);
  }
}

// The HopperGemm contract computed on the host from the (emulated, so host-readable) device
// pointers; `skew` is added to every output, to make a wrong kernel.
bool host_gemm(const cuda::HopperGemm& g, double skew) {
  for (int64_t z = 0; z < g.batches; ++z)
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t n = 0; n < g.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < g.K; ++k)
          acc += load(g.ab_dtype, g.a, z * g.batch_stride_a + (g.a_m_major ? k * g.lda + m : m * g.lda + k)) *
                 load(g.ab_dtype, g.b, z * g.batch_stride_b + (g.b_n_major ? k * g.ldb + n : n * g.ldb + k));
        double v = static_cast<double>(static_cast<float>(acc)) * g.alpha + (g.bias ? load(g.bias_dtype, g.bias, n) : 0.0);
        if (g.relu) v = std::max(v, 0.0);
        store(g.c_dtype, g.c, z * g.batch_stride_c + m * g.ldc + n, v + skew);
      }
  return true;
}

}  // namespace

TEST_CASE("the Hopper self-check passes a right kernel and fails wrong, throwing and hung ones",
          "[cuda][emu][hopper]") {
  HG_REQUIRE_CUDA();
  if (!cuda::is_emulated()) HG_SKIP("stand-in kernels read device memory on the host: emulation only");
  const Device d = Device::cuda(0);
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    cuda::SelfCheckHooks hooks;
    hooks.gemm = [](const cuda::HopperGemm& g) { return host_gemm(g, 0.0); };
    cuda::SelfCheckResult r = cuda::hopper_self_check(d, dt, hooks);
    INFO(r.why);
    REQUIRE(r.passed);

    hooks.gemm = [](const cuda::HopperGemm& g) { return host_gemm(g, g.bias ? 0.25 : 0.0); };  // a wrong epilogue
    r = cuda::hopper_self_check(d, dt, hooks);
    REQUIRE_FALSE(r.passed);
    REQUIRE_THAT(r.why, Contains("case 1") && Contains("want"));

    hooks.gemm = [](const cuda::HopperGemm&) -> bool { throw std::runtime_error("launch failed"); };
    REQUIRE_THROWS_WITH(cuda::hopper_self_check(d, dt, hooks), Contains("launch failed"));
    cuda::HopperVerdicts v;
    REQUIRE_FALSE(v.trusted(0, dt, [&] { return cuda::hopper_self_check(d, dt, hooks); }));
    REQUIRE_THAT(v.why(0, dt), Contains("launch failed"));

    hooks.gemm = [](const cuda::HopperGemm&) { return false; };  // declines its own check
    r = cuda::hopper_self_check(d, dt, hooks);
    REQUIRE_FALSE(r.passed);
    REQUIRE_THAT(r.why, Contains("declined check case 0"));

    std::string said;
    hooks.gemm = [](const cuda::HopperGemm& g) { return host_gemm(g, 0.0); };
    hooks.finished = [] { return false; };  // a kernel that never completes
    hooks.deadline = 20ms;
    hooks.on_timeout = [&](const std::string& line) { said = line; };
    r = cuda::hopper_self_check(d, dt, hooks);
    REQUIRE_FALSE(r.passed);
    REQUIRE_THAT(said, Contains("did not finish within 20 ms") && Contains("HG_HOPPER_GEMM=off"));
  }
}

TEST_CASE("the Hopper self-check passes the kernel itself on an sm_90", "[cuda][hopper]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  for (DType dt : {DType::f16, DType::bf16}) {
    const cuda::SelfCheckResult r = cuda::hopper_self_check(Device::cuda(0), dt);
    INFO(dtype_name(dt) << ": " << r.why);
    REQUIRE(r.passed);
  }
}
