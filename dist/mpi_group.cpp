// The MPI backend of dist::ProcessGroup (CPU tensors): non-blocking MPI-3 collectives
// waited on with a deadline, f16/bf16 reduced by user-defined MPI ops that combine two
// values in f64 (exact for f16) and round once, and MPI_Abort for errors.
// Only MPI's C API (its deprecated C++ bindings warn under -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "framework/bfloat16.h"
#include "dist/mpi_group.h"
#include "framework/error.h"
#include "framework/half.h"

namespace hg::dist {
namespace {

// One 16-bit format: widen both to f64, combine, round once.
template <float (*Widen)(uint16_t), uint16_t (*Round)(double), class Combine>
void combine_16(void* in, void* inout, int* len, Combine c) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Round(c(double(Widen(a[i])), double(Widen(b[i]))));
}
template <class Combine>
void combine_f16(void* in, void* inout, int* len, Combine c) {
  combine_16<half_bits_to_float, double_to_half_bits>(in, inout, len, c);
}
template <class Combine>
void combine_bf16(void* in, void* inout, int* len, Combine c) {
  combine_16<bf16_bits_to_float, double_to_bf16_bits>(in, inout, len, c);
}
// max/min propagate NaN as the f32 reduction of IEEE maxNum would not: a NaN gradient must
// reach every rank so all of them skip the step.
double add(double a, double b) { return a + b; }
double max_nan(double a, double b) { return (a != a || b != b) ? a + b : std::max(a, b); }
double min_nan(double a, double b) { return (a != a || b != b) ? a + b : std::min(a, b); }

void f16_sum(void* in, void* io, int* n, MPI_Datatype*) { combine_f16(in, io, n, add); }
void f16_max(void* in, void* io, int* n, MPI_Datatype*) { combine_f16(in, io, n, max_nan); }
void f16_min(void* in, void* io, int* n, MPI_Datatype*) { combine_f16(in, io, n, min_nan); }
void bf16_sum(void* in, void* io, int* n, MPI_Datatype*) { combine_bf16(in, io, n, add); }
void bf16_max(void* in, void* io, int* n, MPI_Datatype*) { combine_bf16(in, io, n, max_nan); }
void bf16_min(void* in, void* io, int* n, MPI_Datatype*) { combine_bf16(in, io, n, min_nan); }

struct HalfOps {
  MPI_Op f16[3], bf16[3];  // sum, max, min
};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::f64: return MPI_DOUBLE;
    case DType::f32: return MPI_FLOAT;
    case DType::i64: return MPI_INT64_T;
    case DType::b8: return MPI_UINT8_T;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

int count_of(const char* what, const Tensor& t) {
  HG_CHECK(t.numel() <= INT_MAX, "dist.", what, ": ", t.numel(), " elements is more than one MPI call carries (",
           INT_MAX, "); split the tensor");
  return static_cast<int>(t.numel());
}

// Divides every element by n, rounding once in the tensor's dtype (avg = sum / n).
void divide_in_place(Tensor& t, int n) {
  int64_t k = t.numel();
  switch (t.dtype()) {
    case DType::f64: { auto* p = t.data<double>(); for (int64_t i = 0; i < k; ++i) p[i] /= n; break; }
    case DType::f32: { auto* p = t.data<float>(); for (int64_t i = 0; i < k; ++i) p[i] /= float(n); break; }
    case DType::f16: {
      auto* p = static_cast<uint16_t*>(t.data_ptr());
      for (int64_t i = 0; i < k; ++i) p[i] = double_to_half_bits(double(half_bits_to_float(p[i])) / n);
      break;
    }
    case DType::bf16: {
      auto* p = static_cast<uint16_t*>(t.data_ptr());
      for (int64_t i = 0; i < k; ++i) p[i] = double_to_bf16_bits(double(bf16_bits_to_float(p[i])) / n);
      break;
    }
    default: break;
  }
}

class MpiGroup;

class MpiWork : public Work {
 public:
  MpiWork(MpiGroup& g, MPI_Request req, const char* what, Tensor keep, int avg_over)
      : g_(g), req_(req), what_(what), keep_(std::move(keep)), avg_over_(avg_over) {}
  ~MpiWork() override;
  void wait() override;
  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (flag) finish();
    return done_;
  }

 private:
  void finish() {
    done_ = true;
    if (avg_over_ > 1) divide_in_place(keep_, avg_over_);
    if (keep_.defined()) keep_.bump_version();
  }
  MpiGroup& g_;
  MPI_Request req_;
  const char* what_;
  Tensor keep_;  // alive until the collective is done: MPI writes into it
  int avg_over_;
  bool done_ = false;
};

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      std::atexit(finalize_at_exit);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_User_function* fns[2][3] = {{f16_sum, f16_max, f16_min}, {bf16_sum, bf16_max, bf16_min}};
    for (int k = 0; k < 3; ++k) {
      MPI_Op_create(fns[0][k], 1, &ops_.f16[k]);
      MPI_Op_create(fns[1][k], 1, &ops_.bf16[k]);
    }
    timeout_s_ = detail::timeout_seconds();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  bool supports(const Device& device) const override { return device.is_cpu(); }

  void all_reduce(Tensor& t, ReduceOp op) override { all_reduce_async(t, op)->wait(); }

  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op) override {
    detail::check_collective_tensor("all_reduce", t, true);
    HG_CHECK(op != ReduceOp::avg || is_floating(t.dtype()), "dist.all_reduce: avg needs a floating dtype, got ",
             dtype_name(t.dtype()));
    HG_CHECK(t.dtype() != DType::b8 || op == ReduceOp::max || op == ReduceOp::min,
             "dist.all_reduce: b8 tensors reduce with max (any) or min (all), got ", to_string(op));
    int n = count_of("all_reduce", t);
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), n, mpi_type(t.dtype()), mpi_op(t.dtype(), op), comm_, &req);
    return std::make_unique<MpiWork>(*this, req, "all_reduce", t, op == ReduceOp::avg ? size_ : 1);
  }

  void broadcast(Tensor& t, int root) override {
    detail::check_collective_tensor("broadcast", t, true);
    HG_CHECK(root >= 0 && root < size_, "dist.broadcast: root ", root, " is not a rank (valid: 0..", size_ - 1, ")");
    int n = count_of("broadcast", t);
    MPI_Request req;
    MPI_Ibcast(t.data_ptr(), n, mpi_type(t.dtype()), root, comm_, &req);
    MpiWork(*this, req, "broadcast", t, 1).wait();
  }

  std::vector<Tensor> all_gather(const Tensor& t) override {
    detail::check_collective_tensor("all_gather", t, true);
    int n = count_of("all_gather", t);
    Shape s = t.shape();
    std::vector<int64_t> dims{size_};
    for (int64_t d : s) dims.push_back(d);
    Tensor all = empty(Shape(dims), {t.dtype()});
    MPI_Request req;
    MPI_Iallgather(t.data_ptr(), n, mpi_type(t.dtype()), all.data_ptr(), n, mpi_type(t.dtype()), comm_, &req);
    MpiWork(*this, req, "all_gather", all, 1).wait();
    std::vector<Tensor> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.select(0, r).clone());
    return out;
  }

  void barrier() override {
    MPI_Request req;
    MPI_Ibarrier(comm_, &req);
    MpiWork(*this, req, "barrier", Tensor(), 1).wait();
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "halfgrad rank %d of %d: %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  int64_t timeout_s() const { return timeout_s_; }

 private:
  MPI_Op mpi_op(DType dt, ReduceOp op) const {
    int k = op == ReduceOp::max ? 1 : op == ReduceOp::min ? 2 : 0;
    if (dt == DType::f16) return ops_.f16[k];
    if (dt == DType::bf16) return ops_.bf16[k];
    return k == 1 ? MPI_MAX : k == 2 ? MPI_MIN : MPI_SUM;
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  HalfOps ops_{};
  int64_t timeout_s_ = 300;
};

MpiWork::~MpiWork() {
  // A Work dropped unfinished would leave MPI writing into freed memory: finish it.
  if (!done_) wait();
}

void MpiWork::wait() {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::seconds(g_.timeout_s());
  for (int spins = 0; !test(); ++spins) {
    // Spin briefly (a collective often completes in microseconds), then yield the core:
    // ranks share cores when oversubscribed.
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if ((spins & 255) == 0 && clock::now() > deadline)
      g_.abort(hg::detail::concat("dist.", what_, " did not complete within ", g_.timeout_s(),
                              " s (HG_DIST_TIMEOUT_S): another rank failed, diverged or is stuck"),
               1);
  }
}

}  // namespace

namespace detail {
bool mpi_backend_built() { return true; }
std::shared_ptr<ProcessGroup> make_mpi_group() { return std::make_shared<MpiGroup>(); }
}  // namespace detail

}  // namespace hg::dist
