// vendor::bmm on cuBLAS, loaded with dlopen on first use: cublasGemmStridedBatchedEx with
// f32 accumulation for f16/bf16, the f32 compute type chosen by kernel_settings'
// f32_matmul(), f64 in f64. One handle per device, bound to halfgrad's current stream for
// each call, its workspace taken from the caching allocator. Native builds only.
#include <cublas_v2.h>

#include <array>
#include <climits>
#include <mutex>
#include <optional>

#include "cuda/kernel_settings.h"
#include "cuda/profiler_events.h"
#include "cuda/runtime.h"
#include "cuda/vendor/dynamic_library.h"
#include "cuda/vendor/vendor_ops.h"
#include "cuda/vendor/vendor_scope.h"

namespace hg::cuda::vendor {
namespace {

// cuBLAS's own advice for Hopper (and enough for Ampere): 32 MiB of workspace.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 16;

// cublasGemmStridedBatchedEx is overloaded in C++ (an inline shim taking cudaDataType), so
// its pointer type is spelled out; the others come from the header's prototypes.
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long int, const void*,
                                                cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                                long long int, int, cublasComputeType_t, cublasGemmAlgo_t);

struct Cublas {
  DynamicLibrary lib{"cuBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}};
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  GemmStridedBatchedEx gemm = nullptr;

  Cublas() {
    if (!lib.loaded()) return;
    create = lib.function<decltype(create)>("cublasCreate_v2");
    set_stream = lib.function<decltype(set_stream)>("cublasSetStream_v2");
    set_workspace = lib.function<decltype(set_workspace)>("cublasSetWorkspace_v2");
    set_math_mode = lib.function<decltype(set_math_mode)>("cublasSetMathMode");
    status_string = lib.function<decltype(status_string)>("cublasGetStatusString");
    gemm = lib.function<GemmStridedBatchedEx>("cublasGemmStridedBatchedEx");
  }
};

const Cublas& cublas() {
  static const Cublas c;
  return c;
}

void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(detail::concat("vendor bmm: ", call, " failed: ", cublas().status_string(s), " (cuBLAS status ",
                             static_cast<int>(s), ")"));
}

// A handle per device, made on first use; the mutex keeps one host thread at a time on it
// (a handle's stream and workspace are per-handle state).
struct DeviceHandle {
  std::mutex mu;
  cublasHandle_t handle = nullptr;
};

DeviceHandle& device_handle(int device) {
  static std::array<DeviceHandle, kMaxDevices> handles;
  HG_CHECK(device >= 0 && device < kMaxDevices, "vendor bmm: cuda:", device, " is beyond the ", kMaxDevices,
           " devices halfgrad supports");
  return handles[static_cast<size_t>(device)];
}

// One operand as cuBLAS sees it: column-major storage, whether cuBLAS must transpose it,
// its leading dimension and batch stride. A row-major [rows, cols] matrix with row stride
// ld is the column-major [cols, rows] matrix with the same ld.
struct Operand {
  const void* ptr;
  cublasOperation_t op;
  int64_t ld, batch_stride;
};

// The operand for logical row-major matrices t[b] of shape [rows, cols] such that cuBLAS
// computes with their transposes (the row-major trick: out^T = bm^T a^T in column-major);
// nullopt when the strides are not expressible (then the caller copies).
std::optional<Operand> as_operand(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2);
  const int64_t sb = t.strides()[0], sr = t.strides()[1], sc = t.strides()[2];
  if (sb < 0) return std::nullopt;
  // Row-major (cols contiguous): the column-major [cols, rows] matrix, no transpose.
  if (cols == 1 || sc == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : sr;
    if (ld >= std::max<int64_t>(cols, 1)) return Operand{t.data_ptr(), CUBLAS_OP_N, ld, sb};
  }
  // Column-major (rows contiguous): the column-major [rows, cols] matrix, transposed.
  if (rows == 1 || sr == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : sc;
    if (ld >= std::max<int64_t>(rows, 1)) return Operand{t.data_ptr(), CUBLAS_OP_T, ld, sb};
  }
  return std::nullopt;
}

struct GemmTypes {
  cudaDataType data;
  cublasComputeType_t compute;
  bool f64_scalars;
};

GemmTypes gemm_types(DType dt) {
  return visit_floating(dt, "vendor bmm", [&]<typename T>() -> GemmTypes {
    if constexpr (std::is_same_v<T, double>) return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    else if constexpr (std::is_same_v<T, float>)
      return {CUDA_R_32F, f32_matmul() == F32Matmul::fast ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
    else if constexpr (std::is_same_v<T, half>) return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    else return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
  });
}

int as_int(int64_t v, const char* what, const Tensor& a, const Tensor& b) {
  HG_CHECK(v <= INT_MAX, "vendor bmm: ", what, " = ", v, " exceeds cuBLAS's 32-bit limit (a ", shape_str(a.shape()),
           ", b ", shape_str(b.shape()), ")");
  return static_cast<int>(v);
}

}  // namespace

std::string cublas_unavailable_reason() {
  if (!cublas().lib.loaded()) return cublas().lib.load_error();
  if (device_count() == 0) return "no CUDA device: " + unavailable_reason();
  return "";
}

void bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int device = common_cuda_device("vendor bmm", {&a, &b, &out});
  HG_CHECK(a.dim() == 3 && b.dim() == 3 && out.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1) &&
               out.size(0) == a.size(0) && out.size(1) == a.size(1) && out.size(2) == b.size(2),
           "vendor bmm: expects a [B, M, K], b [B, K, N], out [B, M, N]; got ", shape_str(a.shape()), ", ",
           shape_str(b.shape()), ", ", shape_str(out.shape()));
  HG_CHECK(out.is_contiguous(), "vendor bmm: the output must be contiguous, got strides ", shape_str(out.strides()));
  const std::string why = cublas_unavailable_reason();
  HG_CHECK(why.empty(), "vendor bmm: ", why);
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  if (B == 0 || M == 0 || N == 0) return;
  DeviceScope scope(device);
  const Stream stream = current_stream(device);
  if (K == 0) {  // an empty sum: zeros (the all-zero bit pattern in every floating dtype)
    HG_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, static_cast<size_t>(out.numel()) * dtype_size(out.dtype()),
                                  static_cast<cudaStream_t>(stream.handle())));
    return;
  }
  // Operands whose strides cuBLAS cannot express are copied (on the current stream).
  Tensor ac = a, bc = b;
  std::optional<Operand> oa = as_operand(a), ob = as_operand(b);
  if (!oa) oa = as_operand(ac = a.contiguous());
  if (!ob) ob = as_operand(bc = b.contiguous());
  const GemmTypes types = gemm_types(a.dtype());

  // Column-major: out^T [N, M] = bm^T [N, K] · a^T [K, M], so cuBLAS's A is bm and its B is a.
  const int m = as_int(N, "N", a, b), n = as_int(M, "M", a, b), k = as_int(K, "K", a, b);
  const int batches = as_int(B, "the batch", a, b);
  const int lda = as_int(ob->ld, "b's leading dimension", a, b), ldb = as_int(oa->ld, "a's leading dimension", a, b);
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const void* alpha = types.f64_scalars ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = types.f64_scalars ? static_cast<const void*>(&zero_d) : &zero_f;

  DeviceHandle& dh = device_handle(device);
  std::lock_guard<std::mutex> lock(dh.mu);
  const Cublas& api = cublas();
  if (!dh.handle) {
    check(api.create(&dh.handle), "cublasCreate");
    // The reference must accumulate in the compute type it is asked for: no f16 split-K
    // reductions (which cuBLAS allows by default for f16 outputs).
    check(api.set_math_mode(dh.handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
          "cublasSetMathMode");
  }
  // SetStream resets the handle's workspace, so the workspace is set after it.
  check(api.set_stream(dh.handle, static_cast<cudaStream_t>(stream.handle())), "cublasSetStream");
  const Workspace ws(device, kWorkspaceBytes, stream);
  check(api.set_workspace(dh.handle, ws.get(), ws.size()), "cublasSetWorkspace");
  note_device_work(stream, "cublasGemmStridedBatchedEx");  // a recording profiler times the op from here
  check(api.gemm(dh.handle, ob->op, oa->op, m, n, k, alpha, ob->ptr, types.data, lda, ob->batch_stride, oa->ptr,
                 types.data, ldb, oa->batch_stride, beta, out.data_ptr(), types.data, m, M * N, batches, types.compute,
                 CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

}  // namespace hg::cuda::vendor
