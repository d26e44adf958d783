// Shapes and strides (in elements), and the arithmetic on them shared by every op:
// element counts, contiguous strides, NumPy broadcasting, axis normalisation. Every
// product is checked: a shape whose sizes multiply past int64 is an error, never a wrap.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hg {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// The element count; 0 if any size is 0. Throws hg::Error if the product overflows int64.
int64_t numel_of(const Shape& s);
// Row-major strides (a size-0 or size-1 axis counts as 1); throws hg::Error on overflow.
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"
// The broadcast of a and b (NumPy rules); throws hg::Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative axis into [0, ndim); throws naming `op` and the valid range.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);
// A shape a tensor may have: sizes >= 0 whose product, zero sizes counted as 1, fits in
// int64 (so its contiguous strides and any non-empty sub-shape's count do too); throws
// hg::Error naming `op` otherwise. [0, 2^40, 2^40] is refused although it has 0 elements.
void check_shape(const Shape& s, const char* op);

}  // namespace hg
