// The figures of docs/amp.md, computed by halfgrad and written as SVG: bit layouts of
// f32/f16/bf16, the loss scaler's trajectory, update size vs ulp, an autocast graph
// coloured by dtype, a gradient-exponent histogram over f16's bands. Usage: figures DIR   (.ci/doc_outputs regenerates and diffs them)
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/svg_plot.h"
#include "halfgrad.h"

using namespace hg;
using plot::xml_escape;

namespace {

constexpr const char* kFont = "system-ui,Helvetica,Arial,sans-serif";
constexpr const char* kSign = "#CC79A7";
constexpr const char* kExponent = "#0072B2";
constexpr const char* kMantissa = "#E69F00";

std::string svg_open(int w, int h, const std::string& title) {
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << w << ' ' << h << "\" width=\"" << w
     << "\" height=\"" << h << "\" role=\"img\" aria-label=\"" << plot::xml_escape(title) << "\" font-family=\"" << kFont
     << "\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n<text x=\"" << w / 2
     << "\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\">" << plot::xml_escape(title) << "</text>\n";
  return os.str();
}

std::string text(double x, double y, const std::string& s, const char* anchor = "start", const char* extra = "") {
  std::ostringstream os;
  os << "<text x=\"" << x << "\" y=\"" << y << "\" text-anchor=\"" << anchor << "\"" << extra << ">" << plot::xml_escape(s)
     << "</text>\n";
  return os.str();
}

// One row per format: the bits of 0.1 as that format stores it, sign | exponent | fraction.
std::string bit_layouts() {
  struct Row {
    const char* name;
    int exp_bits, frac_bits;
    uint32_t bits;
    double stored;
  };
  const float tenth = 0.1f;
  const std::vector<Row> rows = {
      {"f32", 8, 23, std::bit_cast<uint32_t>(tenth), static_cast<double>(tenth)},
      {"f16", 5, 10, half(0.1).bits, static_cast<double>(half(0.1))},
      {"bf16", 8, 7, bfloat16(0.1).bits, static_cast<double>(bfloat16(0.1))},
  };
  const int cell = 18, left = 52, top = 44, row_h = 58;
  std::string s = svg_open(left + 32 * cell + 20, top + 3 * row_h + 30, "The bits of 0.1 in f32, f16 and bf16");
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    const int n = 1 + row.exp_bits + row.frac_bits, y = top + static_cast<int>(r) * row_h;
    s += text(8, y + 13, row.name, "start", " font-weight=\"600\"");
    for (int i = 0; i < n; ++i) {
      const int bit = (row.bits >> (n - 1 - i)) & 1;
      const char* fill = i == 0 ? kSign : i <= row.exp_bits ? kExponent : kMantissa;
      const int x = left + i * cell;
      s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(cell - 1) +
           "\" height=\"18\" fill=\"" + fill + "\" fill-opacity=\"" + (bit ? "0.9" : "0.25") + "\"/>\n";
      s += text(x + cell / 2.0 - 0.5, y + 13, std::to_string(bit), "middle");
    }
    char info[160];
    std::snprintf(info, sizeof info, "1 sign, %d exponent, %d fraction bits; 0.1 is stored as %.9g", row.exp_bits,
                  row.frac_bits, row.stored);
    s += text(left, y + 34, info, "start", " fill=\"#555\"");
  }
  const int ly = top + 3 * row_h + 8;
  const std::pair<const char*, const char*> legend[] = {{kSign, "sign"}, {kExponent, "exponent (range)"},
                                                        {kMantissa, "fraction (precision)"}};
  for (int i = 0; i < 3; ++i) {
    const int x = left + i * 170;
    s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(ly) + "\" width=\"12\" height=\"12\" fill=\"" +
         legend[i].first + "\"/>\n" + text(x + 17, ly + 10, legend[i].second);
  }
  return s + "</svg>\n";
}

// A GradScaler with growth_interval 5 on a gradient whose f16 value is 4 x scale: it
// overflows f16 from scale 2^14 on, so the scale climbs, overflows, backs off, climbs.
std::string scaler_trajectory() {
  Tensor w = tensor({1.0}).set_requires_grad().set_name("w");
  optim::SGD opt({{"w", w}}, {.lr = 1e-3});
  amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 5});
  plot::Series scale;
  scale.name = "loss scale S (before the step)";
  for (int step = 0; step < 60; ++step) {
    Tensor loss = sum(mul(w.to(f16), tensor({4.0}).to(f16)).to(f32));  // dloss/dw = 4, in f16
    scaler.scale(loss).backward();
    amp::StepResult r = scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    scale.x.push_back(step);
    scale.y.push_back(r.scale_value());
    if (r.skipped()) scale.marker_x.push_back(step);
  }
  plot::LinePlot p{.id = "scaler",
                       .title = "GradScaler (growth_interval 5): grow, overflow, back off",
                       .x_label = "step",
                       .y_label = "scale",
                       .log2_y = true,
                       .y_min = 512,
                       .y_max = 32768,
                       .h_lines = {{16384, "4 x S > 65504: the f16 gradient overflows"}},
                       .series = {scale}};
  return plot::svg_line_plot(p);
}

// Half the ulp of |w| in each format: an update smaller than this rounds away.
std::string update_vs_ulp() {
  std::vector<plot::Series> series;
  for (DType dt : {f32, bf16, f16}) {
    plot::Series s;
    s.name = std::string("half an ulp of an ") + dtype_name(dt) + " weight";
    for (int i = 0; i <= 160; ++i) {
      const double log2w = -10 + i * 0.0625, wv = std::exp2(log2w);
      const double stored = tensor({wv}).to(dt).to(f64).item<double>();
      const double next = std::nextafter(static_cast<float>(stored), INFINITY);
      double ulp = next - stored;
      if (dt != f32) {  // the next value up in the 16-bit format
        double step = ulp;
        while (tensor({stored + step}).to(dt).to(f64).item<double>() == stored) step *= 2;
        ulp = tensor({stored + step}).to(dt).to(f64).item<double>() - stored;
      }
      s.x.push_back(log2w);
      s.y.push_back(ulp / 2);
    }
    series.push_back(s);
  }
  plot::LinePlot p{.id = "ulp",
                       .title = "Updates below half an ulp are swallowed (round to nearest even)",
                       .x_label = "log2 |w|",
                       .y_label = "smallest update that moves w",
                       .log2_y = true,
                       .h_lines = {{1e-4, "an update of 1e-4 (lr 1e-4, |grad| ~ 1)"}},
                       .series = series};
  return plot::svg_line_plot(p);
}

// The graph of docs/amp.md step 3, one box per line of autograd::graph_to_string, filled
// by the dtype the node produces; an edge from each node to its parent.
std::string autocast_graph() {
  manual_seed(0);
  nn::Linear fc(4, 2, false);
  fc.weight.set_name("fc.weight");
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = sum(fc(randn({3, 4})));
  }
  std::istringstream in(autograd::graph_to_string(loss));
  std::vector<std::pair<int, std::string>> nodes;  // depth, label
  for (std::string line; std::getline(in, line);) {
    const size_t indent = line.find_first_not_of(' ');
    nodes.push_back({static_cast<int>(indent / 2), line.substr(indent)});
  }
  const int box_w = 230, box_h = 26, gap = 14, left = 20, top = 40;
  std::string s = svg_open(left + 4 * 40 + box_w + 20, top + static_cast<int>(nodes.size()) * (box_h + gap) + 40,
                           "An O1 graph under autocast(f16), coloured by dtype");
  std::vector<int> parent_at_depth(nodes.size() + 1, -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& [depth, label] = nodes[i];
    const int x = left + depth * 40, y = top + static_cast<int>(i) * (box_h + gap);
    const bool is16 = label.find("f16[") != std::string::npos;
    s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(box_w) +
         "\" height=\"" + std::to_string(box_h) + "\" rx=\"4\" fill=\"" + (is16 ? kMantissa : kExponent) +
         "\" fill-opacity=\"0.35\" stroke=\"#333\"/>\n" + text(x + 8, y + 17, label);
    if (depth > 0) {
      const int p = parent_at_depth[depth - 1];
      const int px = left + (depth - 1) * 40 + 12, py = top + p * (box_h + gap) + box_h;
      s += "<path d=\"M" + std::to_string(px) + ' ' + std::to_string(py) + " V" + std::to_string(y + box_h / 2) + " H" +
           std::to_string(x) + "\" fill=\"none\" stroke=\"#333\"/>\n";
    }
    parent_at_depth[depth] = static_cast<int>(i);
  }
  const int ly = top + static_cast<int>(nodes.size()) * (box_h + gap) + 8;
  s += "<rect x=\"20\" y=\"" + std::to_string(ly) + "\" width=\"12\" height=\"12\" fill=\"" + kExponent +
       "\" fill-opacity=\"0.35\"/>\n" + text(37, ly + 10, "f32") + "<rect x=\"80\" y=\"" + std::to_string(ly) +
       "\" width=\"12\" height=\"12\" fill=\"" + kMantissa + "\" fill-opacity=\"0.35\"/>\n" +
       text(97, ly + 10, "f16 (gradients flow back through each node in its dtype)");
  return s + "</svg>\n";
}

// The figure of Micikevicius et al. 2018 (Fig. 3), from halfgrad's data: log2 |g| of the
// logits' gradient of a confident pixel classifier (65536 pixels, mean cross-entropy),
// f32 unscaled next to the f16 values an amp step stores at the default scale 2^16,
// over f16's bands.
std::string gradient_histogram() {
  constexpr int64_t kPixels = 65536;
  constexpr int kLo = -40, kHi = 17;  // floor(log2 |g|) bins; zeros get their own bar
  Generator gen(5);
  const Tensor x = randn({kPixels, 8}, {}, &gen);
  const Tensor y = gt(sum(x.slice(1, 0, 2), {1}), 0.0).to(i64);
  manual_seed(5);
  nn::Linear fc(8, 2);
  optim::Adam opt(fc.named_parameters(), {.lr = 0.1});
  for (int s = 0; s < 30; ++s) {
    cross_entropy(fc(x), y).backward();
    opt.step();
    opt.zero_grad();
  }
  Tensor logits32 = fc(x);
  logits32.retain_grad();
  cross_entropy(logits32, y).backward();
  Tensor logits16, loss;
  {
    amp::Autocast ac(f16);
    logits16 = fc(x);
    loss = cross_entropy(logits16, y);
  }
  logits16.retain_grad();
  mul(loss, 65536.0).backward();
  struct Hist {
    std::vector<double> frac = std::vector<double>(kHi - kLo + 2, 0.0);  // [0]: zeros
    double flushed = 0;  // f32: |g| <= 2^-25 (would flush in f16); f16: stored as 0
  };
  auto histogram = [&](const Tensor& g, bool is16) {
    Hist h;
    const std::vector<double> v = g.to_vector<double>();
    for (double e : v) {
      const double a = std::fabs(e);
      const int bin = a == 0 ? 0 : 1 + std::clamp(static_cast<int>(std::floor(std::log2(a))), kLo, kHi) - kLo;
      h.frac[bin] += 1.0 / static_cast<double>(v.size());
      if (is16 ? a == 0 : a <= 0x1p-25) h.flushed += 1.0 / static_cast<double>(v.size());
    }
    return h;
  };
  const Hist h32 = histogram(logits32.grad(), false), h16 = histogram(logits16.grad(), true);

  const int left = 56, top = 58, plot_w = 640, plot_h = 220, nbins = kHi - kLo + 2;
  const double bw = static_cast<double>(plot_w) / nbins;
  double ymax = 0;
  for (int i = 0; i < nbins; ++i) ymax = std::max({ymax, h32.frac[i], h16.frac[i]});
  auto xpos = [&](double log2v) { return left + (1 + log2v - kLo) * bw; };  // bin 0 is the zeros bar
  std::string s = svg_open(left + plot_w + 20, top + plot_h + 92,
                           "Logit gradients over f16's bands: f32 unscaled vs amp's stored f16 (scale 2^16)");
  const struct {
    double lo, hi;
    const char *fill, *label;
  } bands[] = {{kLo, -25, "#d55e00", "flushes to 0"},   {-25, -24, "#e69f00", ""},
               {-24, -14, "#f0e442", "subnormal"},       {-14, 16, "#009e73", "normal"},
               {16, kHi + 1, "#000000", "overflow"}};
  for (const auto& b : bands) {
    s += "<rect x=\"" + std::to_string(xpos(b.lo)) + "\" y=\"" + std::to_string(top) + "\" width=\"" +
         std::to_string(xpos(b.hi) - xpos(b.lo)) + "\" height=\"" + std::to_string(plot_h) + "\" fill=\"" + b.fill +
         "\" fill-opacity=\"0.12\"/>\n" + text((xpos(b.lo) + xpos(b.hi)) / 2, top - 6, b.label, "middle");
  }
  const std::pair<const Hist*, const char*> series[] = {{&h32, kExponent}, {&h16, kMantissa}};
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < nbins; ++i) {
      const double hgt = plot_h * series[k].first->frac[i] / ymax;
      if (hgt <= 0) continue;
      s += "<rect x=\"" + std::to_string(left + i * bw + k * bw / 2) + "\" y=\"" + std::to_string(top + plot_h - hgt) +
           "\" width=\"" + std::to_string(bw / 2) + "\" height=\"" + std::to_string(hgt) + "\" fill=\"" +
           series[k].second + "\"/>\n";
    }
  s += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(top + plot_h) + "\" x2=\"" +
       std::to_string(left + plot_w) + "\" y2=\"" + std::to_string(top + plot_h) + "\" stroke=\"#333\"/>\n";
  s += text(left + bw / 2, top + plot_h + 14, "0", "middle");
  for (int e = -35; e <= 15; e += 5) s += text(xpos(e), top + plot_h + 14, std::to_string(e), "middle");
  s += text(left + plot_w / 2.0, top + plot_h + 30,
            "floor(log2 |gradient|) (the first bar: exact zeros; the second: everything below 2^-39)", "middle");
  char l32[120], l16[120];
  std::snprintf(l32, sizeof l32, "f32, unscaled: %.1f%% would flush if stored in f16 unscaled", 100 * h32.flushed);
  std::snprintf(l16, sizeof l16, "f16 as amp stores it (x 2^16): %.1f%% stored as 0", 100 * h16.flushed);
  const int ly = top + plot_h + 46;
  s += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(ly) + "\" width=\"12\" height=\"12\" fill=\"" +
       kExponent + "\"/>\n" + text(left + 17, ly + 10, l32);
  s += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(ly + 18) +
       "\" width=\"12\" height=\"12\" fill=\"" + kMantissa + "\"/>\n" + text(left + 17, ly + 28, l16);
  return s + "</svg>\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: figures DIR (writes DIR/*.svg)\n");
    return 2;
  }
  const std::pair<const char*, std::string> figures[] = {{"bit_layouts.svg", bit_layouts()},
                                                         {"scaler_trajectory.svg", scaler_trajectory()},
                                                         {"update_vs_ulp.svg", update_vs_ulp()},
                                                         {"autocast_graph.svg", autocast_graph()},
                                                         {"gradient_histogram.svg", gradient_histogram()}};
  for (const auto& [name, svg] : figures) {
    const std::string path = std::string(argv[1]) + "/" + name;
    std::ofstream out(path);
    out << svg;
    if (!out) {
      std::fprintf(stderr, "figures: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
