// masked_fill, tril and triu: hand-computed results (PyTorch's), batches, gradients
// through the kept elements only, f16 rounding of the filled value, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("tril and triu keep the triangle on and around the diagonal", "[masking]") {
  Tensor x = arange(1, 13, 1, {f64}).view({3, 4});
  CHECK(tril(x).to_vector<double>() == std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  CHECK(triu(x).to_vector<double>() == std::vector<double>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  CHECK(tril(x, 1).to_vector<double>() == std::vector<double>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  CHECK(triu(x, -1).to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  // a batch of matrices, each masked alike
  Tensor b = stack({x, x * 2.0}, 0);
  CHECK(allclose(tril(b).select(0, 1), tril(x) * 2.0));
  Tensor xl = x.set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return triu(in[0], 1); }, {xl}));
  CHECK_THROWS_WITH(tril(tensor({1, 2})), Catch::Contains("at least 2 axes"));
}

TEST_CASE("masked_fill writes the value where the mask is true", "[masking]") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {f64}).view({2, 3});
  Tensor row_mask = tensor({1, 0, 1}, {b8});  // broadcasts over rows
  CHECK(masked_fill(x, row_mask, -1).to_vector<double>() == std::vector<double>{-1, 2, -1, -1, 5, -1});
  Tensor xl = x.set_requires_grad();
  Tensor y = masked_fill(xl, row_mask, 7);
  sum(y).backward();
  CHECK(xl.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0, 1, 0});
  // The value rounds into f16 once; one beyond f16's range is refused (as in PyTorch), -inf stays -inf.
  CHECK_THROWS_WITH(masked_fill(zeros({2}, {f16}), tensor({1, 0}, {b8}), 70000.0),
                    Catch::Contains("masked_fill: value 70000 cannot be converted to f16"));
  Tensor h = masked_fill(zeros({2}, {f16}), tensor({1, 0}, {b8}), -INFINITY);
  CHECK(h.to_vector<double>()[0] == -INFINITY);
  CHECK(masked_fill(zeros({1}, {f16}), tensor({1}, {b8}), 0.1).to_vector<double>()[0] == double(half(0.1)));
  CHECK_THROWS_WITH(masked_fill(x, tensor({1, 0, 1}), 0), Catch::Contains("must be a bool tensor"));
  CHECK_THROWS_WITH(masked_fill(x, zeros({3, 2, 3}, {b8}), 0), Catch::Contains("must broadcast to the tensor's shape"));
}
