// A character-level language model: the small GPT of models/gpt.h trained on the text
// halfgrad ships (README.md and docs/*.md) in fp32, amp (f16 autocast + GradScaler) and
// bf16 autocast, from the same initial weights and batches; prints the loss curves and
// exits 1 unless amp's and bf16's final losses are within stated tolerances of fp32's
// (~12 s of CPU for the default 200 steps).
// Then an f16-hostile setting (attention logits scaled up 10^6-fold) and what the
// debugging tools say about it.  Usage: char_lm [--steps N] [--source DIR]
#include <algorithm>
#include <cmath>
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

// How far the final loss (the mean of the last 10 steps) may lie from fp32's, in nats.
// Measured: amp within 0.01 of fp32 at 40 and 300 steps; bf16, with 8x f16's rounding
// error, drifts further (0.08 lower at both), so its bound is looser.
constexpr double kAmpTolerance = 0.05;
constexpr double kBf16Tolerance = 0.2;

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

enum class Mode { fp32, amp, bf16 };

struct Setup {
  GPTConfig config;
  std::shared_ptr<data::Dataset> data;
  int steps = 0;
};

Tensor lm_loss(GPT& model, const data::Example& b) {
  return cross_entropy(model(b.input).to(f32), b.target);
}

// Trains from the seed-0 initial weights on the seed-1 batch order; returns the losses.
std::vector<double> train(const Setup& s, Mode mode) {
  manual_seed(0);
  GPT model(s.config);
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
      if (mode != Mode::fp32) ac.emplace(mode == Mode::amp ? f16 : bf16);
      loss = lm_loss(model, *batch);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

double tail_mean(const std::vector<double>& v) {
  const size_t n = std::min<size_t>(10, v.size());
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(n);
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
  const char* env = std::getenv("HG_SOURCE_DIR");
  std::filesystem::path source = env ? env : HG_SOURCE_DIR;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps") s.steps = std::atoi(argv[i + 1]);
    else if (a == "--source") source = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: char_lm [--steps N] [--source DIR]\n");
      return 2;
    }
  }
  if (s.steps < 10) {
    std::fprintf(stderr, "char_lm: --steps must be at least 10\n");
    return 2;
  }
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
  s.data = std::make_shared<CharWindows>(from_vector(ids, {static_cast<int64_t>(ids.size())}, {i64}), 32);
  std::printf("corpus: %zu characters, vocabulary %d; GPT %lld layers, %lld heads, width %lld; %d steps\n",
              text.size(), vocab, static_cast<long long>(s.config.n_layer), static_cast<long long>(s.config.n_head),
              static_cast<long long>(s.config.n_embd), s.steps);

  std::vector<std::vector<double>> curves;
  for (Mode m : {Mode::fp32, Mode::amp, Mode::bf16}) curves.push_back(train(s, m));
  std::printf("\n%6s %8s %8s %8s\n", "step", "fp32", "amp", "bf16");
  for (int i = 0; i < s.steps; ++i)
    if (i % 10 == 0 || i == s.steps - 1)
      std::printf("%6d %8.4f %8.4f %8.4f\n", i, curves[0][i], curves[1][i], curves[2][i]);
  const double f = tail_mean(curves[0]), a = tail_mean(curves[1]), b = tail_mean(curves[2]);
  std::printf("final loss (mean of the last 10 steps): fp32 %.4f, amp %.4f (%+.4f, tolerance %.2f), "
              "bf16 %.4f (%+.4f, tolerance %.2f); at the start ln(vocab) = %.4f\n",
              f, a, a - f, kAmpTolerance, b, b - f, kBf16Tolerance, std::log(vocab));
  hostile(s);
  const bool ok = std::abs(a - f) <= kAmpTolerance && std::abs(b - f) <= kBf16Tolerance && f < 0.8 * std::log(vocab);
  std::printf("\n%s\n", ok ? "OK: amp and bf16 match fp32 within the tolerance, and the model learned"
                           : "FAIL: a mixed-precision run left the tolerance (or fp32 did not learn)");
  return ok ? 0 : 1;
}
