// Internal: the MPI backend's entry points, defined by mpi_group.cpp when halfgrad is built
// with MPI and by no_mpi.cpp otherwise.
#pragma once
#include <memory>

#include "dist/process_group.h"

namespace hg::dist::detail {
bool mpi_backend_built();
// Initialises MPI (once) and returns the group of MPI_COMM_WORLD.
std::shared_ptr<ProcessGroup> make_mpi_group();
}  // namespace hg::dist::detail
