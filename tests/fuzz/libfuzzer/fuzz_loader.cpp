// libFuzzer target: bytes as a safetensors file, loaded as one and as a checkpoint, whose
// sections are then restored into a small model, Adam, a scheduler, a GradScaler and the
// generator, as a resume would. Every input loads or raises hg::Error.
// HG_FUZZ_WRITE_SEED=FILE writes a valid checkpoint of that state (the seed corpus' start).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "halfgrad.h"
#include "tests/fuzz/libfuzzer/target.h"

using namespace hg;

namespace {

// The state a resume restores, built the same way for every input.
struct Run {
  nn::Linear net{3, 2};
  optim::Adam opt{net.named_parameters(), optim::AdamOptions{.lr = 0.01}};
  optim::CosineAnnealingLR sched{opt, 20, 1e-4, 3};
  amp::GradScaler scaler{amp::GradScalerOptions{.init_scale = 1024.0, .growth_interval = 3}};
  Generator gen{7};

  Checkpoint checkpoint() {
    Tensor loss = sum(net(ones({4, 3})));
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    sched.step();
    Checkpoint ck;
    ck.sections = {{"model", net.state_dict()},      {"optimizer", opt.state_dict()},
                   {"scheduler", sched.state_dict()}, {"scaler", scaler.state_dict()},
                   {"rng", generator_state(gen)}};
    ck.step = 1;
    ck.metadata = {{"note", "seed"}};
    return ck;
  }

  void restore(const Checkpoint& ck) {
    const auto section = [&](const char* name) -> const StateDict* {
      auto it = ck.sections.find(name);
      return it == ck.sections.end() ? nullptr : &it->second;
    };
    if (const StateDict* s = section("model")) net.load_state_dict(*s);
    if (const StateDict* s = section("optimizer")) opt.load_state_dict(*s);
    if (const StateDict* s = section("scheduler")) sched.load_state_dict(*s);
    if (const StateDict* s = section("scaler")) scaler.load_state_dict(*s);
    if (const StateDict* s = section("rng")) set_generator_state(gen, *s);
  }
};

// An in-memory regular file (memfd), so each input costs no disk I/O.
std::string input_path(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("hg-fuzz-input", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t put = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (put <= 0) std::abort();
    done += static_cast<size_t>(put);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("HG_FUZZ_WRITE_SEED")) {
    Run run;
    save_checkpoint(seed, run.checkpoint());
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = input_path(data, size);
  fuzz::expect_clean("fuzz_loader", [&] {
    const SafetensorsFile file = load_safetensors(path);
    for (const auto& [name, t] : file.tensors) {
      // What was accepted is readable to its last byte (ASan checks the reads).
      fuzz::require(t.defined() && t.numel() >= 0, "fuzz_loader", "an undefined or negative-size tensor");
      if (t.numel() > 0 && t.numel() <= 4096) (void)sum(t.to(f64)).item<double>();
    }
  });
  fuzz::expect_clean("fuzz_loader", [&] {
    const Checkpoint ck = load_checkpoint(path);
    Run run;
    run.restore(ck);
    (void)run.opt.state_dict();
    (void)run.scaler.get_scale();
    (void)run.sched.state_dict();
  });
  return 0;
}
