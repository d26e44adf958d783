// Every row of the precision table against the op's actual output dtype under autocast.
#include <catch2/catch.hpp>

#include <functional>
#include <map>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("each op obeys its row of the precision table under autocast", "[precision_table]") {
  Generator g(2);
  Tensor x4 = randn({2, 4, 4, 3}, {f32}, &g);               // an NHWC image, f32
  Tensor w4 = randn({5, 3, 3, 3}, {f32}, &g);
  Tensor wt = randn({3, 2, 2, 5}, {f32}, &g);
  Tensor m = randn({3, 4}, {f32}, &g), v = rand({3, 4}, {f32}, &g);
  Tensor h = randn({3, 4}, {f16}, &g);                       // an f16 activation
  Tensor lab = tensor({0, 3, 1}, {i64});
  using Op = std::function<Tensor()>;
  const std::map<std::string, Op> ops = {
      {"matmul", [&] { return matmul(m, m.transpose(0, 1)); }},
      {"linear", [&] { return linear(m, m); }},
      {"conv2d", [&] { return conv2d(x4, w4); }},
      {"conv_transpose2d", [&] { return conv_transpose2d(x4, wt); }},
      {"softmax", [&] { return softmax(h, -1); }},
      {"log_softmax", [&] { return log_softmax(h, -1); }},
      {"exp", [&] { return exp(h); }},
      {"log", [&] { return log(abs(h) + 1.0); }},
      {"pow", [&] { return pow(h, 2.0); }},
      {"sum", [&] { return sum(h); }},
      {"mean", [&] { return mean(h); }},
      {"cross_entropy", [&] { return cross_entropy(h, lab); }},
      {"bce_with_logits", [&] { return bce_with_logits(h, v.to(f16)); }},
      {"mse_loss", [&] { return mse_loss(h, h); }},
      {"soft_dice", [&] { return soft_dice(softmax(h, -1).to(f16), lab); }},
      {"add", [&] { return h + h; }},
      {"sub", [&] { return h - h; }},
      {"mul", [&] { return h * h; }},
      {"div", [&] { return h / (abs(h) + 1.0); }},
      {"where", [&] { return where(h > 0.0, h, h); }},
      {"cat", [&] { return cat({h, h}, 0); }},
      {"stack", [&] { return stack({h, h}, 0); }},
      {"relu", [&] { return relu(h); }},
      {"leaky_relu", [&] { return leaky_relu(h); }},
      {"sigmoid", [&] { return sigmoid(h); }},
      {"tanh", [&] { return tanh(h); }},
      {"gelu", [&] { return gelu(h); }},
      {"max_pool2d", [&] { return max_pool2d(x4.to(f16)); }},
      {"avg_pool2d", [&] { return avg_pool2d(x4.to(f16)); }},
      {"upsample", [&] { return upsample(x4.to(f16)); }},
      {"dropout", [&] { return dropout(h, 0.5, true); }},
      {"pad", [&] { return pad(h, {1, 0}, {0, 1}); }},
      {"views", [&] { return h.transpose(0, 1).reshape({12}); }},
      {"bmm", [&] { return bmm(m.unsqueeze(0), m.transpose(0, 1).unsqueeze(0)); }},
      {"scaled_dot_product_attention", [&] { return scaled_dot_product_attention(m, m, m); }},
      {"layer_norm", [&] { return layer_norm(h, {4}); }},
      {"gelu_tanh", [&] { return gelu_tanh(h); }},
      {"index_select", [&] { return index_select(h, 0, tensor({0, 2}, {i64})); }},
      {"gather", [&] { return gather(h, 1, zeros({3, 2}, {i64})); }},
      {"embedding", [&] { return embedding(h, tensor({0, 2}, {i64})); }},
      {"sort", [&] { return sort(h).values; }},
      {"topk", [&] { return topk(h, 2).values; }},
      {"masked_fill", [&] { return masked_fill(h, h > 0.0, 0); }},
      {"tril", [&] { return tril(h); }},
      {"triu", [&] { return triu(h); }},
  };
  for (DType low : {f16, bf16}) {
    amp::Autocast ac(low);
    for (const amp::OpPrecision& row : amp::precision_table()) {
      INFO(row.op << " under autocast " << dtype_name(low));
      if (std::string(row.op) == "batch_norm" || std::string(row.op) == "batch_norm_relu") {
        // Mixed by design: f32 statistics inside, the input's dtype out.
        Tensor y = std::string(row.op) == "batch_norm" ? batch_norm(h, ones({4}), zeros({4}), Tensor(), Tensor(), true)
                                                       : batch_norm_relu(h, ones({4}), zeros({4}), Tensor(), Tensor(), true);
        CHECK(y.dtype() == f16);
        continue;
      }
      REQUIRE(ops.count(row.op) == 1);
      const DType got = ops.at(row.op)().dtype();
      switch (row.cls) {
        case PrecisionClass::lower: CHECK(got == low); break;
        case PrecisionClass::fp32: CHECK(got == f32); break;
        case PrecisionClass::promote:
        case PrecisionClass::follow: CHECK(got == f16); break;  // inputs were f16
      }
    }
  }
  CHECK(ops.size() + 2 == amp::precision_table().size());
  CHECK_THROWS_WITH(amp::precision_class_of("fft"), Catch::Contains("not in the precision table"));
}

TEST_CASE("the cast table shows what casts give for values the target cannot hold", "[precision_table][scalar]") {
  const std::string t = amp::cast_table_markdown();
  // Computed by casting, so these rows are the casts' behaviour: saturation, NaN -> 0, IEEE overflow.
  CHECK_THAT(t, Catch::Contains("| 1e+30 | 9223372036854775807 | true | inf |"));
  CHECK_THAT(t, Catch::Contains("| -inf | -9223372036854775808 | true | -inf |"));
  CHECK_THAT(t, Catch::Contains("| nan | 0 | true | nan |"));
  CHECK_THAT(t, Catch::Contains("| -2.75 | -2 | true | -2.75 |"));
}
