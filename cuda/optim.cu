// The optimizers' fused steps on the cuda device: one grid-stride pass running the CPU's
// element rules (ops/optim_update_rules.h). Each thread reads the step count and the
// found-inf flag from device memory and, when the flag is set, returns before writing:
// a GradScaler step never waits for the host.
#include <algorithm>

#include "cuda/device_types.h"
#include "cuda/launch.h"
#include "ops/optim_kernels.h"

namespace hg::cuda {
namespace {

using optim::StateBuffers;
using optim::StepClock;

HG_DEVICE bool skipped(const float* skip_if) {
  if (!skip_if) return false;
  const float f = *skip_if;
  return f != 0.0f || f != f;  // NaN counts as found
}

template <class Rule, class T, class S, class G>
__global__ void step_kernel(T* p, const G* g, S* b0, S* b1, S* b2, int64_t n, typename Rule::Hyper h,
                            const int64_t* count, const float* skip_if) {
  using C = compute_t<T>;
  if (skipped(skip_if)) return;
  const auto s = Rule::template scalars<C>(h, static_cast<double>(*count + 1));
  S* b[3] = {b0, b1, b2};
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    C v[3];
    for (int k = 0; k < 3; ++k) v[k] = b[k] ? C(dev_load(b[k][i])) : C(0);
    p[i] = dev_store<T>(Rule::apply(C(dev_load(p[i])), static_cast<C>(dev_load(g[i])), v, s));
    for (int k = 0; k < 3; ++k)
      if (b[k]) b[k][i] = dev_store<S>(v[k]);
  }
}

__global__ void count_step_kernel(int64_t* count, const float* skip_if) {
  if (!skipped(skip_if)) ++*count;
}

template <class Rule>
void step_cuda(const Tensor& param, const Tensor& grad, const StateBuffers& state, const typename Rule::Hyper& h,
               const StepClock& clock) {
  HG_CHECK(clock.device_count.defined() && clock.device_count.dtype() == i64 &&
               clock.device_count.device() == param.device(),
           "optimizer step on ", param.device().str(), ": expects the step count as an i64 tensor on that device");
  HG_CHECK(!clock.skip_if.defined() || (clock.skip_if.dtype() == f32 && clock.skip_if.device() == param.device()),
           "optimizer step on ", param.device().str(), ": the found-inf flag must be an f32 tensor on that device");
  HG_CHECK(param.is_contiguous() && grad.is_contiguous() && grad.device() == param.device(),
           "optimizer step: parameter and gradient must be contiguous and on one device");
  const int64_t n = param.numel();
  if (n == 0) return;
  const float* skip = clock.skip_if.defined() ? clock.skip_if.data<float>() : nullptr;
  const unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 1024));
  visit_floating(param.dtype(), "optimizer step", [&]<typename T>() {
    using C = compute_t<T>;
    auto with_state = [&]<typename S>() {
      S* b[3];
      for (size_t k = 0; k < 3; ++k) {
        HG_CHECK(!state[k].defined() || (state[k].dtype() == dtype_v<S> && state[k].is_contiguous() &&
                                         state[k].device() == param.device() && state[k].numel() == n),
                 "optimizer step: state buffer ", k, " must be a contiguous ", dtype_name(dtype_v<S>),
                 " tensor of the parameter's size on ", param.device().str());
        b[k] = state[k].defined() ? state[k].data<S>() : nullptr;
      }
      visit_floating(grad.dtype(), "optimizer step", [&]<typename G>() {
        launch(step_kernel<Rule, T, S, G>,
               {.grid = blocks, .block = threads, .stream = current_stream(param.device().index), .name = "optimizer_step"},
               param.data<T>(), grad.data<G>(), b[0], b[1], b[2], n, h, clock.device_count.data<int64_t>(), skip);
      });
    };
    const Tensor* first = nullptr;
    for (const Tensor& t : state)
      if (!first && t.defined()) first = &t;
    if (first && first->dtype() == dtype_v<T>) with_state.template operator()<T>();
    else with_state.template operator()<C>();
  });
}

void count_step_cuda(const Tensor& device_count, const Tensor& skip_if) {
  HG_CHECK(device_count.dtype() == i64 && (!skip_if.defined() || skip_if.dtype() == f32),
           "count_step: expects an i64 count and an f32 flag");
  launch(count_step_kernel, {.grid = 1, .block = 1, .stream = current_stream(device_count.device().index), .name = "count_step"},
         device_count.data<int64_t>(), skip_if.defined() ? skip_if.data<float>() : nullptr);
}

}  // namespace

using optim::adam_step_stub;
using optim::count_step_stub;
using optim::rmsprop_step_stub;
using optim::sgd_step_stub;
HG_REGISTER_KERNEL(adam_step_stub, cuda, step_cuda<optim::AdamRule>);
HG_REGISTER_KERNEL(sgd_step_stub, cuda, step_cuda<optim::SGDRule>);
HG_REGISTER_KERNEL(rmsprop_step_stub, cuda, step_cuda<optim::RMSpropRule>);
HG_REGISTER_KERNEL(count_step_stub, cuda, count_step_cuda);

}  // namespace hg::cuda
