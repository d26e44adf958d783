// segbench under mpirun: rank setup, the data split, DDP around the U-Net, and ending the
// job when one rank fails (the others would otherwise wait in a collective until timeout).
#include "bench/segbench/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "dist/amp_sync.h"
#include "dist/nccl_group.h"
#include "framework/error.h"

namespace hg::segbench {

namespace {
// Rank > 0 writes its (unused) report here; removed when the program ends.
struct Scratch {
  std::string dir;
  ~Scratch() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};
Scratch g_scratch;

int ranks_on_this_machine(int size) {
  const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return s ? std::max(1, std::atoi(s)) : size;
}
}  // namespace

int num_ranks() { return dist::default_group()->size(); }

bool is_report_rank() {
  try {
    return dist::default_group()->rank() == 0;
  } catch (const Error&) {
    return true;  // no group could be made: this process is alone
  }
}

int prepare_distributed(Config& cfg) {
  auto g = dist::default_group();
  if (g->size() == 1) return 1;
  // One GPU per rank (NCCL's rule): --device cuda means this rank's GPU, cuda:<local rank>.
  if (cfg.device == "cuda" || (cfg.device == "auto" && Device::automatic().is_cuda()))
    cfg.device = dist::local_device().str();
  if (cfg.threads == 0)
    cfg.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_on_this_machine(g->size()));
  if (g->rank() != 0) {
    char tmpl[] = "/tmp/segbench-rank-XXXXXX";
    if (mkdtemp(tmpl)) g_scratch.dir = tmpl;
    cfg.out = g_scratch.dir + "/out";
    cfg.dump.clear();
    cfg.progress = false;
    // Its output would repeat rank 0's; errors still reach stderr.
    if (!std::freopen("/dev/null", "w", stdout)) std::perror("segbench: silencing the output of a rank > 0");
  }
  return g->size();
}

uint64_t first_image_of(int64_t step, int64_t per_rank_batch) {
  auto g = dist::default_group();
  return static_cast<uint64_t>((step * g->size() + g->rank()) * per_rank_batch);
}

std::unique_ptr<dist::DistributedDataParallel> attach_distributed(nn::Module& model, amp::GradScaler& scaler) {
  auto g = dist::default_group();
  if (g->size() == 1) return nullptr;
  // No group given: both follow the model's device (MPI for the CPU, nccl for a GPU).
  dist::agree_on_overflow(scaler);
  auto ddp = std::make_unique<dist::DistributedDataParallel>(model);
  std::printf("data-parallel: %d ranks (%s), %lld gradient buckets, %.2f MB of gradients per rank per step\n", g->size(),
              ddp->group().backend().c_str(), static_cast<long long>(ddp->stats().buckets), ddp->stats().bytes_per_step / 1e6);
  return ddp;
}

int end_rank(int code) {
  std::shared_ptr<dist::ProcessGroup> g;
  try {
    g = dist::default_group();
  } catch (const Error&) {
    return code;  // no group could be made (mpirun without MPI in this build): already reported
  }
  if (code != 0 && g->size() > 1) g->abort("segbench failed on this rank (message above); ending every rank", code);
  return code;
}

}  // namespace hg::segbench
