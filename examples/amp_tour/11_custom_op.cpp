// Tour step 11 (docs/amp.md): a custom op under autocast. Its inputs arrive as they are
// (f16 here); ops inside forward run without a graph. To give the op a precision
// class, pass its inputs through hg::autocast(class, inputs) before apply(): the casts
// are Cast nodes, so the gradient returns to each input in the input's dtype.
#include <cstdio>
#include <string>

#include "halfgrad.h"

using namespace hg;

namespace {

std::string values(const Tensor& t) {
  std::string s;
  for (double v : t.to_vector<double>()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%g", s.empty() ? "" : ", ", v);
    s += buf;
  }
  return "[" + s + "]";
}

// y = x^3 with its own backward, 3 x^2 g.
struct Cube : autograd::Function<Cube> {
  static constexpr const char* name = "cube";
  static Tensor forward(autograd::FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return mul(mul(in[0], in[0]), in[0]);
  }
  static TensorList backward(autograd::FunctionCtx& ctx, const Tensor& g) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(mul(mul(x, x), 3.0), g)};
  }
};

}  // namespace

int main() {
  Tensor x = tensor({2.0, 50.0}).to(f16).set_requires_grad();
  {
    amp::Autocast ac(f16);
    const Tensor y = Cube::apply({x});
    std::printf("as given:       output %s %s\n", dtype_name(y.dtype()), values(y).c_str());
    const Tensor z = Cube::apply(autocast(PrecisionClass::fp32, {x}));
    std::printf("class fp32:     output %s %s\n", dtype_name(z.dtype()), values(z).c_str());
    sum(z).backward();
  }
  std::printf("x.grad:         %s %s (3 x^2; 7500 fits in f16)\n", dtype_name(x.grad().dtype()),
              values(x.grad()).c_str());
  return 0;
}
