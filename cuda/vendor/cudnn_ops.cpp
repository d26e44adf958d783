// vendor::conv2d_{forward,dgrad,wgrad} on cuDNN's convolution API, loaded with dlopen on
// first use: NHWC tensors, KRSC filters (CUDNN_TENSOR_NHWC filter format), f32 compute for
// f16/bf16/f32 (f64 for f64), the algorithm found once per shape by cudnnFind* (or, if that
// fails, e.g. when its own cudaMalloc runs out of memory, cudnnGet*_v7) and cached with its
// descriptors. One handle per device, bound to halfgrad's current stream for each call,
// its workspace taken from the caching allocator. Native builds only.
#include "cuda/vendor/vendor_ops.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>

#include <array>
#include <climits>
#include <map>
#include <mutex>

#include "cuda/kernel_settings.h"
#include "cuda/profiler_events.h"
#include "cuda/runtime.h"
#include "cuda/vendor/dynamic_library.h"
#include "cuda/vendor/vendor_scope.h"

namespace hg::cuda::vendor {
namespace {

constexpr int kMaxDevices = 16;
constexpr int kMaxAlgorithms = 16;
// Algorithms wanting more scratch than this are passed over (a reference need not be the
// fastest possible, and U-Net layers at batch 16 never come close).
constexpr size_t kMaxWorkspaceBytes = size_t{2} << 30;

struct Cudnn {
  DynamicLibrary lib{"cuDNN", {"libcudnn.so.9", "libcudnn.so"}};
#define HG_CUDNN_FN(name) decltype(&::name) name = nullptr
  HG_CUDNN_FN(cudnnCreate);
  HG_CUDNN_FN(cudnnSetStream);
  HG_CUDNN_FN(cudnnGetErrorString);
  HG_CUDNN_FN(cudnnCreateTensorDescriptor);
  HG_CUDNN_FN(cudnnSetTensor4dDescriptor);
  HG_CUDNN_FN(cudnnCreateFilterDescriptor);
  HG_CUDNN_FN(cudnnSetFilter4dDescriptor);
  HG_CUDNN_FN(cudnnCreateConvolutionDescriptor);
  HG_CUDNN_FN(cudnnSetConvolution2dDescriptor);
  HG_CUDNN_FN(cudnnSetConvolutionGroupCount);
  HG_CUDNN_FN(cudnnSetConvolutionMathType);
  HG_CUDNN_FN(cudnnFindConvolutionForwardAlgorithm);
  HG_CUDNN_FN(cudnnFindConvolutionBackwardDataAlgorithm);
  HG_CUDNN_FN(cudnnFindConvolutionBackwardFilterAlgorithm);
  HG_CUDNN_FN(cudnnGetConvolutionForwardAlgorithm_v7);
  HG_CUDNN_FN(cudnnGetConvolutionBackwardDataAlgorithm_v7);
  HG_CUDNN_FN(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
  HG_CUDNN_FN(cudnnConvolutionForward);
  HG_CUDNN_FN(cudnnConvolutionBackwardData);
  HG_CUDNN_FN(cudnnConvolutionBackwardFilter);
#undef HG_CUDNN_FN

  Cudnn() {
    if (!lib.loaded()) return;
#define HG_CUDNN_LOAD(name) name = lib.function<decltype(name)>(#name)
    HG_CUDNN_LOAD(cudnnCreate);
    HG_CUDNN_LOAD(cudnnSetStream);
    HG_CUDNN_LOAD(cudnnGetErrorString);
    HG_CUDNN_LOAD(cudnnCreateTensorDescriptor);
    HG_CUDNN_LOAD(cudnnSetTensor4dDescriptor);
    HG_CUDNN_LOAD(cudnnCreateFilterDescriptor);
    HG_CUDNN_LOAD(cudnnSetFilter4dDescriptor);
    HG_CUDNN_LOAD(cudnnCreateConvolutionDescriptor);
    HG_CUDNN_LOAD(cudnnSetConvolution2dDescriptor);
    HG_CUDNN_LOAD(cudnnSetConvolutionGroupCount);
    HG_CUDNN_LOAD(cudnnSetConvolutionMathType);
    HG_CUDNN_LOAD(cudnnFindConvolutionForwardAlgorithm);
    HG_CUDNN_LOAD(cudnnFindConvolutionBackwardDataAlgorithm);
    HG_CUDNN_LOAD(cudnnFindConvolutionBackwardFilterAlgorithm);
    HG_CUDNN_LOAD(cudnnGetConvolutionForwardAlgorithm_v7);
    HG_CUDNN_LOAD(cudnnGetConvolutionBackwardDataAlgorithm_v7);
    HG_CUDNN_LOAD(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
    HG_CUDNN_LOAD(cudnnConvolutionForward);
    HG_CUDNN_LOAD(cudnnConvolutionBackwardData);
    HG_CUDNN_LOAD(cudnnConvolutionBackwardFilter);
#undef HG_CUDNN_LOAD
  }
};

const Cudnn& cudnn() {
  static const Cudnn c;
  return c;
}

void check(cudnnStatus_t s, const char* call, const std::string& where) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  throw Error(detail::concat("vendor conv2d: ", call, " failed: ", cudnn().cudnnGetErrorString(s), " (cuDNN status ",
                             static_cast<int>(s), ") for ", where));
}

enum class Pass { forward, dgrad, wgrad };
const char* pass_name(Pass p) { return p == Pass::forward ? "forward" : p == Pass::dgrad ? "dgrad" : "wgrad"; }

// Descriptors and algorithm of one (pass, shape, dtype, math) combination, made once.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
};

using PlanKey = std::array<int64_t, 20>;

struct DeviceState {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::map<PlanKey, Plan> plans;
};

DeviceState& device_state(int device) {
  static std::array<DeviceState, kMaxDevices> states;
  HG_CHECK(device >= 0 && device < kMaxDevices, "vendor conv2d: cuda:", device, " is beyond the ", kMaxDevices,
           " devices halfgrad supports");
  return states[static_cast<size_t>(device)];
}

struct ConvTypes {
  cudnnDataType_t data, compute;
  cudnnMathType_t math;
  bool f64_scalars;
};

// f16/bf16 on tensor cores with f32 compute; f32 like PyTorch's allow_tf32 switch: FMA-only
// kernels unless f32_matmul() is `fast` (CUDNN_DEFAULT_MATH lets cuDNN use TF32 on sm_80+;
// cuDNN has no 3xTF32, so `accurate` gets strict f32, as cuBLAS does).
ConvTypes conv_types(DType dt) {
  return visit_floating(dt, "vendor conv2d", [&]<typename T>() -> ConvTypes {
    if constexpr (std::is_same_v<T, double>) return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH, true};
    else if constexpr (std::is_same_v<T, float>)
      return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
              f32_matmul() == F32Matmul::fast ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH, false};
    else if constexpr (std::is_same_v<T, half>) return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false};
    else return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false};
  });
}

int as_int(int64_t v, const std::string& where) {
  HG_CHECK(v >= 0 && v <= INT_MAX, "vendor conv2d: a size of ", v, " exceeds cuDNN's 32-bit limit for ", where);
  return static_cast<int>(v);
}

// The first algorithm that ran (or, from the heuristic, is supported) within the workspace
// limit: cudnnFind* sorts by measured time, cudnnGet*_v7 by expected time.
template <class Perf, class Find, class Heuristic>
void choose_algorithm(Plan& plan, const ConvTypes& types, const std::string& where, Find find, Heuristic heuristic) {
  std::array<Perf, kMaxAlgorithms> perf{};
  int n = 0;
  if (find(kMaxAlgorithms, &n, perf.data()) != CUDNN_STATUS_SUCCESS) {
    n = 0;
    check(heuristic(kMaxAlgorithms, &n, perf.data()), "cudnnGetConvolution*Algorithm_v7", where);
  }
  for (int i = 0; i < n; ++i) {
    const Perf& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspaceBytes) continue;
    plan.algo = static_cast<int>(r.algo);
    plan.workspace = r.memory;
    // An algorithm may need the math type it was measured with; strict f32 keeps FMA only.
    if (types.math != CUDNN_FMA_MATH)
      check(cudnn().cudnnSetConvolutionMathType(plan.conv, r.mathType), "cudnnSetConvolutionMathType", where);
    return;
  }
  throw Error("vendor conv2d: cuDNN has no algorithm for " + where + " within " +
              std::to_string(kMaxWorkspaceBytes >> 20) + " MiB of workspace");
}

// x [N, H, W, C], w [K, R, S, C/G], y [N, P, Q, K] whatever the pass (dgrad writes x's
// gradient, wgrad w's).
Plan& plan_for(DeviceState& st, Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  const ConvTypes types = conv_types(x.dtype());
  const PlanKey key{static_cast<int64_t>(pass), static_cast<int64_t>(x.dtype()), static_cast<int64_t>(types.math),
                    x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(1), w.size(2), w.size(3), y.size(1),
                    y.size(2), p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1],
                    p.groups};
  if (auto it = st.plans.find(key); it != st.plans.end()) return it->second;

  const std::string where = detail::concat(pass_name(pass), " of x ", shape_str(x.shape()), " w ", shape_str(w.shape()),
                                           " y ", shape_str(y.shape()), " ", dtype_name(x.dtype()), " stride ",
                                           p.stride[0], "x", p.stride[1], " padding ", p.padding[0], "x", p.padding[1],
                                           " dilation ", p.dilation[0], "x", p.dilation[1], " groups ", p.groups);
  for (const Tensor* t : {&x, &w, &y}) {
    HG_CHECK(t->is_contiguous(), "vendor conv2d: takes contiguous NHWC tensors, got strides ",
             shape_str(t->strides()), " in the ", where);
    as_int(t->numel(), where);
  }
  const Cudnn& api = cudnn();
  Plan plan;
  check(api.cudnnCreateTensorDescriptor(&plan.x), "cudnnCreateTensorDescriptor", where);
  check(api.cudnnCreateTensorDescriptor(&plan.y), "cudnnCreateTensorDescriptor", where);
  check(api.cudnnCreateFilterDescriptor(&plan.w), "cudnnCreateFilterDescriptor", where);
  check(api.cudnnCreateConvolutionDescriptor(&plan.conv), "cudnnCreateConvolutionDescriptor", where);
  // NHWC: the dims are still given as (n, c, h, w); the format sets the strides.
  check(api.cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NHWC, types.data, as_int(x.size(0), where),
                                       as_int(x.size(3), where), as_int(x.size(1), where), as_int(x.size(2), where)),
        "cudnnSetTensor4dDescriptor(x)", where);
  check(api.cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NHWC, types.data, as_int(y.size(0), where),
                                       as_int(y.size(3), where), as_int(y.size(1), where), as_int(y.size(2), where)),
        "cudnnSetTensor4dDescriptor(y)", where);
  // The NHWC filter format is KRSC: dims (k, c per group, r, s).
  check(api.cudnnSetFilter4dDescriptor(plan.w, types.data, CUDNN_TENSOR_NHWC, as_int(w.size(0), where),
                                       as_int(w.size(3), where), as_int(w.size(1), where), as_int(w.size(2), where)),
        "cudnnSetFilter4dDescriptor", where);
  check(api.cudnnSetConvolution2dDescriptor(plan.conv, as_int(p.padding[0], where), as_int(p.padding[1], where),
                                            as_int(p.stride[0], where), as_int(p.stride[1], where),
                                            as_int(p.dilation[0], where), as_int(p.dilation[1], where),
                                            CUDNN_CROSS_CORRELATION, types.compute),
        "cudnnSetConvolution2dDescriptor", where);
  check(api.cudnnSetConvolutionGroupCount(plan.conv, as_int(p.groups, where)), "cudnnSetConvolutionGroupCount", where);
  check(api.cudnnSetConvolutionMathType(plan.conv, types.math), "cudnnSetConvolutionMathType", where);

  cudnnHandle_t h = st.handle;
  switch (pass) {
    case Pass::forward:
      choose_algorithm<cudnnConvolutionFwdAlgoPerf_t>(
          plan, types, where,
          [&](int k, int* n, auto* r) { return api.cudnnFindConvolutionForwardAlgorithm(h, plan.x, plan.w, plan.conv, plan.y, k, n, r); },
          [&](int k, int* n, auto* r) { return api.cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x, plan.w, plan.conv, plan.y, k, n, r); });
      break;
    case Pass::dgrad:
      choose_algorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
          plan, types, where,
          [&](int k, int* n, auto* r) { return api.cudnnFindConvolutionBackwardDataAlgorithm(h, plan.w, plan.y, plan.conv, plan.x, k, n, r); },
          [&](int k, int* n, auto* r) { return api.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.w, plan.y, plan.conv, plan.x, k, n, r); });
      break;
    case Pass::wgrad:
      choose_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
          plan, types, where,
          [&](int k, int* n, auto* r) { return api.cudnnFindConvolutionBackwardFilterAlgorithm(h, plan.x, plan.y, plan.conv, plan.w, k, n, r); },
          [&](int k, int* n, auto* r) { return api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, plan.x, plan.y, plan.conv, plan.w, k, n, r); });
      break;
  }
  return st.plans.emplace(key, plan).first->second;
}

// One pass: `in0`/`in1` are read, `out` overwritten (beta = 0); x, w, y name the tensors of
// the convolution's shapes for the plan.
void run(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  const int device = common_cuda_device("vendor conv2d", {&x, &w, &y});
  HG_CHECK(x.dim() == 4 && w.dim() == 4 && y.dim() == 4, "vendor conv2d: expects x [N, H, W, C], w [K, R, S, C/groups], ",
           "y [N, P, Q, K]; got ", shape_str(x.shape()), ", ", shape_str(w.shape()), ", ", shape_str(y.shape()));
  const std::string why = cudnn_unavailable_reason();
  HG_CHECK(why.empty(), "vendor conv2d: ", why);
  HG_CHECK(x.numel() > 0 && w.numel() > 0 && y.numel() > 0, "vendor conv2d: cuDNN takes no empty tensors, got x ",
           shape_str(x.shape()), " w ", shape_str(w.shape()), " y ", shape_str(y.shape()));
  DeviceScope scope(device);
  const Stream stream = current_stream(device);
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mu);
  const Cudnn& api = cudnn();
  if (!st.handle) check(api.cudnnCreate(&st.handle), "cudnnCreate", "cuda:" + std::to_string(device));
  check(api.cudnnSetStream(st.handle, static_cast<cudaStream_t>(stream.handle())), "cudnnSetStream",
        "cuda:" + std::to_string(device));
  const Plan& plan = plan_for(st, pass, x, w, y, p);
  const ConvTypes types = conv_types(x.dtype());
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const void* alpha = types.f64_scalars ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = types.f64_scalars ? static_cast<const void*>(&zero_d) : &zero_f;
  const Workspace ws(device, plan.workspace, stream);
  const char* call = pass == Pass::forward ? "cudnnConvolutionForward"
                     : pass == Pass::dgrad ? "cudnnConvolutionBackwardData"
                                           : "cudnnConvolutionBackwardFilter";
  note_device_work(stream, call);  // a recording profiler times the op from here
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  switch (pass) {
    case Pass::forward:
      s = api.cudnnConvolutionForward(st.handle, alpha, plan.x, x.data_ptr(), plan.w, w.data_ptr(), plan.conv,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), ws.get(), ws.size(), beta,
                                      plan.y, y.data_ptr());
      break;
    case Pass::dgrad:
      s = api.cudnnConvolutionBackwardData(st.handle, alpha, plan.w, w.data_ptr(), plan.y, y.data_ptr(), plan.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws.get(), ws.size(),
                                           beta, plan.x, x.data_ptr());
      break;
    case Pass::wgrad:
      s = api.cudnnConvolutionBackwardFilter(st.handle, alpha, plan.x, x.data_ptr(), plan.y, y.data_ptr(), plan.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws.get(),
                                             ws.size(), beta, plan.w, w.data_ptr());
      break;
  }
  check(s, call, pass_name(pass) + std::string(" of x ") + shape_str(x.shape()) + " w " + shape_str(w.shape()));
}

}  // namespace

std::string cudnn_unavailable_reason() {
  if (!cudnn().lib.loaded()) return cudnn().lib.load_error();
  if (device_count() == 0) return "no CUDA device: " + unavailable_reason();
  return "";
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  run(Pass::forward, x, w, y, p);
}
void conv2d_dgrad(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dOptions& p) {
  run(Pass::dgrad, gx, w, gy, p);
}
void conv2d_wgrad(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p) {
  run(Pass::wgrad, x, gw, gy, p);
}

}  // namespace hg::cuda::vendor

#else  // no cudnn.h where this halfgrad was built: the references say so

#include "framework/error.h"

namespace hg::cuda::vendor {
namespace {
const char* kWhy = "cuDNN's header cudnn.h was not found when this halfgrad was built";
}
std::string cudnn_unavailable_reason() { return kWhy; }
void conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) {
  throw Error(std::string("vendor conv2d: ") + kWhy);
}
void conv2d_dgrad(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) {
  throw Error(std::string("vendor conv2d: ") + kWhy);
}
void conv2d_wgrad(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) {
  throw Error(std::string("vendor conv2d: ") + kWhy);
}
}  // namespace hg::cuda::vendor
#endif
