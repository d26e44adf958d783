// DistributedDataParallel: bucket assignment, the per-parameter "grad ready" hooks that
// start a bucket's all-reduce once all its gradients have arrived (strictly in bucket
// order, so every rank issues the same collectives in the same order), and the copy back;
// the backend follows the module's device (MPI for CPU parameters, NCCL for cuda ones).
#include "dist/ddp.h"

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/grad_ready.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace hg::dist {

namespace {
// The one device all of the module's parameters and buffers live on.
Device module_device(nn::Module& m) {
  std::optional<std::pair<std::string, Device>> first;
  auto visit = [&](const std::string& name, const Tensor& t) {
    if (!first) first.emplace(name, t.device());
    HG_CHECK(t.device() == first->second, "DistributedDataParallel: '", first->first, "' is on ", first->second, " and '",
             name, "' on ", t.device(), "; a replica's parameters and buffers must all be on this rank's one device");
  };
  for (auto& [name, p] : m.named_parameters()) visit(name, p);
  for (auto& [name, b] : m.named_buffers()) visit(name, b);
  return first ? first->second : Device::cpu();
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& module, std::shared_ptr<ProcessGroup> group,
                                                 DdpOptions options)
    : module_(module), group_(std::move(group)), options_(options) {
  const Device device = module_device(module_);
  if (!group_) group_ = group_for(device);
  HG_CHECK(group_->supports(device), "DistributedDataParallel: the module is on ", device, " and the ",
           group_->backend(), " backend does not reduce tensors there; ",
           device.is_cuda() ? "cuda parameters need the nccl backend (dist::nccl_group(), or pass no group)"
                            : "CPU parameters need the MPI backend (dist::default_group(), or pass no group)");
  HG_CHECK(options_.bucket_mb > 0, "DistributedDataParallel: bucket_mb must be positive, got ", options_.bucket_mb);
  HG_CHECK(!options_.compress || *options_.compress == DType::f16 || *options_.compress == DType::bf16,
           "DistributedDataParallel: compress must be f16 or bf16, got ", dtype_name(*options_.compress));
  {
    NoGrad ng;
    for (auto& [name, p] : module_.named_parameters()) {
      Tensor t = p;
      group_->broadcast(t, 0);
      if (p.requires_grad()) params_.push_back(p);
      HG_CHECK(!options_.compress || p.dtype() == DType::f32, "DistributedDataParallel: gradient compression takes "
               "f32 gradients; parameter '", name, "' is ", dtype_name(p.dtype()));
    }
    if (options_.broadcast_buffers)
      for (auto& [name, b] : module_.named_buffers()) {
        Tensor t = b;
        group_->broadcast(t, 0);
      }
  }
  // Reverse registration order approximates the order backward produces gradients in;
  // each dtype fills its own open bucket (amp-master mixes f16 convolutions with f32
  // BatchNorm parameters, which would otherwise cut a bucket at every switch).
  const int64_t cap = static_cast<int64_t>(options_.bucket_mb * 1024 * 1024);
  bucket_of_.assign(params_.size(), -1);
  arrived_.assign(params_.size(), false);
  std::map<DType, std::pair<int, int64_t>> open;  // dtype -> (its bucket being filled, bytes in it)
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    DType wire = options_.compress ? *options_.compress : params_[i].dtype();
    int64_t nb = params_[i].numel() * static_cast<int64_t>(dtype_size(wire));
    auto it = open.find(wire);
    if (it == open.end() || it->second.second + nb > cap) {
      buckets_.emplace_back();
      buckets_.back().dtype = wire;
      it = open.insert_or_assign(wire, std::make_pair(static_cast<int>(buckets_.size()) - 1, int64_t{0})).first;
    }
    Bucket& b = buckets_[it->second.first];
    b.params.push_back(i);
    b.numel += params_[i].numel();
    bucket_of_[i] = it->second.first;
    it->second.second += nb;
    stats_.bytes_per_step += nb;
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
  // One process without a communication backend has nothing to average (a 1-rank MPI or
  // NCCL group still runs its collectives, which exercises them).
  if (group_->backend() == "single" && !options_.compress) return;
  for (int i = 0; i < static_cast<int>(params_.size()); ++i)
    hooks_.push_back(autograd::add_grad_ready_hook(params_[i], [this, i](const Tensor&) { on_grad_ready(i); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (int64_t h : hooks_) autograd::remove_grad_ready_hook(h);
}

Tensor DistributedDataParallel::operator()(const Tensor& x) {
  HG_CHECK(arrived_count_ == 0, "DistributedDataParallel: the last backward gave gradients to only ", arrived_count_,
           " of ", params_.size(), " parameters, so their averaging never finished; call finish_gradient_sync() after "
           "such a backward (before the optimizer step)");
  return module_(x);
}

void DistributedDataParallel::on_grad_ready(int param) {
  if (!sync_) return;
  HG_CHECK(!arrived_[param], "DistributedDataParallel: parameter ", param, " received a second gradient before the "
           "averaging of the first finished (two backward passes in one step: use set_sync(false) for all but the last)");
  arrived_[param] = true;
  ++arrived_count_;
  ++buckets_[bucket_of_[param]].ready;
  launch_ready_buckets();
  if (arrived_count_ == static_cast<int>(params_.size())) complete_all();
}

void DistributedDataParallel::launch_ready_buckets() {
  for (size_t k = 0; k < next_launch_; ++k)
    if (buckets_[k].work) buckets_[k].work->test();  // lets MPI progress earlier buckets
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready == static_cast<int>(buckets_[next_launch_].params.size()))
    launch(buckets_[next_launch_++]);
}

// Copies with halfgrad's ops (on the parameters' device and its current stream, where
// NCCL then runs): compression is the f32 division by the world size, rounded once into
// the wire dtype by copy_.
void DistributedDataParallel::launch(Bucket& b) {
  NoGrad ng;
  if (!b.flat.defined()) b.flat = empty({b.numel}, {b.dtype, params_[b.params[0]].device()});
  int64_t off = 0;
  for (int i : b.params) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) p.set_grad(zeros_like(p));  // unused on this step: contributes zeros
    const Tensor& g = p.grad();
    HG_CHECK(g.dtype() == p.dtype(), "DistributedDataParallel: a gradient of dtype ", dtype_name(g.dtype()),
             " for a parameter of dtype ", dtype_name(p.dtype()), "; gradients are averaged in their parameter's dtype");
    Tensor slot = b.flat.narrow(0, off, g.numel()).view(g.shape());
    copy_(slot, options_.compress ? div(g, static_cast<double>(group_->size())) : g);
    off += g.numel();
  }
  b.work = group_->all_reduce_async(b.flat, options_.compress ? ReduceOp::sum : ReduceOp::avg);
}

void DistributedDataParallel::complete_all() {
  NoGrad ng;
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    int64_t off = 0;
    for (int i : b.params) {
      const Tensor& g = params_[i].grad();
      copy_(g, b.flat.narrow(0, off, g.numel()).view(g.shape()));  // widens a compressed f16/bf16 exactly
      off += g.numel();
    }
    b.ready = 0;
  }
  arrived_.assign(params_.size(), false);
  arrived_count_ = 0;
  next_launch_ = 0;
}

void DistributedDataParallel::finish_gradient_sync() {
  if (arrived_count_ == 0) return;
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  complete_all();
}

}  // namespace hg::dist
