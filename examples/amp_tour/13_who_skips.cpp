// Tour step 13 (docs/amp.md): who skips a step. (a) One scaler, two optimizers: each
// step() skips on its own optimizer's found_inf, so one optimizer can step while the other
// skips, and update() backs off once if any of them overflowed. (b) Two data-parallel
// ranks, run in lockstep in this one process: rank 1 alone overflows; without agreement
// rank 0 steps and the replicas drift apart; a found-inf reducer taking the max over both
// ranks (what dist::agree_on_overflow installs, as an MPI/NCCL all-reduce) makes both
// skip. (c) The f16 all-reduce itself: two finite gradients whose sum overflows.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

struct Net : nn::Module {
  HG_CHILD(nn::Linear, body, 4, 8);
  HG_CHILD(nn::Linear, head, 8, 1);
  Tensor forward_impl(const Tensor& x) override { return (*head)(relu((*body)(x))); }
  std::string type_name() const override { return "Net"; }
};

// A non-finite gradient element, as an overflow in this rank's or this layer's backward leaves it.
void poison(const Tensor& param) {
  fill_(param.grad().slice(0, 0, 1), std::numeric_limits<double>::infinity());
}

double max_diff(Net& a, Net& b) {
  double m = 0;
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) m = std::fmax(m, max(abs(sub(pa[i], pb[i]))).item<double>());
  return m;
}

// A toy all-reduce (max) of the found-inf flags of two ranks running in lockstep: the
// first flag waits; the second completes the collective and both receive the max.
struct LockstepMax {
  std::vector<Tensor> waiting;
  amp::GradScaler::FoundInfReducer for_rank() {
    return [this](Tensor& found_inf) {
      waiting.push_back(found_inf);
      if (waiting.size() < 2) return;
      const Tensor m = maximum(waiting[0], waiting[1]);
      for (Tensor& f : waiting) copy_(f, m);
      waiting.clear();
    };
  }
};

std::unique_ptr<Net> replica() {
  manual_seed(0);  // identical replicas, as DDP's first broadcast makes them
  return std::make_unique<Net>();
}

// Both ranks train on the same batch (as if their averaged gradients were equal); rank 1's
// gradient overflows at step 1 alone.
void two_ranks(const Tensor& x, const Tensor& y, bool agree) {
  std::unique_ptr<Net> model[2] = {replica(), replica()};
  std::unique_ptr<optim::SGD> opt[2];
  std::unique_ptr<amp::GradScaler> scaler[2];
  LockstepMax allreduce;
  for (int r = 0; r < 2; ++r) {
    opt[r] = std::make_unique<optim::SGD>(model[r]->named_parameters(), optim::SGDOptions{.lr = 1e-2});
    scaler[r] = std::make_unique<amp::GradScaler>(amp::GradScalerOptions{.init_scale = 1024.0});
    if (agree) scaler[r]->set_found_inf_reducer(allreduce.for_rank());
  }
  for (int step = 0; step < 3; ++step) {
    bool skipped[2];
    for (int r = 0; r < 2; ++r) {
      Tensor loss;
      {
        amp::Autocast ac(f16);
        loss = mse_loss((*model[r])(x), y);
      }
      scaler[r]->scale(loss).backward();
      if (r == 1 && step == 1) poison(model[r]->body->weight);
      scaler[r]->unscale_(*opt[r]);  // the reducer runs here, before either rank decides
    }
    for (int r = 0; r < 2; ++r) {
      skipped[r] = scaler[r]->step(*opt[r]).skipped();
      scaler[r]->update();
      opt[r]->zero_grad();
    }
    std::printf("%4d  %-6s  %-6s  %7g  %7g  %g\n", step, skipped[0] ? "skip" : "step", skipped[1] ? "skip" : "step",
                scaler[0]->get_scale(), scaler[1]->get_scale(), max_diff(*model[0], *model[1]));
  }
}

// What an f16 all-reduce does with two values: widen both, add exactly, round once to f16.
double f16_sum(double a, double b) {
  return add(tensor({a}).to(f16).to(f64), tensor({b}).to(f16).to(f64)).to(f16).to(f64).item<double>();
}

}  // namespace

int main() {
  Generator gen(1);
  const Tensor x = randn({32, 4}, {}, &gen);
  const Tensor y = randn({32, 1}, {}, &gen);

  std::printf("(a) one scaler, two optimizers; head.weight's gradient overflows at step 1\n");
  manual_seed(0);
  Net model;
  optim::Adam body_opt(model.body->named_parameters(), {.lr = 1e-2});
  optim::SGD head_opt(model.head->named_parameters(), {.lr = 1e-2});
  amp::GradScaler scaler({.init_scale = 1024.0});
  std::printf("step  body  head  scale after update()\n");
  for (int step = 0; step < 3; ++step) {
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(model(x), y);
    }
    scaler.scale(loss).backward();
    if (step == 1) poison(model.head->weight);
    const bool body_skipped = scaler.step(body_opt).skipped();
    const bool head_skipped = scaler.step(head_opt).skipped();
    scaler.update();
    body_opt.zero_grad();
    head_opt.zero_grad();
    std::printf("%4d  %-4s  %-4s  %g\n", step, body_skipped ? "skip" : "step", head_skipped ? "skip" : "step",
                scaler.get_scale());
  }

  for (bool agree : {false, true}) {
    std::printf("\n(b) two ranks, rank 1 overflows at step 1, %s\n", agree ? "found_inf all-reduced (max)" : "no agreement");
    std::printf("step  rank 0  rank 1  scale 0  scale 1  max |w0 - w1|\n");
    two_ranks(x, y, agree);
  }

  std::printf("\n(c) an f16 all-reduce of scaled gradients, 2 ranks\n");
  std::printf("sum of 40000 and 30000, rounded once to f16: %g (each is finite)\n", f16_sum(40000, 30000));
  std::printf("avg = that sum / 2: %g; divided by 2 first, then summed: %g\n", f16_sum(40000, 30000) / 2,
              f16_sum(40000 / 2.0, 30000 / 2.0));
  std::printf("the same in bf16: %g\n",
              add(tensor({40000.0}).to(bf16).to(f64), tensor({30000.0}).to(bf16).to(f64)).to(bf16).to(f64).item<double>());
  return 0;
}
