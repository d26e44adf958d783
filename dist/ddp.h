// dist::DistributedDataParallel: data-parallel training of an nn::Module. Construction
// broadcasts rank 0's parameters and buffers; during backward, gradients are averaged
// over the ranks in buckets (~25 MB, reverse registration order) started from the
// autograd "grad ready" hook as soon as a bucket is complete, so communication overlaps
// the rest of backward; the last bucket's arrival waits for all of them. See docs/distributed.md.
// The module's parameters and buffers live on one device: the CPU (MPI backend) or this
// rank's GPU (NCCL backend, dist::local_device()).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "dist/process_group.h"
#include "nn/module.h"

namespace hg::dist {

struct DdpOptions {
  double bucket_mb = 25.0;
  // PyTorch's fp16_compress_hook: f32 gradients are divided by the world size, rounded to
  // this dtype (f16 or bf16), summed on the wire in it (half the bytes) and widened back.
  // nullopt: gradients travel and are summed in the dtype they are stored in.
  std::optional<DType> compress;
  bool broadcast_buffers = true;  // at construction, with the parameters
};

struct DdpStats {
  int64_t buckets = 0;
  int64_t bytes_per_step = 0;  // gradient bytes each rank sends into the all-reduces per step
};

class DistributedDataParallel {
 public:
  // No group: group_for(the module's device). A group that does not reduce tensors on
  // that device (MPI with cuda parameters, NCCL with CPU ones) is refused, as are
  // parameters spread over several devices.
  explicit DistributedDataParallel(nn::Module& module, std::shared_ptr<ProcessGroup> group = nullptr,
                                   DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The module's forward. Refused while the previous backward's averaging is unfinished
  // (a parameter got no gradient: call finish_gradient_sync() after such a backward).
  Tensor operator()(const Tensor& x);
  // Completes this step's averaging: buckets still waiting for gradients are sent with
  // zeros for the parameters that got none (the same on every rank), then all are waited
  // on. A no-op when backward already completed every bucket (the usual case).
  void finish_gradient_sync();
  // Off: backward accumulates local gradients without communicating (PyTorch's no_sync,
  // for gradient accumulation); turn it on again before the micro-batch whose backward
  // should average the accumulated sum.
  void set_sync(bool on) { sync_ = on; }

  nn::Module& module() { return module_; }
  ProcessGroup& group() { return *group_; }
  const DdpStats& stats() const { return stats_; }

 private:
  struct Bucket {
    std::vector<int> params;  // indices into params_
    DType dtype = DType::f32;
    int64_t numel = 0;
    int ready = 0;
    Tensor flat;
    std::unique_ptr<Work> work;
  };
  void on_grad_ready(int param);
  void launch_ready_buckets();
  void launch(Bucket& b);
  void complete_all();

  nn::Module& module_;
  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  std::vector<Tensor> params_;
  std::vector<int> bucket_of_;
  std::vector<bool> arrived_;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> hooks_;
  size_t next_launch_ = 0;
  int arrived_count_ = 0;
  bool sync_ = true;
  DdpStats stats_;
};

}  // namespace hg::dist
