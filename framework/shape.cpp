// Shape arithmetic shared by every op, with every product checked for int64 overflow.
#include "framework/shape.h"

#include <algorithm>
#include <sstream>

#include "framework/error.h"

namespace hg {

int64_t numel_of(const Shape& s) {
  if (std::find(s.begin(), s.end(), 0) != s.end()) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    HG_CHECK(!__builtin_mul_overflow(n, d, &n), "numel: shape ", shape_str(s),
             " has more elements than int64 can count (2^63 - 1)");
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    HG_CHECK(i == 0 || !__builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc), "contiguous strides of shape ",
             shape_str(s), " overflow int64");
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    HG_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together (dimension ", i, " is ", da, " vs ", db,
             "; sizes must match or one of them be 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  HG_CHECK(axis >= lo && axis <= hi, op, ": axis ", axis, " is out of range for a tensor of ", ndim,
           " dimensions (valid: ", lo, " to ", hi, ")");
  if (ndim == 0) return 0;
  return axis < 0 ? axis + ndim : axis;
}

void check_shape(const Shape& s, const char* op) {
  int64_t extent = 1;
  for (int64_t d : s) {
    HG_CHECK(d >= 0, op, ": sizes must be non-negative, got ", shape_str(s));
    HG_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent), op, ": shape ", shape_str(s),
             " is too large: its sizes (zeros counted as 1) multiply past 2^63 - 1, so its strides cannot be "
             "represented");
  }
}

}  // namespace hg
