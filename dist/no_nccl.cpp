// The NCCL entry points of a build without a CUDA backend: there are no cuda tensors to reduce.
#include "dist/nccl_group.h"
#include "framework/error.h"

namespace hg::dist {
namespace {
const char* kWhy = "dist: the nccl backend reduces cuda tensors and this halfgrad was built without CUDA "
                   "(meson options cuda=enabled, or cuda-emulation=true to run it on the CPU)";
}
bool nccl_built() { return false; }
int nccl_version() { throw Error(kWhy); }
std::shared_ptr<ProcessGroup> new_nccl_group(std::shared_ptr<ProcessGroup>) { throw Error(kWhy); }
std::shared_ptr<ProcessGroup> nccl_group() { throw Error(kWhy); }
}  // namespace hg::dist
