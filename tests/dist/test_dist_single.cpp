// dist in one process (the unit tests, no mpirun): every device's group is the
// single-process one, local_rank() comes from the launcher's environment, and the nccl
// backend says why it cannot be made (no CUDA in this build, or no libnccl).
#include <catch2/catch.hpp>

#include "dist/nccl_group.h"
#include "tests/env_scope.h"

using namespace hg;
using Catch::Contains;
using hg::test::EnvScope;

TEST_CASE("dist without mpirun: group_for gives the single-process group for CPU and cuda tensors", "[dist]") {
  CHECK(dist::group_for(Device::cpu())->backend() == "single");
  CHECK(dist::group_for(Device::cuda(0))->backend() == "single");  // one process: nothing to send over NCCL
  CHECK(dist::group_for(Device::cuda(0))->supports(Device::cuda(0)));
}

TEST_CASE("dist::local_rank reads the launcher's local rank; anything but an index is refused", "[dist]") {
  EnvScope ompi("OMPI_COMM_WORLD_LOCAL_RANK", "3");
  CHECK(dist::local_rank() == 3);
  CHECK(dist::local_device() == Device::cuda(3));
  EnvScope bad("OMPI_COMM_WORLD_LOCAL_RANK", "two");
  CHECK_THROWS_WITH(dist::local_rank(), Contains("OMPI_COMM_WORLD_LOCAL_RANK must be") && Contains("'two'"));
}

TEST_CASE("nccl backend: a build without CUDA refuses it with the reason; a missing libnccl is named", "[dist]") {
  if (!dist::nccl_built()) {
    CHECK_THROWS_WITH(dist::nccl_group(), Contains("built without CUDA") && Contains("cuda-emulation=true"));
    return;
  }
  EnvScope lib("HG_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  CHECK_THROWS_WITH(dist::new_nccl_group(dist::default_group()),
                    Contains("/nonexistent/libnccl.so.2: cannot open shared object file") && Contains("HG_NCCL_LIBRARY"));
}
