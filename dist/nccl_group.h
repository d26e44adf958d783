// dist's NCCL backend: collectives on cuda tensors run by NCCL (libnccl.so.2, opened with
// dlopen at first use, never linked), one GPU per rank, bootstrapped over the host group
// (MPI under mpirun). The CPU collectives stay with MPI; see docs/distributed.md.
#pragma once
#include <memory>

#include "framework/device.h"
#include "dist/process_group.h"

namespace hg::dist {

// This process's NCCL group over default_group(), made on the first call. Its communicator
// is made at the first collective, on the device of that collective's tensor (every later
// tensor must be on the same device): rank 0 asks NCCL for a unique id, the host group
// broadcasts it, every rank joins. Collectives are issued on the current stream of the
// tensor's device and return without waiting on the host: work issued to that stream
// afterwards sees the result. Work::wait() makes the then-current stream wait (on the
// device); barrier() waits on the host, bounded by HG_DIST_TIMEOUT_S.
// f16/bf16 are summed by NCCL (on 2 ranks one addition rounded once; on more, partial sums
// are rounded at each hop of its ring or tree); avg is NCCL's sum divided by size() on the
// stream by halfgrad's elementwise kernel (f32 arithmetic, rounded once into the dtype).
// Throws hg::Error when the build has no CUDA backend or libnccl cannot be loaded; the
// environment variable HG_NCCL_LIBRARY names the library file to load instead.
std::shared_ptr<ProcessGroup> nccl_group();
// A new NCCL group with its own communicator, bootstrapped over `host` (the group whose
// ranks it connects, e.g. default_group()).
std::shared_ptr<ProcessGroup> new_nccl_group(std::shared_ptr<ProcessGroup> host);
// Whether this build can make NCCL groups (it has a CUDA backend, native or emulated).
bool nccl_built();
// The loaded library's version as ncclGetVersion reports it (22105 for NCCL 2.21.5).
int nccl_version();

// This rank's index among the ranks on its machine, from the launcher's environment
// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK); 0 without one.
int local_rank();
// cuda:local_rank(): the GPU this rank's model and batches belong on (one GPU per rank).
Device local_device();

}  // namespace hg::dist
