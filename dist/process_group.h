// dist::ProcessGroup: the collectives data-parallel training needs (all_reduce, broadcast,
// all_gather, barrier) on tensors of any dtype, behind one interface with an MPI backend
// (CPU tensors), an NCCL backend (cuda tensors) and a single-process backend that does
// nothing. See docs/distributed.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/tensor.h"

namespace hg::dist {

enum class ReduceOp { sum, max, min, avg };
const char* to_string(ReduceOp op);

// A collective in flight (non-blocking all_reduce); wait() finishes it. Waiting past the
// group's timeout aborts every rank with a message (a peer that died or diverged must not
// hang the job).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Lets the transport progress without blocking (MPI moves non-blocking collectives
  // forward only inside MPI calls); true once done.
  virtual bool test() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"
  // Whether the collectives take tensors on `device` (MPI: the CPU; NCCL: cuda devices).
  virtual bool supports(const Device& device) const = 0;

  // In place on a contiguous tensor, identical shape/dtype on every rank. f16/bf16 travel
  // in their own 2 bytes; two values are combined in f64 and rounded once (for 2 ranks the
  // correctly rounded sum). avg is that sum divided by size() and rounded again (exact for
  // power-of-two sizes unless subnormal). i64 refuses avg; b8 takes only max and min.
  // (NCCL adds f16/bf16 in its own order and precision instead: see nccl_group.h.)
  virtual void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum) = 0;
  // Starts the all-reduce and returns at once; `t` must not be touched until wait().
  virtual std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::sum) = 0;
  virtual void broadcast(Tensor& t, int root = 0) = 0;
  // One tensor per rank, each shaped like `t`, in rank order.
  virtual std::vector<Tensor> all_gather(const Tensor& t) = 0;
  virtual void barrier() = 0;
  // Prints "halfgrad rank R of N: <message>" to stderr and ends every rank of the job
  // with exit code `code` (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(const std::string& message, int code = 1) = 0;
};

// The group this process was launched into: MPI when halfgrad was built with MPI and the
// process runs under mpirun (or HG_DIST=mpi), otherwise the single-process group. The first
// call initialises MPI; later calls return the same group. HG_DIST_TIMEOUT_S (default 300)
// bounds each wait on a collective.
std::shared_ptr<ProcessGroup> default_group();
std::shared_ptr<ProcessGroup> single_process_group();
// Whether this build has the MPI backend.
bool mpi_built();
// The group for collectives on tensors of `device`: default_group() for CPU tensors, and for
// cuda tensors nccl_group() when the job has more than one rank (one process has nothing
// to communicate: the single-process group). DDP and agree_on_overflow use it when given
// no group.
std::shared_ptr<ProcessGroup> group_for(const Device& device);

// Runs fn(); an exception escaping it on any rank is printed with the rank and ends the
// whole job through pg.abort (the other ranks, blocked in a collective, end too).
// Returns fn's exit code otherwise.
template <class Fn>
int run_or_abort(ProcessGroup& pg, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    pg.abort(std::string("error: ") + e.what());
  }
  return 1;  // not reached: abort() ends the process (the compiler cannot see that through a virtual)
}

namespace detail {
// Checks shared by the backends: defined, contiguous, on the CPU for MPI.
void check_collective_tensor(const char* what, const Tensor& t, bool cpu_only);
int64_t timeout_seconds();
}  // namespace detail

}  // namespace hg::dist
