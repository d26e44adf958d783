// Shapes and strides (in elements), and the arithmetic on them shared by every op:
// element counts, contiguous strides, NumPy broadcasting, axis normalisation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hg {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"
// The broadcast of a and b (NumPy rules); throws hg::Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative axis into [0, ndim); throws naming `op` and the valid range.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);
void check_shape_nonnegative(const Shape& s, const char* op);

}  // namespace hg
