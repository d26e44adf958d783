// The part of NCCL's C API (nccl.h, NCCL 2.x) that the NCCL backend calls, declared here
// because halfgrad neither includes nor links NCCL: libnccl.so.2 is opened with dlopen.
// Values and layouts are NCCL's ABI; tests/dist/fake_nccl.cpp implements the same subset.
#pragma once
#include <cstddef>

namespace hg::dist::nccl {

// ncclUniqueId: opaque bytes that rank 0 makes and every rank passes to CommInitRank.
struct UniqueId {
  char internal[128];
};
struct CommObject;  // ncclComm, opaque
using Comm = CommObject*;
using Stream = void*;  // cudaStream_t; nullptr is the legacy default stream

// ncclResult_t
enum Result : int {
  success = 0,
  unhandled_cuda_error = 1,
  system_error = 2,
  internal_error = 3,
  invalid_argument = 4,
  invalid_usage = 5,
  remote_error = 6,
  in_progress = 7,
};
// ncclDataType_t (the members halfgrad's dtypes map to)
enum DataType : int { uint8 = 1, int64 = 4, float16 = 6, float32 = 7, float64 = 8, bfloat16 = 9 };
// ncclRedOp_t (avg is done by halfgrad after a sum, see nccl_group.cpp)
enum RedOp : int { sum = 0, max = 2, min = 3 };

using GetVersionFn = Result (*)(int* version);
using GetUniqueIdFn = Result (*)(UniqueId* id);
using CommInitRankFn = Result (*)(Comm* comm, int nranks, UniqueId id, int rank);
using CommDestroyFn = Result (*)(Comm comm);
using CommGetAsyncErrorFn = Result (*)(Comm comm, Result* async_error);
using GetErrorStringFn = const char* (*)(Result result);
using AllReduceFn = Result (*)(const void* send, void* recv, size_t count, DataType type, RedOp op, Comm comm,
                               Stream stream);
using BroadcastFn = Result (*)(const void* send, void* recv, size_t count, DataType type, int root, Comm comm,
                               Stream stream);
using AllGatherFn = Result (*)(const void* send, void* recv, size_t send_count, DataType type, Comm comm,
                               Stream stream);

}  // namespace hg::dist::nccl
