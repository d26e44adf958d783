// dist::SyncBatchNorm: BatchNorm2d whose training statistics are those of the global batch
// (all ranks), as torch.nn.SyncBatchNorm: with it, N ranks x batch B train like one process
// with batch N x B also for models with batch norm. Same parameters and buffers as
// BatchNorm2d, so checkpoints load into either.
#pragma once
#include <memory>

#include "dist/process_group.h"
#include "nn/layers.h"

namespace hg::dist {

class SyncBatchNorm : public nn::BatchNorm2d {
 public:
  // No group: group_for(the input's device) at each forward (MPI on the CPU, nccl on a GPU).
  explicit SyncBatchNorm(int64_t channels, double eps = 1e-5, double momentum = 0.1,
                         std::shared_ptr<ProcessGroup> group = nullptr);
  std::string type_name() const override { return "SyncBatchNorm"; }

 protected:
  // Training: per-channel sum and sum of squares (f64) all-reduced in forward; in backward
  // the sums of dy and dy * x_hat all-reduced, so the input gradient is the global
  // batch's. Evaluation: BatchNorm2d's (running statistics, no communication).
  Tensor forward_impl(const Tensor& x) override;

 private:
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace hg::dist
