// segbench's data-parallel glue: under `mpirun -np N segbench ...` each rank trains on its
// own images (global batch = --batch x N) with gradients averaged by dist::DDP, rank 0
// writes the report, and a failure on any rank ends every rank.
#pragma once
#include <cstdint>
#include <memory>

#include "amp/grad_scaler.h"
#include "bench/segbench/run_result.h"
#include "dist/ddp.h"

namespace hg::segbench {

// Called by main() before anything else: joins the MPI job when launched by mpirun,
// splits the cores between the ranks on this machine (unless --threads says otherwise),
// and gives ranks other than 0 a private scratch --out and a silent stdout. Returns the
// number of ranks.
int prepare_distributed(Config& cfg);
int num_ranks();
// True on rank 0 (or without a job): the rank whose --out is the user's folder.
bool is_report_rank();

// The first image (of the endless training stream) of this rank's share of step `step`.
uint64_t first_image_of(int64_t step, int64_t per_rank_batch);

// Averages the model's gradients over the ranks and agrees the scaler's overflow
// decisions; null when there is one rank.
std::unique_ptr<dist::DistributedDataParallel> attach_distributed(nn::Module& model, amp::GradScaler& scaler);

// A failed rank (main's exit code `code` != 0) ends the whole job; returns `code` otherwise.
int end_rank(int code);

}  // namespace hg::segbench
