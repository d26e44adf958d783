// The data-parallel test program, run under mpirun -np 2 by .ci/dist. Without arguments
// of its own it runs the Catch2 cases; two modes check that failures end the whole job:
//   --raise-on-rank R   rank R throws in step 3 of a DDP training loop (run_or_abort)
//   --stall-on-rank R   rank R stops taking part in collectives (the others' wait times out)
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <thread>

#include "dist_models.h"
#include "dist/ddp.h"

using namespace hg;

namespace {
int train_and_fail(int bad_rank, bool stall) {
  auto pg = dist::default_group();
  return dist::run_or_abort(*pg, [&] {
    auto m = dist_test::make_mlp(1);
    dist::DistributedDataParallel ddp(*m, pg);
    optim::SGD opt(m->named_parameters(), optim::SGDOptions{.lr = 0.1});
    for (int k = 0; k < 5; ++k) {
      if (k == 3 && pg->rank() == bad_rank) {
        if (stall) std::this_thread::sleep_for(std::chrono::hours(1));
        // A shape error of the kind a bad batch gives: thrown by an op as hg::Error.
        mse_loss(ddp(zeros({4, 8})), zeros({4, 3})).backward();
      }
      mse_loss(ddp(zeros({4, 8})), zeros({4, 2})).backward();
      opt.step();
      opt.zero_grad();
    }
    return 0;
  });
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && (!std::strcmp(argv[1], "--raise-on-rank") || !std::strcmp(argv[1], "--stall-on-rank")))
    return train_and_fail(std::atoi(argv[2]), !std::strcmp(argv[1], "--stall-on-rank"));
  dist::default_group();  // MPI_Init before any test
  return Catch::Session().run(argc, argv);
}
