// A stand-in for libnccl.so.2 in the emulation build's tests: the subset of NCCL's API that
// dist's nccl backend calls, run over MPI on host memory (what cuda tensors are under the
// CPU emulation). It refuses what NCCL would (a unique id that did not come from rank 0's
// ncclGetUniqueId, a buffer on another device than the communicator's) and logs each call
// (fake_nccl_log.h). Loaded through HG_NCCL_LIBRARY; FAKE_NCCL_FAIL_INIT=1 fails init.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "cuda/cuda_api.h"
#include "fake_nccl_log.h"
#include "framework/bfloat16.h"
#include "dist/nccl_api.h"
#include "framework/half.h"

namespace hg::dist::nccl {
struct CommObject {
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL for a 1-rank communicator without MPI
  int rank = 0, nranks = 1, device = 0;
};
}  // namespace hg::dist::nccl

namespace {
using namespace hg::dist;

FakeNcclLog g_log;
constexpr char kMagic[] = "fake-nccl-unique-id";

// f16/bf16 reductions: both values widened to f64 (exact), combined, rounded once.
template <float (*Widen)(uint16_t), uint16_t (*Round)(double), int Op>
void combine16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    double x = Widen(a[i]), y = Widen(b[i]);
    b[i] = Round(Op == nccl::sum ? x + y : Op == nccl::max ? std::max(x, y) : std::min(x, y));
  }
}
float f16_widen(uint16_t h) { return hg::half_bits_to_float(h); }
uint16_t f16_round(double d) { return hg::double_to_half_bits(d); }
float bf16_widen(uint16_t h) { return hg::bf16_bits_to_float(h); }
uint16_t bf16_round(double d) { return hg::double_to_bf16_bits(d); }

template <int Op>
MPI_Op half_op(nccl::DataType t) {
  static MPI_Op f16 = MPI_OP_NULL, bf16 = MPI_OP_NULL;
  if (f16 == MPI_OP_NULL) {
    MPI_Op_create(combine16<f16_widen, f16_round, Op>, 1, &f16);
    MPI_Op_create(combine16<bf16_widen, bf16_round, Op>, 1, &bf16);
  }
  return t == nccl::float16 ? f16 : bf16;
}

bool mpi_type(nccl::DataType t, MPI_Datatype* out, size_t* bytes) {
  switch (t) {
    case nccl::uint8: *out = MPI_UINT8_T; *bytes = 1; return true;
    case nccl::int64: *out = MPI_INT64_T; *bytes = 8; return true;
    case nccl::float16:
    case nccl::bfloat16: *out = MPI_UINT16_T; *bytes = 2; return true;
    case nccl::float32: *out = MPI_FLOAT; *bytes = 4; return true;
    case nccl::float64: *out = MPI_DOUBLE; *bytes = 8; return true;
  }
  return false;
}

bool mpi_op(nccl::RedOp op, nccl::DataType t, MPI_Op* out) {
  const bool half = t == nccl::float16 || t == nccl::bfloat16;
  switch (op) {
    case nccl::sum: *out = half ? half_op<nccl::sum>(t) : MPI_SUM; return true;
    case nccl::max: *out = half ? half_op<nccl::max>(t) : MPI_MAX; return true;
    case nccl::min: *out = half ? half_op<nccl::min>(t) : MPI_MIN; return true;
  }
  return false;
}

// NCCL's rule: a collective's buffers are on the communicator's device. Logs the call.
nccl::Result enter(const char* call, const void* buf, nccl::DataType t, nccl::Comm comm, nccl::Stream stream) {
  if (!comm) return nccl::invalid_argument;
  if (hg::cuda::emu::device_of(buf) != comm->device) {
    std::fprintf(stderr, "fake nccl: %s: buffer %p is not on the communicator's cuda:%d\n", call, buf, comm->device);
    return nccl::invalid_argument;
  }
  ++g_log.collectives;
  g_log.last_stream = stream;
  g_log.last_type = t;
  return nccl::success;
}

int mpi_count(size_t count) { return static_cast<int>(count); }

}  // namespace

extern "C" {

FakeNcclLog* fake_nccl_log() { return &g_log; }

nccl::Result ncclGetVersion(int* version) {
  *version = 0;
  return nccl::success;
}

const char* ncclGetErrorString(nccl::Result r) {
  switch (r) {
    case nccl::success: return "no error";
    case nccl::unhandled_cuda_error: return "unhandled cuda error";
    case nccl::system_error: return "unhandled system error";
    case nccl::internal_error: return "internal error";
    case nccl::invalid_argument: return "invalid argument";
    case nccl::invalid_usage: return "invalid usage";
    case nccl::remote_error: return "remote process exited or there was a network error";
    case nccl::in_progress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

nccl::Result ncclGetUniqueId(nccl::UniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::snprintf(id->internal, sizeof id->internal, "%s %d", kMagic, static_cast<int>(::getpid()));
  ++g_log.unique_ids;
  return nccl::success;
}

// Every rank must hold an id made by ncclGetUniqueId, the same on all ranks (the bootstrap
// broadcast rank 0's); the ids are gathered first, so every rank reaches the same verdict.
nccl::Result ncclCommInitRank(nccl::Comm* out, int nranks, nccl::UniqueId id, int rank) {
  if (std::getenv("FAKE_NCCL_FAIL_INIT")) return nccl::system_error;
  auto* c = new nccl::CommObject{MPI_COMM_NULL, rank, nranks, 0};
  cudaGetDevice(&c->device);
  bool ok = true;
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) {
    int world_rank = 0, world_size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_rank != rank || world_size != nranks) {
      delete c;
      return nccl::invalid_argument;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    std::vector<nccl::UniqueId> all(static_cast<size_t>(nranks));
    MPI_Allgather(&id, sizeof id, MPI_BYTE, all.data(), sizeof id, MPI_BYTE, c->comm);
    for (const nccl::UniqueId& other : all)
      ok = ok && std::memcmp(other.internal, kMagic, sizeof kMagic - 1) == 0 && std::memcmp(&other, &id, sizeof id) == 0;
  } else {
    ok = nranks == 1 && std::memcmp(id.internal, kMagic, sizeof kMagic - 1) == 0;
  }
  if (!ok) {
    std::fprintf(stderr, "fake nccl: ncclCommInitRank: the ranks' unique ids differ or were not made by ncclGetUniqueId\n");
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    delete c;
    return nccl::invalid_usage;
  }
  ++g_log.comms;
  g_log.init_device = c->device;
  *out = c;
  return nccl::success;
}

nccl::Result ncclCommDestroy(nccl::Comm comm) {
  if (!comm) return nccl::invalid_argument;
  if (comm->comm != MPI_COMM_NULL) MPI_Comm_free(&comm->comm);
  delete comm;
  return nccl::success;
}

nccl::Result ncclCommGetAsyncError(nccl::Comm comm, nccl::Result* async_error) {
  if (!comm) return nccl::invalid_argument;
  *async_error = nccl::success;  // every call here finishes before it returns
  return nccl::success;
}

nccl::Result ncclAllReduce(const void* send, void* recv, size_t count, nccl::DataType t, nccl::RedOp op,
                           nccl::Comm comm, nccl::Stream stream) {
  MPI_Datatype mt;
  MPI_Op mo;
  size_t bytes = 0;
  if (!mpi_type(t, &mt, &bytes) || !mpi_op(op, t, &mo)) return nccl::invalid_argument;
  if (nccl::Result r = enter("ncclAllReduce", recv, t, comm, stream); r != nccl::success) return r;
  g_log.last_op = op;
  if (comm->comm == MPI_COMM_NULL) {
    if (send != recv) std::memcpy(recv, send, count * bytes);
    return nccl::success;
  }
  MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, mpi_count(count), mt, mo, comm->comm);
  return nccl::success;
}

nccl::Result ncclBroadcast(const void* send, void* recv, size_t count, nccl::DataType t, int root, nccl::Comm comm,
                           nccl::Stream stream) {
  MPI_Datatype mt;
  size_t bytes = 0;
  if (!mpi_type(t, &mt, &bytes)) return nccl::invalid_argument;
  if (nccl::Result r = enter("ncclBroadcast", recv, t, comm, stream); r != nccl::success) return r;
  if (root < 0 || root >= comm->nranks) return nccl::invalid_argument;
  if (comm->rank == root && send != recv) std::memcpy(recv, send, count * bytes);
  if (comm->comm != MPI_COMM_NULL) MPI_Bcast(recv, mpi_count(count), mt, root, comm->comm);
  return nccl::success;
}

nccl::Result ncclAllGather(const void* send, void* recv, size_t count, nccl::DataType t, nccl::Comm comm,
                           nccl::Stream stream) {
  MPI_Datatype mt;
  size_t bytes = 0;
  if (!mpi_type(t, &mt, &bytes)) return nccl::invalid_argument;
  if (nccl::Result r = enter("ncclAllGather", recv, t, comm, stream); r != nccl::success) return r;
  if (comm->comm == MPI_COMM_NULL) {
    std::memcpy(recv, send, count * bytes);
    return nccl::success;
  }
  MPI_Allgather(send, mpi_count(count), mt, recv, mpi_count(count), mt, comm->comm);
  return nccl::success;
}

}  // extern "C"
