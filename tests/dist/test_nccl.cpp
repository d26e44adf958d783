// The nccl backend under mpirun -np 2 in the emulation build, loaded from the fake libnccl
// (fake_nccl.cpp, over MPI on the emulated devices' host memory): bootstrap, dtype mapping,
// streams, values by hand, DDP, SyncBatchNorm and the loss scaler over it, and the errors a
// user can meet.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "cuda/stream.h"
#include "dist_models.h"
#include "fake_nccl_log.h"
#include "dist/amp_sync.h"
#include "dist/ddp.h"
#include "dist/nccl_api.h"
#include "dist/nccl_group.h"
#include "sync_bn_check.h"
#include "tests/env_scope.h"

using namespace hg;
using namespace hg::dist_test;
using Catch::Contains;
using hg::dist::ReduceOp;
using hg::test::EnvScope;

namespace {

// The fake library for every group these tests make (a run may name another file).
void use_fake_nccl() { setenv("HG_NCCL_LIBRARY", HG_FAKE_NCCL, 0); }

std::shared_ptr<dist::ProcessGroup> nccl() {
  use_fake_nccl();
  return dist::nccl_group();
}

FakeNcclLog& fake_log() {
  void* h = dlopen(std::getenv("HG_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h);  // loaded by the group already
  auto* log = reinterpret_cast<FakeNcclLog* (*)()>(dlsym(h, "fake_nccl_log"));
  REQUIRE(log);
  return *log();
}

}  // namespace

TEST_CASE("nccl bootstrap: rank 0 makes the unique id, every rank joins on its tensors' device", "[nccl]") {
  use_fake_nccl();
  auto pg = dist::new_nccl_group(dist::default_group());
  REQUIRE(pg->size() == 2);
  CHECK(pg->backend() == "nccl");
  const Device dev = dist::local_device();
  CHECK(dev == Device::cuda(pg->rank()));  // mpirun's local ranks 0 and 1: one emulated GPU each
  Tensor t = full({3}, 1.0 + pg->rank(), {f32, dev});
  FakeNcclLog before = fake_log();
  pg->all_reduce(t, ReduceOp::sum);  // the first collective makes the communicator
  CHECK(t.to_vector<double>() == std::vector<double>{3, 3, 3});
  const FakeNcclLog& after = fake_log();
  // Only rank 0 asks for an id; the fake refuses an id that differs between ranks.
  CHECK(after.unique_ids - before.unique_ids == (pg->rank() == 0 ? 1 : 0));
  CHECK(after.comms - before.comms == 1);
  CHECK(after.init_device == dev.index);
  pg->all_reduce(t, ReduceOp::sum);
  CHECK(fake_log().comms - before.comms == 1);  // made once
  Tensor elsewhere = zeros({1}, {f32, Device::cuda(1 - dev.index)});
  CHECK_THROWS_WITH(pg->all_reduce(elsewhere), Contains("one GPU per rank") && Contains("cuda:" + std::to_string(dev.index)));
}

TEST_CASE("nccl all_reduce/broadcast/all_gather: hand-computed values, NCCL dtypes per halfgrad dtype", "[nccl]") {
  auto pg = nccl();
  const Device dev = dist::local_device();
  const double r = pg->rank();
  const bool r1 = pg->rank() == 1;
  for (DType dt : {f32, f64}) {
    auto mine = [&] { return tensor({1 + 9 * r, -2 + 5 * r, 5 - 10 * r}, {dt}).to(dev); };
    Tensor s = mine(), mx = mine(), mn = mine(), av = mine();
    pg->all_reduce(s, ReduceOp::sum);
    CHECK(fake_log().last_type == (dt == f32 ? dist::nccl::float32 : dist::nccl::float64));
    CHECK(fake_log().last_op == dist::nccl::sum);
    pg->all_reduce(mx, ReduceOp::max);
    CHECK(fake_log().last_op == dist::nccl::max);
    pg->all_reduce(mn, ReduceOp::min);
    CHECK(fake_log().last_op == dist::nccl::min);
    pg->all_reduce(av, ReduceOp::avg);
    CHECK(s.to_vector<double>() == std::vector<double>{11, 1, 0});
    CHECK(mx.to_vector<double>() == std::vector<double>{10, 3, 5});
    CHECK(mn.to_vector<double>() == std::vector<double>{1, -2, -5});
    CHECK(av.to_vector<double>() == std::vector<double>{5.5, 0.5, 0});
    CHECK(s.device() == dev);
  }
  // f16 at 1: 1 + 2^-11 ties to 1; 60000 + 10000 overflows to inf. avg of 0 and 3: 1.5.
  Tensor h = tensor({r1 ? std::ldexp(1.0, -11) : 1.0, r1 ? 10000.0 : 60000.0}, {f16}).to(dev);
  pg->all_reduce(h, ReduceOp::sum);
  CHECK(fake_log().last_type == dist::nccl::float16);
  CHECK(h.to_vector<double>()[0] == 1.0);
  CHECK(std::isinf(h.to_vector<double>()[1]));
  Tensor a = tensor({r1 ? 3.0 : 0.0}, {f16}).to(dev);
  pg->all_reduce(a, ReduceOp::avg);
  CHECK(a.item<double>() == 1.5);
  Tensor b = tensor({r1 ? 3 * std::ldexp(1.0, -9) : 1.0}, {bf16}).to(dev);  // 1.005859375 -> bf16 1 + 2^-7
  pg->all_reduce(b, ReduceOp::sum);
  CHECK(fake_log().last_type == dist::nccl::bfloat16);
  CHECK(b.item<double>() == 1 + std::ldexp(1.0, -7));
  Tensor i = from_data<int64_t>({int64_t(1) << 40, 7 * static_cast<int64_t>(r)}, {2}).to(dev);
  pg->all_reduce(i, ReduceOp::sum);
  CHECK(fake_log().last_type == dist::nccl::int64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{int64_t(1) << 41, 7});
  Tensor any = gt(tensor({r, 0.0}, {f32}), 0.5).to(dev);  // b8 {rank 1, false}
  pg->all_reduce(any, ReduceOp::max);
  CHECK(fake_log().last_type == dist::nccl::uint8);
  CHECK(any.to_vector<double>() == std::vector<double>{1, 0});

  Tensor bc = tensor({10 * r + 1, -r}, {f32}).to(dev);
  pg->broadcast(bc, 1);
  CHECK(bc.to_vector<double>() == std::vector<double>{11, -1});
  std::vector<Tensor> all = pg->all_gather(tensor({r, r + 0.5}, {f32}).to(dev));
  REQUIRE(all.size() == 2);
  CHECK(all[0].to_vector<double>() == std::vector<double>{0, 0.5});
  CHECK(all[1].to_vector<double>() == std::vector<double>{1, 1.5});
  CHECK(all[1].device() == dev);
  pg->barrier();
}

TEST_CASE("nccl collectives are queued on the current stream of the tensor's device", "[nccl]") {
  auto pg = nccl();
  const Device dev = dist::local_device();
  Tensor t = full({4}, 2.0, {f32, dev});
  pg->all_reduce(t, ReduceOp::sum);
  CHECK(fake_log().last_stream == nullptr);  // the default stream
  cuda::Stream side = cuda::new_stream(dev.index);
  {
    cuda::StreamGuard on(side);
    Tensor u = full({4}, 1.0 + pg->rank(), {f32, dev});
    auto work = pg->all_reduce_async(u, ReduceOp::avg);
    CHECK(fake_log().last_stream == side.handle());
    work->wait();  // orders the current stream after the collective, on the device
    CHECK(work->test());
    CHECK(u.to_vector<double>() == std::vector<double>(4, 1.5));
  }
  CHECK(t.to_vector<double>() == std::vector<double>(4, 4.0));
}

TEST_CASE("DDP over nccl: gradients equal the mean of both ranks' gradients computed independently", "[nccl]") {
  nccl();
  dist::ProcessGroup& host = *dist::default_group();
  const int rank = host.rank(), B = 4;
  const Device dev = dist::local_device();
  Generator g(21);
  Tensor X = randn({3, 2 * B, 8}, {f32}, &g), Y = randn({3, 2 * B, 2}, {f32}, &g);
  auto ref = make_mlp(5);  // rank 0's initial weights, which DDP broadcasts
  ref->to(f64);
  auto m = make_mlp(5 + 100 * static_cast<uint64_t>(rank));
  m->to(dev);
  dist::DistributedDataParallel ddp(*m);  // no group: cuda parameters pick the nccl backend
  CHECK(ddp.group().backend() == "nccl");
  optim::SGD opt(m->named_parameters(), optim::SGDOptions{.lr = 0.1});
  optim::SGD opt_ref(ref->named_parameters(), optim::SGDOptions{.lr = 0.1});
  for (int k = 0; k < 3; ++k) {
    INFO("step " << k);
    Tensor x = X.select(0, k), y = Y.select(0, k);
    mse_loss(ddp(x.narrow(0, rank * B, B).to(dev)), y.narrow(0, rank * B, B).to(dev)).backward();
    // The reference in f64 on the CPU: the mean of the two ranks' half-batch gradients.
    for (int r = 0; r < 2; ++r)
      (mse_loss((*ref)(x.narrow(0, r * B, B).to(f64)), y.narrow(0, r * B, B).to(f64)) * 0.5).backward();
    auto mine = m->named_parameters(), want = ref->named_parameters();
    for (size_t p = 0; p < mine.size(); ++p) {
      INFO(mine[p].first);
      CHECK(mine[p].second.grad().device() == dev);
      std::vector<double> got = mine[p].second.grad().to_vector<double>(), exp = want[p].second.grad().to_vector<double>();
      double worst = 0;
      for (size_t e = 0; e < got.size(); ++e)
        worst = std::max(worst, std::abs(got[e] - exp[e]) / std::max(1e-2, std::abs(exp[e])));
      CHECK(worst < 1e-4);  // f32 rounding of a 4-sample MLP's gradients, not f16's
    }
    opt.step();
    opt.zero_grad();
    opt_ref.step();
    opt_ref.zero_grad();
    CHECK(same_on_all_ranks(host, *m));
  }
}

TEST_CASE("agree_on_overflow over nccl: one rank overflows, both skip that step on the device's flag", "[nccl]") {
  nccl();
  dist::ProcessGroup& host = *dist::default_group();
  const Device dev = dist::local_device();
  auto m = make_mlp(9);
  m->to(dev);
  Generator g(3);
  Tensor X = randn({4, 4, 8}, {f32}, &g), Y = randn({4, 4, 2}, {f32}, &g);
  optim::SGD opt(m->named_parameters(), optim::SGDOptions{.lr = 0.05});
  amp::GradScalerOptions so;
  so.init_scale = 1024;
  so.growth_interval = 2;
  amp::GradScaler scaler(so, dev);
  dist::agree_on_overflow(scaler);  // no group: the flag is on cuda, so nccl
  std::vector<bool> skipped;
  std::vector<double> scales;
  for (int k = 0; k < 4; ++k) {
    Tensor x = X.select(0, k);
    if (k == 2 && host.rank() == 1) x = x * 1e6;  // f16 inf in rank 1's forward only
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss((*m)(x.to(dev)).to(f32), Y.select(0, k).to(dev));
    }
    scaler.scale(loss).backward();
    const int before = fake_log().collectives;
    auto result = scaler.step(opt);
    CHECK(fake_log().collectives - before == 1);  // the found-inf flag's all-reduce
    CHECK(fake_log().last_op == dist::nccl::max);
    CHECK(fake_log().last_type == dist::nccl::float32);
    skipped.push_back(result.skipped());
    scaler.update();
    scales.push_back(scaler.get_scale());
    opt.zero_grad();
  }
  CHECK(skipped == std::vector<bool>{false, false, true, false});
  CHECK(scales == std::vector<double>{1024, 2048, 1024, 1024});
  CHECK(same_on_all_ranks(host, *m));
}

TEST_CASE("SyncBatchNorm over nccl: 2 ranks x batch 3 on their GPUs train like one process on batch 6", "[nccl]") {
  nccl();
  check_sync_bn_trains_like_one_process(dist::local_device());
}

TEST_CASE("nccl errors: missing library, a library without NCCL, failed init, wrong devices and dtypes", "[nccl]") {
  auto pg = nccl();
  {
    EnvScope env("HG_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
    CHECK_THROWS_WITH(dist::new_nccl_group(dist::default_group()),
                      Contains("needs NCCL") && Contains("/nonexistent/libnccl.so.2") && Contains("HG_NCCL_LIBRARY"));
  }
  {
    EnvScope env("HG_NCCL_LIBRARY", "libm.so.6");
    CHECK_THROWS_WITH(dist::new_nccl_group(dist::default_group()), Contains("has no function ncclGetVersion"));
  }
  {
    EnvScope env("FAKE_NCCL_FAIL_INIT", "1");
    auto failing = dist::new_nccl_group(dist::default_group());
    Tensor t = zeros({2}, {f32, dist::local_device()});
    CHECK_THROWS_WITH(failing->all_reduce(t), Contains("ncclCommInitRank failed: unhandled system error"));
  }
  Tensor cpu = zeros({2});
  CHECK_THROWS_WITH(pg->all_reduce(cpu), Contains("nccl backend reduces cuda tensors") && Contains("MPI"));
  Tensor i = zeros({2}, {i64, dist::local_device()});
  CHECK_THROWS_WITH(pg->all_reduce(i, ReduceOp::avg), Contains("avg needs a floating dtype"));
  Tensor f = zeros({2}, {f32, dist::local_device()});
  CHECK_THROWS_WITH(pg->broadcast(f, 2), Contains("root 2 is not a rank"));
  // DDP: a CPU module on nccl, a cuda module on MPI, and a module split over devices.
  auto on_cpu = make_mlp(1);
  CHECK_THROWS_WITH(dist::DistributedDataParallel(*on_cpu, pg), Contains("CPU parameters need the MPI backend"));
  auto on_gpu = make_mlp(1);
  on_gpu->to(dist::local_device());
  CHECK_THROWS_WITH(dist::DistributedDataParallel(*on_gpu, dist::default_group()),
                    Contains("the mpi backend does not reduce tensors there") && Contains("nccl"));
  auto split = make_mlp(1);
  split->named_children()[0].second->to(dist::local_device());
  CHECK_THROWS_WITH(dist::DistributedDataParallel(*split), Contains("must all be on this rank's one device"));
}
