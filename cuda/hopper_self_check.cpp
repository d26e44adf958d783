// The Hopper kernel's first-use check (cuda/hopper_self_check.h): products, reference,
// deadline and verdicts.
#include "cuda/hopper_self_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cuda/stream.h"
#include "framework/error.h"
#include "framework/generator.h"
#include "ops/random.h"

namespace hg::cuda {

const std::vector<SelfCheckCase>& hopper_self_check_cases() {
  // M, N, K off the 128 x 128 x 64 tile grid (tails in every direction), K spanning
  // several k-blocks; both output dtypes (f32 and the input's), a bias of each kind, a
  // broadcast B, N past 256 on the 128 x 256 tiles (forced: on a GPU with many SMs the rule
  // gives products this small 128-wide tiles, so the wide variant would go unchecked).
  // MN-major operands have M or N a multiple of 8 (their rows are 16-byte multiples).
  static const std::vector<SelfCheckCase> cases = {
      {2, 200, 136, 200, false, false, false, 1.0f, DType::f32, true, false},
      {2, 130, 72, 72, true, true, false, 0.5f, DType::f64},
      {1, 64, 200, 136, false, true, true, -1.0f, DType::f64, false, true},
      {1, 72, 264, 64, false, true, false, 2.0f, DType::f32, true, true, 256},
  };
  return cases;
}

bool self_check_agrees(double got, double want, double scale, DType out) {
  const double rounding = out == DType::f16 ? std::ldexp(1.0, -10) : out == DType::bf16 ? std::ldexp(1.0, -7) : 0.0;
  // f16's smallest subnormal step; bf16 and f32 have f32's range.
  const double floor = out == DType::f16 ? std::ldexp(1.0, -24) : 0.0;
  return std::abs(got - want) <= std::ldexp(scale, -14) + rounding * std::abs(want) + floor;
}

bool wait_with_deadline(const std::function<bool()>& finished, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!finished()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

namespace {

struct Prepared {
  SelfCheckCase c;
  DType out;
  Tensor a, bt, bias;  // CPU, input dtype (bias: its own dtype)
  Tensor a_dev, bt_dev, bias_dev, c_dev;
};

Prepared prepare(const SelfCheckCase& c, Device d, DType dt, Generator& gen) {
  Prepared p{c, c.out == DType::f64 ? dt : c.out, {}, {}, {}, {}, {}, {}, {}};
  p.a = randn({c.batches, c.M, c.K}, {dt, Device::cpu()}, &gen);
  p.bt = randn({c.broadcast_b ? 1 : c.batches, c.N, c.K}, {dt, Device::cpu()}, &gen);
  // On the device in the layout the case reads: A^T [z, K, M] / B [z, K, N] when MN-major.
  p.a_dev = c.a_m_major ? p.a.transpose(1, 2).contiguous().to(d) : p.a.to(d);
  p.bt_dev = c.b_n_major ? p.bt.transpose(1, 2).contiguous().to(d) : p.bt.to(d);
  if (c.bias) {
    p.bias = randn({c.N}, {p.out == DType::f32 ? DType::f32 : dt, Device::cpu()}, &gen);
    p.bias_dev = p.bias.to(d);
  }
  p.c_dev = full({c.batches, c.M, c.N}, std::nan(""), {p.out, d});
  return p;
}

HopperGemm describe(const Prepared& p, DType dt, Device d) {
  const SelfCheckCase& c = p.c;
  HopperGemm g;
  g.batches = c.batches, g.M = c.M, g.N = c.N, g.K = c.K, g.ab_dtype = dt;
  g.a = p.a_dev.data_ptr(), g.lda = c.a_m_major ? c.M : c.K, g.batch_stride_a = c.M * c.K, g.a_m_major = c.a_m_major;
  g.b = p.bt_dev.data_ptr(), g.ldb = c.b_n_major ? c.N : c.K, g.batch_stride_b = c.broadcast_b ? 0 : c.N * c.K;
  g.b_n_major = c.b_n_major;
  g.c = p.c_dev.data_ptr(), g.c_dtype = p.out, g.ldc = c.N, g.batch_stride_c = c.M * c.N;
  g.alpha = c.alpha, g.relu = c.relu, g.force_tile_n = c.tile_n;
  if (c.bias) g.bias = p.bias_dev.data_ptr(), g.bias_dtype = p.bias.dtype();
  g.device = d.index;
  return g;
}

// "" when every element of the case agrees with its f64 reference, else the first that does not.
std::string compare(const Prepared& p, size_t index) {
  const SelfCheckCase& c = p.c;
  const Tensor a = p.a.to(DType::f64).contiguous(), bt = p.bt.to(DType::f64).contiguous();
  const Tensor bias = c.bias ? p.bias.to(DType::f64).contiguous() : Tensor();
  const Tensor got = p.c_dev.to(Device::cpu()).to(DType::f64).contiguous();
  const double *pa = a.data<double>(), *pb = bt.data<double>(), *pg = got.data<double>();
  for (int64_t z = 0; z < c.batches; ++z)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        const double* ra = pa + (z * c.M + m) * c.K;
        const double* rb = pb + ((c.broadcast_b ? 0 : z) * c.N + n) * c.K;
        double sum = 0, abs_sum = 0;
        for (int64_t k = 0; k < c.K; ++k) sum += ra[k] * rb[k], abs_sum += std::abs(ra[k] * rb[k]);
        const double b = c.bias ? bias.data<double>()[n] : 0.0;
        double want = c.alpha * sum + b;
        if (c.relu) want = std::max(want, 0.0);
        const double got_v = pg[(z * c.M + m) * c.N + n];
        if (!self_check_agrees(got_v, want, std::abs(c.alpha) * abs_sum + std::abs(b), p.out))
          return detail::concat("case ", index, " (", c.batches, " x ", c.M, " x ", c.N, " x ", c.K, " -> ",
                                dtype_name(p.out), "): element (", z, ", ", m, ", ", n, ") is ", got_v, ", want ",
                                want);
      }
  return "";
}

[[noreturn]] void abort_with(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace

SelfCheckResult hopper_self_check(Device d, DType dt, const SelfCheckHooks& hooks) {
  HG_CHECK(d.is_cuda(), "hopper_self_check: needs a cuda device, got ", d.str());
  HG_CHECK(dt == DType::f16 || dt == DType::bf16, "hopper_self_check: the input dtype must be f16 or bf16, got ",
           dtype_name(dt));
  Generator gen(20261129);
  std::vector<Prepared> prepared;
  for (const SelfCheckCase& c : hopper_self_check_cases()) prepared.push_back(prepare(c, d, dt, gen));
  const auto gemm = hooks.gemm ? hooks.gemm : std::function<bool(const HopperGemm&)>(hopper_gemm);
  for (size_t i = 0; i < prepared.size(); ++i) {
    const HopperGemm g = describe(prepared[i], dt, d);
    if (!gemm(g)) {
      const char* why = hopper_gemm_refusal(g);
      return {false, detail::concat("the kernel declined check case ", i, ": ", why ? why : "(no reason given)")};
    }
  }
  Event done(false);
  std::function<bool()> finished = hooks.finished;
  if (!finished) {
    done.record(current_stream(d.index));
    finished = [&done] { return done.done(); };
  }
  if (!wait_with_deadline(finished, hooks.deadline)) {
    const std::string line = detail::concat(
        "halfgrad: the Hopper GEMM kernel's self-check on ", d.str(), " in ", dtype_name(dt), " did not finish within ",
        hooks.deadline.count(), " ms (a hung kernel); set HG_HOPPER_GEMM=off to use the mma.sync kernel instead");
    if (hooks.on_timeout) hooks.on_timeout(line);
    else abort_with(line);
    return {false, line};
  }
  for (size_t i = 0; i < prepared.size(); ++i)
    if (std::string why = compare(prepared[i], i); !why.empty()) return {false, why};
  return {true, ""};
}

bool HopperVerdicts::trusted(int device, DType dt, const std::function<SelfCheckResult()>& check) {
  HG_CHECK(device >= 0 && device < kDevices, "HopperVerdicts: device ", device, " out of range [0, ", kDevices, ")");
  const int k = dt == DType::bf16 ? 1 : 0;
  // One check at a time: a second thread waits for the first one's verdict.
  std::lock_guard<std::mutex> lock(mu_);
  if (state_[device][k] == 0) {
    SelfCheckResult r;
    try {
      r = check();
    } catch (const std::exception& e) {
      r = {false, detail::concat("it threw: ", e.what())};
    }
    state_[device][k] = r.passed ? 1 : -1;
    why_[device][k] = r.passed ? "" : r.why;
  }
  return state_[device][k] == 1;
}

bool HopperVerdicts::set(int device, DType dt, bool passed, const std::string& why) {
  HG_CHECK(device >= 0 && device < kDevices, "HopperVerdicts: device ", device, " out of range [0, ", kDevices, ")");
  const int k = dt == DType::bf16 ? 1 : 0;
  std::lock_guard<std::mutex> lock(mu_);
  const bool was = state_[device][k] == 1;
  state_[device][k] = passed ? 1 : -1;
  why_[device][k] = passed ? "" : why;
  return was;
}

std::string HopperVerdicts::why(int device, DType dt) const {
  if (device < 0 || device >= kDevices) return "";
  std::lock_guard<std::mutex> lock(mu_);
  return why_[device][dt == DType::bf16 ? 1 : 0];
}

}  // namespace hg::cuda
