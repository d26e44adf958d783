// A state dict: named tensors, the unit that modules, optimizers, schedulers and the
// loss scaler save and restore, and that checkpoints and safetensors files hold.
#pragma once
#include <map>
#include <string>

#include "framework/tensor.h"

namespace hg {

using StateDict = std::map<std::string, Tensor>;

}  // namespace hg
