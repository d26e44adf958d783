// Device fan-out in one place: an op calls a DispatchStub with the device of its
// tensors, and each backend (ops/cpu/, cuda/) registers its kernel for the stub once.
#pragma once
#include <array>
#include <utility>

#include "framework/device.h"
#include "framework/error.h"
#include "framework/profiler_hook.h"

namespace hg {

template <class Fn> class DispatchStub;

template <class R, class... Args>
class DispatchStub<R(Args...)> {
 public:
  using Fn = R (*)(Args...);
  constexpr explicit DispatchStub(const char* name) : name_(name) {}

  void set(DeviceKind kind, Fn f) { table_[static_cast<size_t>(kind)] = f; }
  bool has(DeviceKind kind) const { return table_[static_cast<size_t>(kind)] != nullptr; }

  template <class... A>
  R operator()(Device device, A&&... args) const {
    Fn f = table_[static_cast<size_t>(device.kind)];
    if (!f)
      throw Error(detail::concat(name_, ": no kernel registered for device ", device.str(),
                                 device.is_cuda() ? " (this build of halfgrad has no CUDA backend)" : ""));
    if (profiler_hook::recording()) [[unlikely]]
      return profiled(f, device, std::forward<A>(args)...);
    return f(std::forward<A>(args)...);
  }

 private:
  // The same call, recorded by the active hg::Profiler (framework/profiler.h).
  template <class... A>
  R profiled(Fn f, Device device, A&&... args) const {
    profiler_hook::OpScope scope(name_, device);
    (profiler_hook::describe(scope, std::as_const(args)), ...);
    scope.start();
    return f(std::forward<A>(args)...);
  }

  const char* name_;
  std::array<Fn, 2> table_{};
};

// Registers `fn` for `stub` on `kind` at load time: HG_REGISTER_KERNEL(add_stub, cpu, add_cpu);
#define HG_REGISTER_KERNEL(stub, kind, fn)                                       \
  static const bool hg_registered_##stub##_##kind = [] {                         \
    stub.set(::hg::DeviceKind::kind, fn);                                        \
    return true;                                                                 \
  }()

}  // namespace hg
