// The NCCL backend of dist::ProcessGroup (builds with a CUDA backend, native or emulated):
// libnccl loaded with dlopen, the communicator bootstrapped over the host group at the
// first collective, every collective issued on the current stream of its tensor's device.
#include "dist/nccl_group.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "cuda/vendor/dynamic_library.h"
#include "framework/autograd.h"
#include "dist/nccl_api.h"
#include "framework/error.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace hg::dist {
namespace {

using cuda::vendor::DynamicLibrary;

// The library and the functions halfgrad calls in it.
struct Nccl {
  std::unique_ptr<DynamicLibrary> lib;
  nccl::GetVersionFn get_version = nullptr;
  nccl::GetUniqueIdFn get_unique_id = nullptr;
  nccl::CommInitRankFn comm_init_rank = nullptr;
  nccl::CommDestroyFn comm_destroy = nullptr;
  nccl::CommGetAsyncErrorFn get_async_error = nullptr;
  nccl::GetErrorStringFn error_string = nullptr;
  nccl::AllReduceFn all_reduce = nullptr;
  nccl::BroadcastFn broadcast = nullptr;
  nccl::AllGatherFn all_gather = nullptr;

  explicit Nccl(const std::string& file)
      : lib(file.empty() ? std::make_unique<DynamicLibrary>("NCCL", std::initializer_list{"libnccl.so.2", "libnccl.so"})
                         : std::make_unique<DynamicLibrary>("NCCL", std::initializer_list{file.c_str()})) {
    if (!lib->loaded()) return;
    get_version = lib->function<nccl::GetVersionFn>("ncclGetVersion");
    get_unique_id = lib->function<nccl::GetUniqueIdFn>("ncclGetUniqueId");
    comm_init_rank = lib->function<nccl::CommInitRankFn>("ncclCommInitRank");
    comm_destroy = lib->function<nccl::CommDestroyFn>("ncclCommDestroy");
    get_async_error = lib->function<nccl::CommGetAsyncErrorFn>("ncclCommGetAsyncError");
    error_string = lib->function<nccl::GetErrorStringFn>("ncclGetErrorString");
    all_reduce = lib->function<nccl::AllReduceFn>("ncclAllReduce");
    broadcast = lib->function<nccl::BroadcastFn>("ncclBroadcast");
    all_gather = lib->function<nccl::AllGatherFn>("ncclAllGather");
  }
};

// One load per file name (HG_NCCL_LIBRARY may differ between two groups' creation, as in
// the tests); never unloaded, like the cuBLAS/cuDNN libraries.
const Nccl& nccl_library() {
  const char* env = std::getenv("HG_NCCL_LIBRARY");
  const std::string file = env ? env : "";
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, std::unique_ptr<Nccl>>();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Nccl>& slot = (*loaded)[file];
  if (!slot) slot = std::make_unique<Nccl>(file);
  HG_CHECK(slot->lib->loaded(), "dist: the nccl backend needs NCCL: ", slot->lib->load_error(),
           file.empty() ? ". Install NCCL (libnccl2) or set HG_NCCL_LIBRARY to the path of libnccl.so.2"
                        : hg::detail::concat(". HG_NCCL_LIBRARY names '", file,
                                             "': set it to the path of libnccl.so.2, or unset it"));
  return *slot;
}

nccl::DataType nccl_type(DType dt) {
  switch (dt) {
    case DType::f64: return nccl::float64;
    case DType::f32: return nccl::float32;
    case DType::f16: return nccl::float16;
    case DType::bf16: return nccl::bfloat16;
    case DType::i64: return nccl::int64;
    case DType::b8: return nccl::uint8;
  }
  return nccl::uint8;
}

// Done when the collective's stream reaches it; wait() orders the waiter's stream after it
// on the device (no host synchronisation).
class NcclWork : public Work {
 public:
  explicit NcclWork(cuda::Stream s) : device_(s.device()) { done_.record(s); }
  void wait() override { done_.block(cuda::current_stream(device_)); }
  bool test() override { return done_.done(); }

 private:
  cuda::Event done_{false};
  int device_;
};

class NcclGroup : public ProcessGroup {
 public:
  explicit NcclGroup(std::shared_ptr<ProcessGroup> host) : host_(std::move(host)), api_(nccl_library()) {
    HG_CHECK(host_ && host_->supports(Device::cpu()), "dist: the nccl backend is bootstrapped over a group that "
             "carries CPU tensors (default_group()), got ", host_ ? host_->backend() : std::string("none"));
    timeout_s_ = detail::timeout_seconds();
  }
  ~NcclGroup() override {
    if (comm_) api_.comm_destroy(comm_);
  }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend() const override { return "nccl"; }
  bool supports(const Device& device) const override { return device.is_cuda(); }

  void all_reduce(Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    HG_CHECK(op != ReduceOp::avg || is_floating(t.dtype()), "dist.all_reduce: avg needs a floating dtype, got ",
             dtype_name(t.dtype()));
    HG_CHECK(t.dtype() != DType::b8 || op == ReduceOp::max || op == ReduceOp::min,
             "dist.all_reduce: b8 tensors reduce with max (any) or min (all), got ", to_string(op));
    if (t.numel() == 0) return;
    const cuda::DeviceGuard on(t.device().index);
    nccl::Comm c = comm_for("all_reduce", t);
    const nccl::RedOp nop = op == ReduceOp::max ? nccl::max : op == ReduceOp::min ? nccl::min : nccl::sum;
    check(api_.all_reduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), nop, c,
                          stream_of(t).handle()),
          "ncclAllReduce");
    t.bump_version();
    if (op == ReduceOp::avg && size() > 1) {
      NoGrad ng;
      copy_(t, div(t, static_cast<double>(size())));  // issued on the same stream, after the sum
    }
  }

  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op) override {
    all_reduce(t, op);  // NCCL returns once the collective is queued on the stream
    return std::make_unique<NcclWork>(stream_of(t));
  }

  void broadcast(Tensor& t, int root) override {
    check_tensor("broadcast", t);
    HG_CHECK(root >= 0 && root < size(), "dist.broadcast: root ", root, " is not a rank (valid: 0..", size() - 1, ")");
    if (t.numel() == 0) return;
    const cuda::DeviceGuard on(t.device().index);
    nccl::Comm c = comm_for("broadcast", t);
    check(api_.broadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), root, c,
                         stream_of(t).handle()),
          "ncclBroadcast");
    t.bump_version();
  }

  std::vector<Tensor> all_gather(const Tensor& t) override {
    check_tensor("all_gather", t);
    std::vector<int64_t> dims{size()};
    for (int64_t d : t.shape()) dims.push_back(d);
    Tensor all = empty(Shape(dims), {t.dtype(), t.device()});
    if (t.numel() > 0) {
      const cuda::DeviceGuard on(t.device().index);
      nccl::Comm c = comm_for("all_gather", t);
      check(api_.all_gather(t.data_ptr(), all.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), c,
                            stream_of(t).handle()),
            "ncclAllGather");
    }
    std::vector<Tensor> out;
    for (int r = 0; r < size(); ++r) out.push_back(all.select(0, r));
    return out;
  }

  // A one-element all-reduce that the host waits for, polling NCCL's error state.
  void barrier() override {
    Tensor one = ones({1}, {DType::f32, comm_ ? Device::cuda(device_) : local_device()});
    all_reduce(one, ReduceOp::sum);
    cuda::Event done(false);
    done.record(stream_of(one));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
    while (!done.done()) {
      nccl::Result async = nccl::success;
      api_.get_async_error(comm_, &async);
      if (async != nccl::success && async != nccl::in_progress)
        abort(hg::detail::concat("dist.barrier: NCCL reports ", api_.error_string(async), " (ncclResult_t ",
                                 static_cast<int>(async), ")"),
              1);
      if (std::chrono::steady_clock::now() > deadline)
        abort(hg::detail::concat("dist.barrier did not complete within ", timeout_s_,
                                 " s (HG_DIST_TIMEOUT_S): another rank failed, diverged or is stuck"),
              1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    host_->abort(message, code);
    std::_Exit(code);  // not reached: the host group's abort ends the process
  }

 private:
  static cuda::Stream stream_of(const Tensor& t) { return cuda::current_stream(t.device().index); }

  static void check_tensor(const char* what, const Tensor& t) {
    detail::check_collective_tensor(what, t, false);
    HG_CHECK(t.device().is_cuda(), "dist.", what, ": the nccl backend reduces cuda tensors, got one on ", t.device(),
             " (CPU tensors need the MPI backend: dist::default_group())");
  }

  void check(nccl::Result r, const char* call) const {
    if (r == nccl::success) return;
    throw Error(hg::detail::concat("dist: ", call, " failed: ", api_.error_string(r), " (ncclResult_t ",
                                   static_cast<int>(r), ")"));
  }

  // The communicator, made by the first collective on its tensor's device (all ranks call
  // the first collective, so all of them join here together).
  nccl::Comm comm_for(const char* what, const Tensor& t) {
    const int dev = t.device().index;
    if (comm_) {
      HG_CHECK(dev == device_, "dist.", what, ": this rank's NCCL communicator is on cuda:", device_,
               ", the tensor on cuda:", dev, "; NCCL runs one GPU per rank (put the rank's tensors on "
               "dist::local_device())");
      return comm_;
    }
    nccl::UniqueId id{};
    if (rank() == 0) check(api_.get_unique_id(&id), "ncclGetUniqueId");
    Tensor bytes = empty({static_cast<int64_t>(sizeof id)}, {DType::b8});
    std::memcpy(bytes.data_ptr(), &id, sizeof id);
    host_->broadcast(bytes, 0);
    std::memcpy(&id, bytes.data_ptr(), sizeof id);
    check(api_.comm_init_rank(&comm_, size(), id, rank()), "ncclCommInitRank");
    device_ = dev;
    return comm_;
  }

  std::shared_ptr<ProcessGroup> host_;
  const Nccl& api_;
  nccl::Comm comm_ = nullptr;
  int device_ = -1;
  int64_t timeout_s_ = 300;
};

}  // namespace

bool nccl_built() { return true; }

int nccl_version() {
  int v = 0;
  const nccl::Result r = nccl_library().get_version(&v);
  HG_CHECK(r == nccl::success, "dist: ncclGetVersion failed (ncclResult_t ", static_cast<int>(r), ")");
  return v;
}

std::shared_ptr<ProcessGroup> new_nccl_group(std::shared_ptr<ProcessGroup> host) {
  return std::make_shared<NcclGroup>(std::move(host));
}

std::shared_ptr<ProcessGroup> nccl_group() {
  static std::mutex mu;
  // Never destroyed: the communicator lives until the process ends (destroying it from a
  // static destructor would race with the CUDA runtime's own teardown).
  static std::shared_ptr<ProcessGroup>* group = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!group) group = new std::shared_ptr<ProcessGroup>(new_nccl_group(default_group()));
  return *group;
}

}  // namespace hg::dist
