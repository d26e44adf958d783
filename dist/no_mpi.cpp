// The MPI entry points of a build without MPI: the single-process group is all there is.
#include "dist/mpi_group.h"
#include "framework/error.h"

namespace hg::dist::detail {
bool mpi_backend_built() { return false; }
std::shared_ptr<ProcessGroup> make_mpi_group() {
  throw Error("dist: halfgrad was built without MPI (meson option mpi; install libopenmpi-dev)");
}
}  // namespace hg::dist::detail
