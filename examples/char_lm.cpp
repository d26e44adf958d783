// A character-level language model: the small GPT of models/gpt.h trained on the text
// halfgrad ships (README.md and docs/*.md) in fp32, amp (f16 autocast + GradScaler) and
// bf16 autocast, from the same initial weights and batches; prints the loss curves and
// exits 1 unless the trained models' held-out losses are within a stated tolerance of
// fp32's (~11 s of CPU for the default 200 steps).
// Then an f16-hostile setting (attention logits scaled up 10^6-fold) and what the
// debugging tools say about it.  Usage: char_lm [--steps N] [--source DIR] [--threads N]
// [--seed N] (the initial weights' seed) [--f64] (an f64 run too, printed beside the others)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

// How far a trained model's held-out loss may lie from the fp32 model's, in nats, either way.
// Not a precision effect: on the weights of step 14 fp32's gradients are f64's to 1e-6, amp's
// to 1e-3 and bf16's to 1e-2 (rounding, nothing systematic; tests/models/test_gpt.cpp checks
// fp32 training against f64 step by step). Where a run ends at 200 steps depends on when it
// leaves the ~3.5 plateau, and that hangs on perturbations far below f16's rounding. Held-out
// losses (f64 / fp32 / fp32 from initial weights scaled by 1 + 1e-6 N(0,1) / amp / bf16) for
// initial-weight seeds 0..3 (--seed) on one corpus: 3.168 3.171 3.141 2.955 2.986; 2.955 2.950
// 3.167 3.119 3.043; 2.940 2.940 2.940 2.940 2.935; 2.945 2.945 2.945 2.943 2.951. After one
// edit of docs/layers.md, seed 0 (--f64): f64 3.233, fp32 3.050 (parted from f64 at step ~25),
// amp 3.126, bf16 2.984. Runs end near 2.94 or near 3.15, either side of fp32.
constexpr double kAmpTolerance = 0.3;
constexpr double kBf16Tolerance = 0.3;

std::string read_corpus(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> files{root / "README.md"};
  for (const auto& e : std::filesystem::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  std::sort(files.begin() + 1, files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + f.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  return text;
}

// Every window of `block` characters is an example; its target is the window shifted by one.
class CharWindows : public data::Dataset {
 public:
  CharWindows(Tensor tokens, int64_t block) : tokens_(std::move(tokens)), block_(block) {}
  int64_t size() const override { return tokens_.size(0) - block_; }
  data::Example get(int64_t i) const override {
    return {tokens_.narrow(0, i, block_), tokens_.narrow(0, i + 1, block_)};
  }

 private:
  Tensor tokens_;
  int64_t block_;
};

enum class Mode { fp32, amp, bf16, f64 };

struct Setup {
  GPTConfig config;
  std::shared_ptr<data::Dataset> data, held_out;  // the first 90% of the text, the rest
  int steps = 0;
  uint64_t seed = 0;  // of the initial weights
};

struct Run {
  std::vector<double> losses;  // training loss per step
  double held_out = 0;         // loss of the trained model (no autocast) on 256 held-out windows
};

Tensor lm_loss(GPT& model, const data::Example& b) {
  const Tensor logits = model(b.input);
  return cross_entropy(logits.dtype() == f64 ? logits : logits.to(f32), b.target);
}

// The trained model's loss (fp32, f64 for the f64 run) on a fixed sample of held-out windows: unlike the last
// training losses, it does not depend on which batches the last steps happened to draw.
double held_out_loss(const Setup& s, GPT& model) {
  NoGrad ng;
  data::DataLoader loader(s.held_out, {.batch_size = 64, .seed = 2});
  double total = 0;
  for (int i = 0; i < 4; ++i) total += lm_loss(model, *loader.next()).item<double>();
  return total / 4;
}

// Trains from the seed-s.seed initial weights on the seed-1 batch order.
Run train(const Setup& s, Mode mode) {
  manual_seed(s.seed);
  GPT model(s.config);
  if (mode == Mode::f64) model.to(f64);
  optim::Adam opt(model.named_parameters(), {.lr = 3e-3});
  amp::GradScaler scaler({.enabled = mode == Mode::amp});
  data::DataLoader loader(s.data, {.batch_size = 16, .shuffle = true, .drop_last = true, .seed = 1});
  std::vector<double> losses;
  while (static_cast<int>(losses.size()) < s.steps) {
    auto batch = loader.next();
    if (!batch) continue;  // a new epoch
    Tensor loss;
    {
      std::optional<amp::Autocast> ac;
      if (mode == Mode::amp || mode == Mode::bf16) ac.emplace(mode == Mode::amp ? f16 : bf16);
      loss = lm_loss(model, *batch);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    losses.push_back(loss.item<double>());
  }
  return {losses, held_out_loss(s, model)};
}

// The same model with attention logits scaled by 10^6: in f32 the softmax saturates but
// stays finite; in f16 the scaled queries exceed 65504. Which layer? Ask the tools.
void hostile(const Setup& s) {
  GPTConfig c = s.config;
  c.attn_scale = 1e6;
  manual_seed(0);
  GPT model(c);
  data::DataLoader loader(s.data, {.batch_size = 16, .seed = 1});
  const data::Example batch = *loader.next();
  std::printf("\nf16-hostile setting: attention logits scaled by %g\n", c.attn_scale);
  {
    amp::NumericsMonitor mon(model, {.every = 1});
    mon.begin_step(0);
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = lm_loss(model, batch);
    }
    mon.end_step();
    std::printf("amp loss: %g\n", loss.item<double>());
    auto first = mon.first_overflow();
    std::printf("NumericsMonitor, first overflow: %s\n", first ? first->label().c_str() : "(none)");
  }
  try {
    amp::DetectAnomaly guard;
    amp::Autocast ac(f16);
    lm_loss(model, batch);
    std::printf("DetectAnomaly: nothing found\n");
  } catch (const NumericsError& e) {
    std::printf("DetectAnomaly: %s\n", e.what());
  }
  try {
    amp::DetectAnomaly guard({.check_f16_range = true});
    lm_loss(model, batch);  // fp32: finite, but beyond f16's range
    std::printf("DetectAnomaly(check_f16_range) on fp32: nothing found\n");
  } catch (const NumericsError& e) {
    std::printf("DetectAnomaly(check_f16_range) on the fp32 run: %s\n", e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows up line by line in CI logs
  Setup s;
  s.steps = 200;
  // This model's tensors are too small to split well: one thread takes ~12 s of CPU,
  // while two spend most of their time waiting for each other on a busy machine.
  int threads = 1;
  bool with_f64 = false;
  const char* env = std::getenv("HG_SOURCE_DIR");
  std::filesystem::path source = env ? env : HG_SOURCE_DIR;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--f64") {
      with_f64 = true;
      --i;
    } else if (i + 1 == argc) {
      std::fprintf(stderr, "char_lm: %s needs a value\n", a.c_str());
      return 2;
    } else if (a == "--steps") s.steps = std::atoi(argv[i + 1]);
    else if (a == "--source") source = argv[i + 1];
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--seed") s.seed = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: char_lm [--steps N] [--source DIR] [--threads N] [--seed N] [--f64]\n");
      return 2;
    }
  }
  if (s.steps < 10 || threads < 1) {
    std::fprintf(stderr, "char_lm: --steps must be at least 10 and --threads at least 1\n");
    return 2;
  }
  set_num_threads(threads);
  std::string text;
  try {
    text = read_corpus(source);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm: cannot read README.md and docs/*.md under %s: %s\n", source.c_str(), e.what());
    return 2;
  }
  if (text.size() < 1000) {
    std::fprintf(stderr, "char_lm: only %zu characters of text under %s; need at least 1000\n", text.size(),
                 source.c_str());
    return 2;
  }
  std::vector<int> code(256, -1);
  std::vector<double> ids;
  int vocab = 0;
  for (unsigned char ch : text) code[ch] = 0;
  for (int& c : code)
    if (c == 0) c = vocab++;
  for (unsigned char ch : text) ids.push_back(code[ch]);
  s.config = {.vocab_size = vocab, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 48};
  const Tensor tokens = from_vector(ids, {static_cast<int64_t>(ids.size())}, {i64});
  const int64_t split = tokens.size(0) * 9 / 10;
  s.data = std::make_shared<CharWindows>(tokens.narrow(0, 0, split), 32);
  s.held_out = std::make_shared<CharWindows>(tokens.narrow(0, split, tokens.size(0) - split), 32);
  std::printf("corpus: %zu characters, vocabulary %d; GPT %lld layers, %lld heads, width %lld; %d steps\n",
              text.size(), vocab, static_cast<long long>(s.config.n_layer), static_cast<long long>(s.config.n_head),
              static_cast<long long>(s.config.n_embd), s.steps);

  std::vector<Run> runs;
  for (Mode m : {Mode::fp32, Mode::amp, Mode::bf16}) runs.push_back(train(s, m));
  if (with_f64) runs.push_back(train(s, Mode::f64));
  std::printf("\ntraining loss\n%6s %8s %8s %8s%s\n", "step", "fp32", "amp", "bf16", with_f64 ? "      f64" : "");
  for (int i = 0; i < s.steps; ++i)
    if (i % 10 == 0 || i == s.steps - 1) {
      std::printf("%6d %8.4f %8.4f %8.4f", i, runs[0].losses[i], runs[1].losses[i], runs[2].losses[i]);
      if (with_f64) std::printf(" %8.4f", runs[3].losses[i]);
      std::printf("\n");
    }
  const double f = runs[0].held_out, a = runs[1].held_out, b = runs[2].held_out;
  std::printf("held-out loss of the trained models (fp32 evaluation): fp32 %.4f, amp %.4f (%+.4f, tolerance %.2f), "
              "bf16 %.4f (%+.4f, tolerance %.2f); at the start ln(vocab) = %.4f\n",
              f, a, a - f, kAmpTolerance, b, b - f, kBf16Tolerance, std::log(vocab));
  if (with_f64) std::printf("f64 reference: held-out %.4f (fp32 %+.4f from it)\n", runs[3].held_out, f - runs[3].held_out);
  hostile(s);
  const bool ok = std::abs(a - f) <= kAmpTolerance && std::abs(b - f) <= kBf16Tolerance && f < 0.8 * std::log(vocab) &&
                  a < 0.8 * std::log(vocab) && b < 0.8 * std::log(vocab);
  std::printf("\n%s\n", ok ? "OK: amp and bf16 end within the tolerance of fp32, and every model learned"
                           : "FAIL: a mixed-precision run ended further from fp32 than the tolerance, or a model did not learn");
  return ok ? 0 : 1;
}
