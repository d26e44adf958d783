// The Hopper kernel's check on first use (cuda/hopper_matmul.h says why it has one): a few
// small products with ragged M/N/K tiles, 16-bit and f32 outputs, a bias, relu, a broadcast
// B (batch stride 0) and each operand layout the kernel reads (K- and MN-major), compared
// with an f64 reference. Robust to a kernel that throws (the
// failure is recorded, never re-run), and to one that hangs: the host waits with a deadline
// and then stops the process with one line saying HG_HOPPER_GEMM=off avoids the kernel.
// The wait, the verdict bookkeeping and the cases are host code with host tests.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/hopper_gemm.h"
#include "framework/device.h"

namespace hg::cuda {

struct SelfCheckResult {
  bool passed = false;
  std::string why;  // what failed; "" when passed
};

// One product of the check: C = relu?(alpha · A · B^T + bias) with A [batches, M, K] and
// B^T [batches or 1 (broadcast), N, K] in the input dtype.
struct SelfCheckCase {
  int64_t batches, M, N, K;
  bool broadcast_b, bias, relu;
  float alpha;
  DType out;  // a dtype, or DType::f64 for "the input dtype"
  // How the kernel reads the operands: A M-contiguous, B N-contiguous (wgmma's transpose
  // modes), else K-contiguous.
  bool a_m_major = false, b_n_major = false;
  int tile_n = 0;  // HopperGemm::force_tile_n: 0 for the rule, 128 or 256 to force the width
};
const std::vector<SelfCheckCase>& hopper_self_check_cases();

// Whether got agrees with an f64 reference `want` whose terms have absolute sum `scale`
// (alpha · sum |a b| + |bias|), for an output of dtype out: f32 accumulation error (2^-14
// of the scale: K <= 256 terms of at most 2^-24 each, with slack) plus one rounding to out
// (twice the unit roundoff) and, for f16, its subnormal step.
bool self_check_agrees(double got, double want, double scale, DType out);

// Blocks until finished() says true or `deadline` passed, polling every 1 ms at most;
// returns false on timeout.
bool wait_with_deadline(const std::function<bool()>& finished, std::chrono::milliseconds deadline);

// What hopper_self_check runs the products with, replaceable in tests.
struct SelfCheckHooks {
  std::function<bool(const HopperGemm&)> gemm;  // launches one product; default hopper_gemm
  std::function<bool()> finished;               // default: an event after the launches is done
  std::chrono::milliseconds deadline{std::chrono::seconds(30)};
  // Called with the line to print when the deadline passes; the default prints it and aborts
  // (a hung kernel cannot be taken back). If it returns, the check fails with that line.
  std::function<void(const std::string&)> on_timeout;
};

// Runs the cases on cuda device d with input dtype dt (f16 or bf16); exceptions from the
// hooks (tensor-map encoding, launches) propagate to the caller.
SelfCheckResult hopper_self_check(Device d, DType dt, const SelfCheckHooks& hooks = {});

// The verdict per device and input dtype: check() runs at most once per pair, even when it
// throws (the exception becomes the failure's reason); later calls return the verdict.
class HopperVerdicts {
 public:
  bool trusted(int device, DType dt, const std::function<SelfCheckResult()>& check);
  // Why the pair failed ("" when it passed or was never checked).
  std::string why(int device, DType dt) const;
  // Records a verdict without a check: failed (with why) when the kernel failed outside its
  // check, passed to restore one in tests. Returns whether the pair was trusted before.
  bool set(int device, DType dt, bool passed, const std::string& why);

 private:
  static constexpr int kDevices = 64;
  mutable std::mutex mu_;
  int state_[kDevices][2] = {};  // 0 not checked, 1 passed, -1 failed; [f16, bf16]
  std::string why_[kDevices][2];
};

}  // namespace hg::cuda
