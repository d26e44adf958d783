// Parameter initialisation as PyTorch's torch.nn.init does it, for halfgrad's weight
// layouts: axis 0 counts outputs, the last axis inputs, the axes between are the
// receptive field (Linear [out, in], Conv2d [K, R, S, C], ConvTranspose2d [C_in, R, S, C_out]).
#pragma once
#include <utility>

#include "framework/generator.h"
#include "framework/tensor.h"

namespace hg::nn::init {

enum class FanMode : uint8_t { fan_in, fan_out };
enum class Nonlinearity : uint8_t { linear, relu, leaky_relu };

// fan_in = product of all axes but the first; fan_out = axis 0 times the receptive field.
// ConvTranspose2d's [C_in, R, S, C_out/groups] thus gets fan_in = R*S*C_out/groups, the
// value PyTorch computes from its [C_in, C_out/groups, R, S] layout.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& w);
// The recommended gain: 1 (linear), sqrt(2) (relu), sqrt(2 / (1 + a^2)) (leaky_relu).
double calculate_gain(Nonlinearity nonlinearity, double a = 0.0);

// Each writes in place (the tensor keeps its dtype; values round once into it), records
// nothing in the autograd graph and draws from `gen` (the default generator if null).
void uniform_(const Tensor& t, double lo = 0.0, double hi = 1.0, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// U(-b, b) with b = gain * sqrt(3 / fan); a = sqrt(5) gives PyTorch's default layer init, b = 1/sqrt(fan_in).
void kaiming_uniform_(const Tensor& w, double a = 0.0, FanMode mode = FanMode::fan_in,
                      Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* gen = nullptr);
// N(0, std^2) with std = gain / sqrt(fan).
void kaiming_normal_(const Tensor& w, double a = 0.0, FanMode mode = FanMode::fan_in,
                     Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* gen = nullptr);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& w, double gain = 1.0, Generator* gen = nullptr);
// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(const Tensor& w, double gain = 1.0, Generator* gen = nullptr);

}  // namespace hg::nn::init
