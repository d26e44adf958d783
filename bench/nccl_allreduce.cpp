// The nccl backend on this machine's GPUs (bench/gpu_check.sh's nccl stage): a DDP training
// step over nccl whose averaged gradients must equal the mean of every rank's own gradients
// and leave bit-identical replicas, then the bus bandwidth of an f32 all-reduce (64 MiB by
// default; nccl-tests' busbw = bytes / time x 2(n-1)/n), timed with CUDA events.
//   [mpirun -np N] nccl_allreduce [--mib M] [--iters K]   one GPU per rank (dist::local_device)
//   nccl_allreduce --probe    prints the NCCL version and whether MPI is built; exit 3 without NCCL
// Under the CPU emulation it runs against HG_NCCL_LIBRARY (the tests' fake) and its timings mean nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "dist/ddp.h"
#include "dist/nccl_group.h"
#include "halfgrad.h"

using namespace hg;

namespace {

std::vector<double> gradients(nn::Module& m) {
  std::vector<double> out;
  for (auto& [name, p] : m.named_parameters()) {
    std::vector<double> g = p.grad().to_vector<double>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

// Every rank's gradient of its own batch, gathered on the host, averaged in f64.
std::vector<double> mean_over_ranks(dist::ProcessGroup& host, const std::vector<double>& mine) {
  std::vector<Tensor> all = host.all_gather(from_data<double>(mine, {static_cast<int64_t>(mine.size())}));
  std::vector<double> mean(mine.size(), 0.0);
  for (const Tensor& t : all) {
    std::vector<double> v = t.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) mean[i] += v[i] / static_cast<double>(all.size());
  }
  return mean;
}

// One DDP step of an MLP on this rank's batch; false (with a message) when the averaged
// gradients or the replicas are wrong.
bool ddp_step(dist::ProcessGroup& host, std::shared_ptr<dist::ProcessGroup> nccl, const Device& dev) {
  manual_seed(1 + static_cast<uint64_t>(host.rank()));  // replicas start apart: DDP broadcasts rank 0's
  nn::Sequential m(std::make_shared<nn::Linear>(128, 256), std::make_shared<nn::ReLU>(),
                   std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::ReLU>(),
                   std::make_shared<nn::Linear>(256, 10));
  m.to(dev);
  dist::DistributedDataParallel ddp(m, nccl);
  optim::SGD opt(m.named_parameters(), optim::SGDOptions{.lr = 0.01});
  Generator g(100 + static_cast<uint64_t>(host.rank()));
  Tensor x = randn({64, 128}, {f32}, &g).to(dev), y = randn({64, 10}, {f32}, &g).to(dev);
  ddp.set_sync(false);
  mse_loss(ddp(x), y).backward();
  const std::vector<double> want = mean_over_ranks(host, gradients(m));
  opt.zero_grad();
  ddp.set_sync(true);
  mse_loss(ddp(x), y).backward();
  const std::vector<double> got = gradients(m);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1e-3, std::abs(want[i])));
  opt.step();
  // Bitwise replica check: every rank's parameters, gathered on the host.
  std::vector<double> params;
  for (auto& [name, p] : m.named_parameters()) {
    std::vector<double> v = p.to_vector<double>();
    params.insert(params.end(), v.begin(), v.end());
  }
  std::vector<Tensor> all = host.all_gather(from_data<double>(params, {static_cast<int64_t>(params.size())}));
  bool same = true;
  for (const Tensor& t : all) same = same && t.to_vector<double>() == params;
  std::printf("ddp step over nccl: %d rank(s), %zu gradient values, max relative difference to the mean of the "
              "ranks' own gradients %.2e (limit 1e-5); replicas %s after the step\n",
              host.size(), got.size(), worst, same ? "bit-identical" : "DIFFER");
  return worst < 1e-5 && same;
}

// Median ms of one all-reduce over `iters` timed runs (events around each), after warm-up.
double time_all_reduce(dist::ProcessGroup& nccl, Tensor& buf, int iters) {
  const cuda::Stream s = cuda::current_stream(buf.device().index);
  for (int i = 0; i < 3; ++i) nccl.all_reduce(buf, dist::ReduceOp::sum);
  std::vector<double> ms;
  cuda::Event start, stop;
  for (int i = 0; i < iters; ++i) {
    start.record(s);
    nccl.all_reduce(buf, dist::ReduceOp::sum);
    stop.record(s);
    ms.push_back(start.elapsed_ms(stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int parse_positive(const char* flag, const char* v) {
  char* end = nullptr;
  long x = v ? std::strtol(v, &end, 10) : 0;
  if (!v || *end != '\0' || x <= 0 || x > 1 << 16) {
    std::fprintf(stderr, "nccl_allreduce: %s takes a whole number in 1..65536, got '%s'\n", flag, v ? v : "");
    std::exit(2);
  }
  return static_cast<int>(x);
}

}  // namespace

int main(int argc, char** argv) {
  int mib = 64, iters = 20;
  bool probe = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mib")) mib = parse_positive("--mib", i + 1 < argc ? argv[++i] : nullptr);
    else if (!std::strcmp(argv[i], "--iters")) iters = parse_positive("--iters", i + 1 < argc ? argv[++i] : nullptr);
    else if (!std::strcmp(argv[i], "--probe")) probe = true;
    else {
      std::fprintf(stderr, "usage: nccl_allreduce [--mib M] [--iters K] | --probe\n");
      return 2;
    }
  }
  if (probe) {
    try {
      const int v = dist::nccl_version();
      std::printf("NCCL %d.%d.%d; MPI backend %s\n", v / 10000, v / 100 % 100, v % 100,
                  dist::mpi_built() ? "built" : "not built");
      return 0;
    } catch (const Error& e) {
      std::printf("%s\n", e.what());
      return 3;
    }
  }
  auto host = dist::default_group();
  return dist::run_or_abort(*host, [&] {
    const Device dev = dist::local_device();
    HG_CHECK(dev.index < cuda::device_count(), "rank ", host->rank(), " wants ", dev, " but this machine has ",
             cuda::device_count(), " GPU(s): start at most one rank per GPU");
    auto nccl = dist::nccl_group();  // also on 1 rank: a 1-rank communicator still runs every call
    if (!ddp_step(*host, nccl, dev)) return 1;
    const int64_t n = int64_t{mib} << 18;  // f32 values in `mib` MiB
    Tensor buf = full({n}, 1.0 + host->rank(), {f32, dev});
    nccl->all_reduce(buf, dist::ReduceOp::sum);
    const double expect = host->size() * (host->size() + 1) / 2.0;
    const double first = buf.narrow(0, 0, 1).item<double>(), last = buf.narrow(0, n - 1, 1).item<double>();
    if (first != expect || last != expect) {
      std::printf("all-reduce of %d MiB: got %g .. %g, expected %g everywhere\n", mib, first, last, expect);
      return 1;
    }
    fill_(buf, 1.0 / host->size());  // sums stay 1: no growth to inf over the timed runs
    const double ms = time_all_reduce(*nccl, buf, iters);
    const double bytes = static_cast<double>(n) * 4, algbw = bytes / (ms * 1e-3) / 1e9;
    const double busbw = algbw * 2.0 * (host->size() - 1) / host->size();
    if (host->rank() == 0) {
      std::printf("all-reduce (sum, f32) of %d MiB over nccl on %d rank(s), %s: %.3f ms median of %d; algbw %.1f GB/s, "
                  "busbw %.1f GB/s%s\n",
                  mib, host->size(), cuda::device_name(dev.index).c_str(), ms, iters, algbw, busbw,
                  host->size() == 1 ? " (1 rank: no data crosses a link, so busbw is 0 by its definition)" : "");
      if (cuda::is_emulated()) std::printf("(CPU emulation with HG_NCCL_LIBRARY: these timings mean nothing)\n");
    }
    return 0;
  });
}
