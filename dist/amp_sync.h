// The loss scaler across ranks: every rank must skip the same steps and keep the same
// scale and growth tracker, or the replicas drift apart after one rank's overflow.
#pragma once
#include <memory>

#include "amp/grad_scaler.h"
#include "dist/process_group.h"

namespace hg::dist {

// Installs on `scaler` an all-reduce (max) of each found-inf flag, run as soon as unscale_
// computes it and before step() decides to skip: one small collective per optimizer per
// step and no other host synchronisation (on the nccl backend the flag stays on the device:
// the all-reduce is queued on its stream and step() reads the result there). No group:
// group_for(the flag's device), so cuda gradients agree over NCCL and CPU ones over MPI.
void agree_on_overflow(amp::GradScaler& scaler, std::shared_ptr<ProcessGroup> group = nullptr);

}  // namespace hg::dist
