// Tensor metadata, construction over storage, factories, printing and value reads.
#include "framework/tensor.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <ostream>

#include "framework/allocator.h"
#include "framework/autograd.h"
#include "framework/scalar.h"
#include "ops/copy.h"

namespace hg {

TensorImpl& Tensor::live(const char* what) const {
  if (!impl_)
    throw Error(detail::concat(what, "() on an undefined tensor (a default-constructed Tensor, or a gradient that "
                               "was never computed); check defined() first"));
  return *impl_;
}

const Shape& Tensor::shape() const { return live("shape").shape; }
int64_t Tensor::size(int64_t axis) const {
  const Shape& s = live("size").shape;
  return s[normalize_axis(axis, static_cast<int64_t>(s.size()), "size")];
}
const Strides& Tensor::strides() const { return live("strides").strides; }
int64_t Tensor::offset() const { return live("offset").offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(live("dim").shape.size()); }
int64_t Tensor::numel() const { return numel_of(live("numel").shape); }
DType Tensor::dtype() const { return live("dtype").dtype; }
Device Tensor::device() const {
  const TensorImpl& t = live("device");
  return t.storage ? t.storage->device : Device::cpu();
}
const std::shared_ptr<Storage>& Tensor::storage() const { return live("storage").storage; }
const std::string& Tensor::name() const { return live("name").name; }
Tensor& Tensor::set_name(std::string n) {
  live("set_name").name = std::move(n);
  return *this;
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = live("is_contiguous");
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] == 1) continue;
    if (t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = live("data_ptr");
  if (!t.storage || !t.storage->data) return nullptr;
  return static_cast<char*>(t.storage->data) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
}

namespace detail {
void throw_data_dtype(const Tensor& t, DType asked) {
  throw Error(concat("data<", dtype_name(asked), ">(): the tensor (shape ", shape_str(t.shape()), ") holds ",
                     dtype_name(t.dtype()), ", not ", dtype_name(asked), "; call data<T>() with T the tensor's dtype, or "
                     "convert first: t.to(", dtype_name(asked), ").data<...>()"));
}
}  // namespace detail

int64_t Tensor::version() const {
  const TensorImpl& t = live("version");
  return t.storage ? t.storage->version.load(std::memory_order_relaxed) : 0;
}

void Tensor::bump_version() const {
  const TensorImpl& t = live("bump_version");
  if (t.storage) t.storage->version.fetch_add(1, std::memory_order_relaxed);
}

void Tensor::set_data(const Tensor& src) const {
  live("set_data");
  HG_CHECK(src.defined(), "set_data: the source tensor is undefined");
  HG_CHECK(is_leaf(), "set_data: only leaf tensors can have their data replaced");
  HG_CHECK(!requires_grad() || is_floating(src.dtype()), "set_data: a tensor that requires grad needs floating data, got ",
           dtype_name(src.dtype()));
  impl_->storage = src.storage();
  impl_->shape = src.shape();
  impl_->strides = src.strides();
  impl_->offset = src.offset();
  impl_->dtype = src.dtype();
  impl_->grad = Tensor();
}

Tensor make_tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype) {
  HG_CHECK(shape.size() == strides.size(), "make_tensor: shape ", shape_str(shape), " and strides ",
           shape_str(strides), " differ in length");
  check_shape(shape, "make_tensor");
  // data_ptr() multiplies the offset by the element size; that must not wrap either.
  HG_CHECK(offset >= 0 && offset <= INT64_MAX / static_cast<int64_t>(dtype_size(dtype)), "make_tensor: offset ",
           offset, " is negative or past any storage");
  if (numel_of(shape) > 0) {
    // Checked: a huge stride must be refused, not wrap into a span that looks in bounds.
    int64_t lo = offset, hi = offset;
    bool overflow = false;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span = 0;
      overflow |= __builtin_mul_overflow(shape[i] - 1, strides[i], &span);
      int64_t& end = span < 0 ? lo : hi;
      overflow |= __builtin_add_overflow(end, span, &end);
    }
    int64_t cap = storage ? static_cast<int64_t>(storage->nbytes / dtype_size(dtype)) : 0;
    HG_CHECK(!overflow, "make_tensor: a view of shape ", shape_str(shape), ", strides ", shape_str(strides),
             " and offset ", offset, " reaches past 2^63 elements, outside its storage of ", cap, " elements");
    HG_CHECK(lo >= 0 && hi < cap, "make_tensor: a view of shape ", shape_str(shape), ", strides ",
             shape_str(strides), " and offset ", offset, " reaches elements ", lo, "..", hi,
             " outside its storage of ", cap, " elements");
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor empty(const Shape& shape, TensorOptions o) {
  check_shape(shape, "empty");
  // Sizes computed from absurd arguments must fail here, not wrap around to a small buffer.
  int64_t nbytes = 0;
  HG_CHECK(!__builtin_mul_overflow(numel_of(shape), static_cast<int64_t>(dtype_size(o.dtype)), &nbytes), "empty: a tensor of shape ",
           shape_str(shape), " and dtype ", dtype_name(o.dtype), " would need more than 2^63 bytes");
  auto st = new_storage(static_cast<size_t>(nbytes), o.device);
  Tensor t = make_tensor(std::move(st), shape, contiguous_strides(shape), 0, o.dtype);
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}

namespace {
Tensor full_checked(const Shape& shape, double value, TensorOptions o, const char* op) {
  check_shape(shape, op);
  check_fits_dtype(value, o.dtype, op);
  bool rg = o.requires_grad;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  detail::fill_new(t, value);
  if (rg) t.set_requires_grad(true);
  return t;
}
}  // namespace

Tensor full(const Shape& shape, double value, TensorOptions o) { return full_checked(shape, value, o, "full"); }
Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor scalar_tensor(double value, TensorOptions o) { return full_checked({}, value, o, "scalar_tensor"); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double v) { return full_checked(t.shape(), v, {t.dtype(), t.device()}, "full_like"); }

Tensor arange(double start, double end, double step, TensorOptions o) {
  HG_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange: start, end and step must be finite and step non-zero; got start=", start, " end=", end,
           " step=", step);
  // The count is checked as a double: converting one past 2^63 to int64 is undefined.
  const double count = std::max(0.0, std::ceil((end - start) / step));
  HG_CHECK(count < 0x1p62, "arange: start=", start, " end=", end, " step=", step, " would make ", count,
           " elements, more than any tensor can hold");
  const auto n = static_cast<int64_t>(count);
  Tensor host = empty({n}, {f64, Device::cpu()});  // hg::Error if memory cannot hold it
  double* p = host.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + static_cast<double>(i) * step;
  Tensor t = host.to(o.device, o.dtype);
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}

namespace {
template <class T>
Tensor data_to_tensor(const std::vector<T>& values, const Shape& shape, DataOptions o, const char* op) {
  check_shape(shape, op);
  HG_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), op, ": ", values.size(),
           " values cannot fill shape ", shape_str(shape), " (", numel_of(shape), " elements)");
  const DType to = o.dtype.value_or(dtype_v<T>);
  // Into an integer dtype every value must fit (a cast would saturate it silently); floating
  // targets round as IEEE says, overflow included (65520 becomes inf in f16).
  if (to == i64 && dtype_v<T> != i64)
    for (const T& v : values) check_fits_dtype(static_cast<double>(load(v)), to, op);
  Tensor host = empty(shape, {dtype_v<T>, Device::cpu()});
  T* p = host.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  Tensor t = host.to(o.device, to);
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}
}  // namespace

template <class T>
Tensor from_data(const std::vector<T>& values, const Shape& shape, DataOptions o) {
  return data_to_tensor(values, shape, o, "from_data");
}
template Tensor from_data(const std::vector<double>&, const Shape&, DataOptions);
template Tensor from_data(const std::vector<float>&, const Shape&, DataOptions);
template Tensor from_data(const std::vector<half>&, const Shape&, DataOptions);
template Tensor from_data(const std::vector<bfloat16>&, const Shape&, DataOptions);
template Tensor from_data(const std::vector<int64_t>&, const Shape&, DataOptions);

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions o) {
  return data_to_tensor(values, shape, {o.dtype, o.device, o.requires_grad}, "from_vector");
}

Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, o);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  live("to_vector");
  NoGrad ng;
  Tensor c = to(Device::cpu(), dtype_v<T>).contiguous();
  const T* p = c.data<T>();
  std::vector<T> out(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  return out;
}
template std::vector<double> Tensor::to_vector() const;
template std::vector<float> Tensor::to_vector() const;
template std::vector<half> Tensor::to_vector() const;
template std::vector<bfloat16> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;

template <class T>
T Tensor::item() const {
  live("item");
  HG_CHECK(numel() == 1, "item(): needs a one-element tensor, got shape ", shape_str(shape()));
  return to_vector<T>()[0];
}
template double Tensor::item() const;
template float Tensor::item() const;
template int64_t Tensor::item() const;
template half Tensor::item() const;
template bfloat16 Tensor::item() const;

template <>
bool Tensor::item<bool>() const {
  return item<double>() != 0.0;
}

double Tensor::at(const std::vector<int64_t>& index) const {
  live("at");
  HG_CHECK(static_cast<int64_t>(index.size()) == dim(), "at: index has ", index.size(),
           " coordinates for a tensor of shape ", shape_str(shape()));
  Tensor t = *this;
  for (size_t i = index.size(); i-- > 0;) t = t.select(static_cast<int64_t>(i), index[i]);
  return t.item<double>();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(" << dtype_name(t.dtype()) << shape_str(t.shape());
  if (!t.device().is_cpu()) os << ", " << t.device();
  if (t.requires_grad()) os << ", requires_grad";
  os << ") ";
  std::vector<double> v = t.to_vector<double>();
  const size_t limit = 64;
  int64_t row = t.dim() ? t.shape().back() : 1;
  os << "[";
  for (size_t i = 0; i < v.size() && i < limit; ++i) {
    if (i && row > 0 && i % static_cast<size_t>(row) == 0) os << " |";
    os << (i ? " " : "") << std::setprecision(6) << v[i];
  }
  if (v.size() > limit) os << " ... (" << v.size() << " values)";
  return os << "]";
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  Shape s = broadcast_shapes(a.shape(), b.shape(), "allclose");
  std::vector<double> va = a.expand(s).to_vector<double>(), vb = b.expand(s).to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    double x = va[i], y = vb[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (equal_nan && std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (x == y) continue;  // equal infinities
    if (!(std::abs(x - y) <= atol + rtol * std::abs(y))) return false;
  }
  return true;
}

}  // namespace hg
