// libFuzzer target: shape, stride and offset arithmetic through the public API. Sizes are
// drawn from the edges of int64 (0 next to 2^31, 3037000500 = ceil(sqrt(2^63)), 2^62,
// INT64_MAX, negatives) and chained through make_tensor and the views. Every call
// succeeds or raises hg::Error; an accepted view stays inside its storage (read back
// under ASan when small) and reports a non-negative element count.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "halfgrad.h"
#include "tests/fuzz/libfuzzer/target.h"

using namespace hg;

namespace {

int64_t edge_value(FuzzedDataProvider& in) {
  static constexpr int64_t kEdges[] = {0, 1, 2, 3, 7, -1, -2, int64_t{1} << 31, 3037000499, 3037000500,
                                       int64_t{1} << 32, int64_t{1} << 61, int64_t{1} << 62,
                                       std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  if (in.ConsumeBool()) return in.PickValueInArray(kEdges);
  return in.ConsumeIntegralInRange<int64_t>(-4, 16);
}

std::vector<int64_t> values(FuzzedDataProvider& in, size_t max_len) {
  std::vector<int64_t> v(in.ConsumeIntegralInRange<size_t>(0, max_len));
  for (int64_t& x : v) x = edge_value(in);
  return v;
}

void check_view(const Tensor& t) {
  fuzz::require(t.numel() >= 0, "fuzz_shapes", "a negative element count");
  // A small accepted view is read element by element: out-of-storage reads are ASan reports.
  if (t.numel() > 0 && t.numel() <= 4096) (void)sum(t.to(f64)).item<double>();
}

void one_op(FuzzedDataProvider& in, Tensor& t) {
  // reshape and flatten copy a view they cannot re-stride: an expanded view of billions of
  // elements is then a real allocation of that size (libFuzzer counts a big malloc as a crash),
  // not a shape bug, so such views only take the ops that never copy.
  const bool big_copy = !t.is_contiguous() && t.numel() > (int64_t{1} << 20);
  switch (in.ConsumeIntegralInRange<int>(0, 13)) {
    case 0: t = t.view(values(in, 5)); break;
    case 1: if (!big_copy) t = t.reshape(values(in, 5)); break;
    case 2: t = t.expand(values(in, 5)); break;
    case 3: t = t.narrow(edge_value(in), edge_value(in), edge_value(in)); break;
    case 4: t = t.slice(edge_value(in), edge_value(in), edge_value(in), edge_value(in)); break;
    case 5: t = t.select(edge_value(in), edge_value(in)); break;
    case 6: t = t.permute(values(in, 5)); break;
    case 7: t = t.transpose(edge_value(in), edge_value(in)); break;
    case 8: t = t.squeeze(edge_value(in)); break;
    case 9: t = t.unsqueeze(edge_value(in)); break;
    case 10: if (!big_copy) t = t.flatten(edge_value(in), edge_value(in)); break;
    case 11: t = make_tensor(t.storage(), values(in, 4), values(in, 4), edge_value(in), t.dtype()); break;
    case 12: (void)broadcast_shapes(t.shape(), values(in, 5), "fuzz"); break;
    default: {
      const Shape s = values(in, 5);
      (void)numel_of(s);
      (void)contiguous_strides(s);
      check_shape(s, "fuzz");
    }
  }
  check_view(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int64_t n = in.ConsumeIntegralInRange<int64_t>(0, 64);
  Tensor t = arange(0, static_cast<double>(n), 1.0, {in.PickValueInArray({f32, f16, f64, i64})});
  for (int ops = 0; ops < 8 && in.remaining_bytes() > 0; ++ops)
    fuzz::expect_clean("fuzz_shapes", [&] { one_op(in, t); });
  // A factory with such sizes: refused, or made with numel_of(shape) elements. Only
  // shapes of at most 2^20 elements are allocated (libFuzzer counts a big malloc as a crash).
  fuzz::expect_clean("fuzz_shapes", [&] {
    const Shape s = values(in, 4);
    check_shape(s, "fuzz");
    if (numel_of(s) > (int64_t{1} << 20)) return;
    fuzz::require(empty(s, {f16}).numel() == numel_of(s), "fuzz_shapes", "empty() makes numel_of(shape) elements");
  });
  return 0;
}
