// Tensor: a cheap shared handle to a strided view of a Storage, with the autograd
// metadata (requires_grad, grad, grad_fn) the engine in autograd.h works on.
// The math on tensors lives in ops/; this file holds what a tensor *is*.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/device.h"
#include "framework/dtype.h"
#include "framework/shape.h"
#include "framework/storage.h"

namespace hg {

class Node;
class TensorImpl;
struct LossScaleMark;

// What backward() takes besides the gradient: y.backward({.retain_graph = true}) keeps the
// graph's saved tensors, so that a second backward() can run through it again.
struct BackwardOptions {
  bool retain_graph = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // Metadata.
  const Shape& shape() const;
  int64_t size(int64_t axis) const;  // negative axes count from the end
  const Strides& strides() const;
  int64_t offset() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  void* data_ptr() const;  // address of element 0 (offset applied)
  // Typed address of element 0; T must be the tensor's C++ element type (hg::Error if not).
  template <class T> T* data() const;
  // How many in-place writes the storage has had (shared by all views). Every in-place op
  // (copy_, fill_, optimizer steps, ...) calls bump_version() after writing.
  int64_t version() const;
  void bump_version() const;

  // Values, for tests and small reads (synchronise with the device).
  template <class T> T item() const;
  template <class T> std::vector<T> to_vector() const;  // row-major, converted to T
  double at(const std::vector<int64_t>& index) const;

  // Views sharing storage (implemented in ops/views.cpp; differentiable).
  Tensor view(const Shape& shape) const;  // needs compatible strides; -1 infers one size
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor narrow(int64_t axis, int64_t start, int64_t length) const;
  Tensor slice(int64_t axis, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t axis, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t axis) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten(int64_t start_axis = 0, int64_t end_axis = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;

  // Conversions (differentiable; a no-op returns *this).
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(Device device, DType dtype) const;

  // Autograd.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool r = true);
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined until a backward reaches this tensor
  Tensor& mutable_grad();
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<Node>& grad_fn() const;
  Tensor detach() const;  // same storage, cut from the graph
  // Makes this tensor (every handle to it) view src's data, dtype and device while it
  // keeps its identity as a leaf (requires_grad, name, hooks); its grad is dropped.
  // How modules and master weights convert parameters in place.
  void set_data(const Tensor& src) const;
  void retain_grad() const;
  // A hook sees the gradient flowing into this tensor and may return a replacement
  // (or an undefined Tensor to keep it). Returns a handle for remove_hook.
  using Hook = std::function<Tensor(const Tensor&)>;
  int64_t register_hook(Hook hook) const;
  void remove_hook(int64_t handle) const;
  void backward(BackwardOptions options = {}) const;  // of a one-element tensor
  void backward(const Tensor& grad, BackwardOptions options) const;
  void backward(const Tensor& grad, bool retain_graph = false) const;

  // A name for messages and the graph printer (parameters get their module path).
  const std::string& name() const;
  Tensor& set_name(std::string n);

 private:
  // The impl, or hg::Error naming `what` for an undefined tensor (instead of a crash).
  TensorImpl& live(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

class TensorImpl {
 public:
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  DType dtype = DType::f32;

  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves only, made on first use
  std::vector<std::pair<int64_t, std::function<Tensor(const Tensor&)>>> hooks;  // leaves only
  std::string name;
  // Gradients only: the loss scale this gradient still carries (see LossScaleMark in
  // framework/autograd.h); expired or empty when it carries none.
  std::weak_ptr<const LossScaleMark> loss_scale;
};

namespace detail {
[[noreturn]] void throw_data_dtype(const Tensor& t, DType asked);
}

// The dtype check costs one compare; it turns data<double>() of an f32 tensor from garbage
// into an error. The device is not checked: kernels take device tensors' addresses this way
// (as PyTorch's data_ptr<T>() does); reading values on the host goes through to_vector().
template <class T>
T* Tensor::data() const {
  void* p = data_ptr();  // first: an undefined tensor is refused as data_ptr() refuses it
  if (dtype() != dtype_v<T>) detail::throw_data_dtype(*this, dtype_v<T>);
  return static_cast<T*>(p);
}

// Makes a tensor over existing storage (no copy). Checks the view fits in the storage.
Tensor make_tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
                   DType dtype);

// Factories. Sizes must be non-negative.
struct TensorOptions {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  bool requires_grad = false;
};
Tensor empty(const Shape& shape, TensorOptions o = {});
Tensor zeros(const Shape& shape, TensorOptions o = {});
Tensor ones(const Shape& shape, TensorOptions o = {});
// full, scalar_tensor and full_like refuse a value that does not fit the dtype (fits_dtype in
// framework/scalar.h: i64 takes finite values in [-2^63, 2^63), f16 up to 65504 and ±inf/NaN,
// ...) with hg::Error, as PyTorch's do; casts (to, copy_) never refuse (see copy_).
Tensor full(const Shape& shape, double value, TensorOptions o = {});
Tensor scalar_tensor(double value, TensorOptions o = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions o = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// From host values (converted to o.dtype with IEEE rounding: 65520 becomes inf in f16);
// into i64 each value must be finite and in [-2^63, 2^63), else hg::Error.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions o = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions o = {});
// from_data keeps the values' own dtype (int64_t gives i64, half f16) unless one is given.
struct DataOptions {
  std::optional<DType> dtype;
  Device device = Device::cpu();
  bool requires_grad = false;
};
template <class T> Tensor from_data(const std::vector<T>& values, const Shape& shape, DataOptions o = {});
// Integer host values, exact beyond 2^53 where the double overload rounds; i64 unless a dtype
// is given. (A template, so that a braced list such as from_vector({1, 2}, ...) still means doubles.)
template <std::same_as<int64_t> I>
Tensor from_vector(const std::vector<I>& values, const Shape& shape, DataOptions o = {}) {
  return from_data(values, shape, o);
}

// Prints shape, dtype, device and (up to a limit) values.
std::ostream& operator<<(std::ostream& os, const Tensor& t);
// |a - b| <= atol + rtol |b| elementwise, in f64, after broadcasting; NaNs equal only if equal_nan.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);

}  // namespace hg
