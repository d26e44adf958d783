// What tests/dist/fake_nccl.cpp records about the calls dist's nccl backend makes, read by
// the tests through dlsym("fake_nccl_log") on the same loaded library.
#pragma once

struct FakeNcclLog {
  int unique_ids = 0;    // ncclGetUniqueId calls
  int comms = 0;         // communicators made by ncclCommInitRank
  int init_device = -1;  // the current CUDA device at the last ncclCommInitRank
  int collectives = 0;   // ncclAllReduce, ncclBroadcast and ncclAllGather calls
  void* last_stream = nullptr;
  int last_type = -1;  // ncclDataType_t of the last collective
  int last_op = -1;    // ncclRedOp_t of the last all-reduce
};

extern "C" FakeNcclLog* fake_nccl_log();
