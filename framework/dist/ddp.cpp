// DistributedDataParallel: bucket assignment, the per-parameter "grad ready" hooks that
// start a bucket's all-reduce once all its gradients have arrived (strictly in bucket
// order, so every rank issues the same collectives in the same order), and the copy back.
#include "framework/dist/ddp.h"

#include <cstring>
#include <map>
#include <utility>

#include "framework/bfloat16.h"
#include "framework/error.h"
#include "framework/grad_ready.h"
#include "framework/half.h"

namespace hg::dist {

namespace {
// f32 gradient / world size, rounded once into the 2-byte wire dtype, and back.
void compress_into(const float* g, uint16_t* out, int64_t n, int world, DType dt) {
  for (int64_t i = 0; i < n; ++i) {
    float v = g[i] / static_cast<float>(world);
    out[i] = dt == DType::f16 ? float_to_half_bits(v) : float_to_bf16_bits(v);
  }
}
void decompress_into(const uint16_t* in, float* g, int64_t n, DType dt) {
  for (int64_t i = 0; i < n; ++i) g[i] = dt == DType::f16 ? half_bits_to_float(in[i]) : bf16_bits_to_float(in[i]);
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& module, std::shared_ptr<ProcessGroup> group,
                                                 DdpOptions options)
    : module_(module), group_(std::move(group)), options_(options) {
  HG_CHECK(group_, "DistributedDataParallel: no process group");
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
  if (group_->size() == 1 && !options_.compress) return;  // nothing to average
  for (auto& [name, p] : module_.named_parameters())
    HG_CHECK(p.device().is_cpu(), "DistributedDataParallel: parameter '", name, "' is on ", p.device(),
             "; the ", group_->backend(), " backend averages CPU tensors (a GPU backend, NCCL, is not implemented)");
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

void DistributedDataParallel::launch(Bucket& b) {
  if (!b.flat.defined()) b.flat = empty({b.numel}, {b.dtype});
  int64_t off = 0;
  const size_t wire = dtype_size(b.dtype);
  for (int i : b.params) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) p.set_grad(zeros_like(p));  // unused on this step: contributes zeros
    if (!p.grad().is_contiguous()) p.set_grad(p.grad().contiguous());
    const Tensor& g = p.grad();
    HG_CHECK(g.dtype() == p.dtype(), "DistributedDataParallel: a gradient of dtype ", dtype_name(g.dtype()),
             " for a parameter of dtype ", dtype_name(p.dtype()), "; gradients are averaged in their parameter's dtype");
    char* dst = static_cast<char*>(b.flat.data_ptr()) + off * static_cast<int64_t>(wire);
    if (options_.compress)
      compress_into(g.data<float>(), reinterpret_cast<uint16_t*>(dst), g.numel(), group_->size(), b.dtype);
    else
      std::memcpy(dst, g.data_ptr(), static_cast<size_t>(g.numel()) * wire);
    off += g.numel();
  }
  b.work = group_->all_reduce_async(b.flat, options_.compress ? ReduceOp::sum : ReduceOp::avg);
}

void DistributedDataParallel::complete_all() {
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    int64_t off = 0;
    const size_t wire = dtype_size(b.dtype);
    for (int i : b.params) {
      const Tensor& g = params_[i].grad();
      const char* src = static_cast<const char*>(b.flat.data_ptr()) + off * static_cast<int64_t>(wire);
      if (options_.compress)
        decompress_into(reinterpret_cast<const uint16_t*>(src), g.data<float>(), g.numel(), b.dtype);
      else
        std::memcpy(g.data_ptr(), src, static_cast<size_t>(g.numel()) * wire);
      g.bump_version();
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
