// The parts of dist::ProcessGroup every backend shares: argument checks, the timeout
// setting, the single-process group, and the choice of backend (default_group, group_for).
#include "dist/process_group.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "dist/mpi_group.h"
#include "dist/nccl_group.h"
#include "framework/error.h"

namespace hg::dist {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::avg: return "avg";
  }
  return "?";
}

namespace detail {
void check_collective_tensor(const char* what, const Tensor& t, bool cpu_only) {
  HG_CHECK(t.defined(), "dist.", what, ": the tensor is undefined");
  HG_CHECK(t.is_contiguous(), "dist.", what, ": the tensor must be contiguous (call .contiguous() first)");
  HG_CHECK(!cpu_only || t.device().is_cpu(), "dist.", what, ": the MPI backend reduces CPU tensors, got one on ",
           t.device(), " (cuda tensors need the nccl backend: dist::nccl_group(), or dist::group_for(device))");
}

int64_t timeout_seconds() {
  const char* s = std::getenv("HG_DIST_TIMEOUT_S");
  if (!s || !*s) return 300;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  HG_CHECK(end && *end == '\0' && v > 0, "HG_DIST_TIMEOUT_S must be a positive whole number of seconds, got '", s,
           "'");
  return v;
}
}  // namespace detail

namespace {
class DoneWork : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// One process: every collective leaves its tensor as it is (avg of one value is itself).
class SingleProcessGroup : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  bool supports(const Device&) const override { return true; }
  void all_reduce(Tensor& t, ReduceOp op) override {
    detail::check_collective_tensor("all_reduce", t, false);
    HG_CHECK(op != ReduceOp::avg || is_floating(t.dtype()), "dist.all_reduce: avg needs a floating dtype, got ",
             dtype_name(t.dtype()));
  }
  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op) override {
    all_reduce(t, op);
    return std::make_unique<DoneWork>();
  }
  void broadcast(Tensor& t, int root) override {
    detail::check_collective_tensor("broadcast", t, false);
    HG_CHECK(root == 0, "dist.broadcast: root ", root, " is not a rank of this 1-process group (valid: 0)");
  }
  std::vector<Tensor> all_gather(const Tensor& t) override {
    detail::check_collective_tensor("all_gather", t, false);
    return {t.clone()};
  }
  void barrier() override {}
  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "halfgrad rank 0 of 1: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
};

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}
}  // namespace

std::shared_ptr<ProcessGroup> single_process_group() {
  static auto g = std::make_shared<SingleProcessGroup>();
  return g;
}

bool mpi_built() { return detail::mpi_backend_built(); }

std::shared_ptr<ProcessGroup> default_group() {
  static std::mutex mu;
  static std::shared_ptr<ProcessGroup> group;
  std::lock_guard<std::mutex> lock(mu);
  if (group) return group;
  const char* forced = std::getenv("HG_DIST");
  std::string want = forced ? forced : (launched_by_mpirun() ? "mpi" : "single");
  HG_CHECK(want == "mpi" || want == "single", "HG_DIST must be 'mpi' or 'single', got '", want, "'");
  if (want == "mpi") {
    HG_CHECK(mpi_built(), "this process was launched by mpirun (or HG_DIST=mpi) but halfgrad was built without MPI; "
             "install libopenmpi-dev and reconfigure (meson option mpi=enabled), or run one process");
    group = detail::make_mpi_group();
  } else {
    group = single_process_group();
  }
  return group;
}

std::shared_ptr<ProcessGroup> group_for(const Device& device) {
  std::shared_ptr<ProcessGroup> host = default_group();
  if (device.is_cpu() || host->size() == 1) return host;
  return nccl_group();
}

int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    const char* s = std::getenv(v);
    if (!s || !*s) continue;
    char* end = nullptr;
    long r = std::strtol(s, &end, 10);
    HG_CHECK(end && *end == '\0' && r >= 0, v, " must be a rank's index on its machine (0, 1, ...), got '", s, "'");
    return static_cast<int>(r);
  }
  return 0;
}

Device local_device() { return Device::cuda(local_rank()); }

}  // namespace hg::dist
