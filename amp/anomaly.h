// Anomaly detection: while a DetectAnomaly guard lives, every op's outputs are checked
// for inf/NaN in forward and every gradient in backward; the first hit throws
// hg::NumericsError naming the op, the module, the direction, dtype, shape, counts and
// the statistics of the op's inputs, so the message alone explains the fault, e.g.
//   backward of conv2d in up2.conv1 produced 12 inf in f16 ...; incoming gradient
//   amax 6.1e+04 x forward input amax 3.2 = 2e+05 exceeds the f16 max 65504
// Each check reads the device back (a synchronisation per op): a debugging mode.
#pragma once
#include <memory>

namespace hg::amp {

struct InputAmaxTable;

struct AnomalyOptions {
  // Also report finite values beyond the f16 range (|x| > 65504) in f32/f64 tensors:
  // finds where an f32 run would overflow if that tensor were f16.
  bool check_f16_range = false;
};

class DetectAnomaly {
 public:
  explicit DetectAnomaly(AnomalyOptions options = {});
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

  static bool active();  // in this thread

 private:
  AnomalyOptions saved_;
  bool was_active_;
  // The outermost guard of a thread owns the forward statistics backward messages cite
  // (nested guards share it); they go when it ends.
  std::unique_ptr<InputAmaxTable> table_;
};

}  // namespace hg::amp
