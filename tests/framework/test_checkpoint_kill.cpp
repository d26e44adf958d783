// Crash safety of checkpoints: a forked child trains and checkpoints after every step
// while the parent SIGKILLs it at random moments; each time, the file on disk must be the
// last checkpoint the child reported or the one it was writing, bitwise equal to an
// uninterrupted run's state at that step, and the next child resumes from it exactly.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <thread>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <thread>

#include "halfgrad.h"
#include "tests/temp_dir.h"

using namespace hg;
using hg::test::TempDir;

namespace {

constexpr int64_t kSteps = 600;
constexpr int kKills = 60;

class Mlp : public nn::Module {
 public:
  Tensor forward_impl(const Tensor& x) override { return (*fc2)(tanh((*fc1)(x))); }
  std::string type_name() const override { return "Mlp"; }

  HG_CHILD(nn::Linear, fc1, 6, 12);
  HG_CHILD(nn::Linear, fc2, 12, 3);
};

// The whole training state; the data generator is part of it, so a resume that
// forgot it would draw other batches and diverge.
struct Trainer {
  Mlp net;
  optim::Adam opt{net.named_parameters(), optim::AdamOptions{.lr = 0.01}};
  Generator data{7};
  int64_t step = 0;

  Trainer() = default;
  explicit Trainer(const Checkpoint& ck) {
    net.load_state_dict(ck.sections.at("model"));
    opt.load_state_dict(ck.sections.at("optimizer"));
    set_generator_state(data, ck.sections.at("data"));
    step = ck.step;
  }

  void train_step() {
    Tensor x = randn({16, 6}, {f32}, &data), y = randn({16, 3}, {f32}, &data);
    mse_loss(net(x), y).backward();
    opt.step();
    opt.zero_grad();
    ++step;
  }

  Checkpoint checkpoint() const {
    Checkpoint ck;
    ck.sections = {{"model", net.state_dict()}, {"optimizer", opt.state_dict()}, {"data", generator_state(data)}};
    ck.step = step;
    return ck;
  }
};

// Every tensor's values as bits (f32 and i64 widen to double exactly), keyed by
// section/name: equal fingerprints mean bitwise equal checkpoints.
using Fingerprint = std::map<std::string, std::vector<uint64_t>>;

Fingerprint fingerprint(const Checkpoint& ck) {
  Fingerprint f;
  for (const auto& [section, state] : ck.sections)
    for (const auto& [name, t] : state) {
      auto& bits = f[section + "/" + name];
      for (double v : t.to_vector<double>()) bits.push_back(std::bit_cast<uint64_t>(v));
      bits.push_back(static_cast<uint64_t>(t.dtype()));
    }
  return f;
}

// The kernels may split work across threads; one thread on both sides keeps the child
// and the reference on the same arithmetic.
struct OneThread {
  int saved = hg::num_threads();
  OneThread() { hg::set_num_threads(1); }
  ~OneThread() { hg::set_num_threads(saved); }
};

// The child: resume from `path` if it exists, then train to kSteps, checkpointing after
// every step and reporting each finished save's step on `report_fd`. Never returns.
[[noreturn]] void child(const std::string& path, int report_fd) {
  int code = 0;
  try {
    hg::set_num_threads(1);
    Trainer t = std::filesystem::exists(path) ? Trainer(load_checkpoint(path)) : Trainer();
    while (t.step < kSteps) {
      t.train_step();
      save_checkpoint(path, t.checkpoint());
      if (::write(report_fd, &t.step, sizeof t.step) != sizeof t.step) code = 4;
    }
  } catch (...) {
    code = 3;
  }
  ::_exit(code);  // no atexit handlers, no Catch2 teardown in the child
}

struct ChildRun {
  int status = 0;
  int64_t last_reported = -1;  // step of the last save the child finished, -1 if none
};

// Forks a child; after `delay` (or never, if negative) kills it; collects its reports.
ChildRun run_child(const std::string& path, std::chrono::microseconds delay) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    child(path, fds[1]);
  }
  ::close(fds[1]);
  if (delay.count() >= 0) {
    std::this_thread::sleep_for(delay);
    ::kill(pid, SIGKILL);
  }
  ChildRun r;
  int64_t step;
  while (::read(fds[0], &step, sizeof step) == sizeof step) r.last_reported = step;
  ::close(fds[0]);
  REQUIRE(::waitpid(pid, &r.status, 0) == pid);
  return r;
}

}  // namespace

TEST_CASE("a checkpoint killed mid-training is the previous or the new one, and resume is exact",
          "[checkpoint][kill]") {
  OneThread one_thread;
  TempDir dir;
  const std::string path = dir / "ck.safetensors";

  // The uninterrupted run, its state after every step, and the time a step takes with
  // its save (to spread the kills over a few steps).
  std::vector<Fingerprint> reference;
  const auto start = std::chrono::steady_clock::now();
  {
    manual_seed(0);
    Trainer t;
    reference.push_back(fingerprint(t.checkpoint()));
    for (int64_t s = 0; s < kSteps; ++s) {
      t.train_step();
      const Checkpoint ck = t.checkpoint();
      save_checkpoint(dir / "timing.safetensors", ck);
      reference.push_back(fingerprint(ck));
    }
  }
  const auto step_time = (std::chrono::steady_clock::now() - start) / kSteps;
  std::filesystem::remove(dir / "timing.safetensors");

  std::mt19937_64 rng(20240607);
  // A child also pays for its start and its load; on a slow or busy machine (a sanitizer
  // build) that can exceed the window, so the window adapts (below).
  auto max_delay = std::chrono::duration_cast<std::chrono::microseconds>(step_time * 3) +
                   std::chrono::microseconds(1000);
  int64_t on_disk = 0;  // step of the checkpoint on disk; 0: none yet (the first save is step 1)
  int kills = 0, progressed = 0;
  for (int k = 0; k < kKills && on_disk < kSteps; ++k) {
    INFO("kill " << k << ", checkpoint on disk at step " << on_disk);
    // Every child starts from the same initial weights (the resume replaces them).
    manual_seed(0);
    const auto delay = std::chrono::microseconds(
        std::uniform_int_distribution<int64_t>(0, max_delay.count())(rng));
    const ChildRun r = run_child(path, delay);
    if (WIFEXITED(r.status)) {
      // It finished before the kill; it must have finished cleanly.
      REQUIRE(WEXITSTATUS(r.status) == 0);
    } else {
      REQUIRE(WIFSIGNALED(r.status));
      REQUIRE(WTERMSIG(r.status) == SIGKILL);
      ++kills;
    }
    if (!std::filesystem::exists(path)) {
      REQUIRE(r.last_reported == -1);
      REQUIRE(on_disk == 0);
      max_delay = std::min(max_delay * 3 / 2, std::chrono::microseconds(500'000));
      continue;
    }
    const Checkpoint ck = load_checkpoint(path);
    // The previous checkpoint (the last save reported, or the one the child started
    // from) or the new one whose rename landed just before the kill; never a mix.
    const int64_t previous = std::max(r.last_reported, on_disk);
    INFO("child reported step " << r.last_reported << ", file holds step " << ck.step);
    REQUIRE((ck.step == previous || ck.step == previous + 1));
    REQUIRE(ck.step >= 1);
    REQUIRE(ck.step <= kSteps);
    CHECK(fingerprint(ck) == reference[static_cast<size_t>(ck.step)]);
    progressed += ck.step > on_disk;
    // About a step or two per kill: widen the window after no progress, narrow it after a lot.
    if (ck.step == on_disk) max_delay = std::min(max_delay * 3 / 2, std::chrono::microseconds(500'000));
    if (ck.step > on_disk + 2) max_delay = max_delay * 2 / 3;
    on_disk = ck.step;
  }
  CHECK(kills >= 50);
  CHECK(progressed >= 10);  // the kills did not all land before a save

  // The last child runs to the end: resumed training ends where the straight run did.
  manual_seed(0);
  const ChildRun last = run_child(path, std::chrono::microseconds(-1));
  REQUIRE(WIFEXITED(last.status));
  REQUIRE(WEXITSTATUS(last.status) == 0);
  const Checkpoint end = load_checkpoint(path);
  REQUIRE(end.step == kSteps);
  CHECK(fingerprint(end) == reference[kSteps]);
  WARN("checkpoint kill test: " << kills << " kills; the checkpoint advanced " << progressed
                                  << " times, to step " << on_disk << " before the last child finished");
}
