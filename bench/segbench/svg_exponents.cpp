// Bars per binade on a shared axis from 2^-40 to 2^20 plus a bar for exact zeros, over
// shaded f16 bands; bar heights are fractions of the tensor's elements.
#include "bench/segbench/svg_exponents.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "tools/svg_plot.h"

namespace hg::segbench {
namespace {

constexpr int kPanelHeight = 205, kWidth = 680, kLeft = 48, kRight = 12, kTop = 28, kPlotHeight = 120;
constexpr int kZeroBar = 3;  // slots left of 2^-40: the bar for exact zeros, then a gap

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  return buf;
}

// Band edges in log2 units: flush at or below -25 (only exactly 2^-25 of its binade
// flushes; the rest rounds up to 2^-24), subnormal below -14, overflow from 65520 ~ 2^16
// (the legend line under each panel gives the exact edges).
struct Band {
  double lo, hi;
  const char* name;
  const char* fill;
};
constexpr Band kBands[] = {{-41, -25, "flush \u2264 2^-25", "#f4cccc"},
                           {-25, -14, "subnormal", "#fce5cd"},
                           {-14, 16, "normal", "#d9ead3"},
                           {16, 21, "overflow", "#e6b8af"}};

}  // namespace

std::string exponent_bands_text(const GradientExponents& e) {
  if (e.numel == 0) return "no values";
  const double n = static_cast<double>(e.numel);
  const int64_t normal = e.numel - e.zeros - e.flush - e.subnormal - e.overflow;
  const bool f16 = e.dtype == "f16";
  return std::string(f16 ? "flushed (stored zeros) " + pct(static_cast<double>(e.zeros) / n)
                         : "would flush if stored in f16 " + pct(static_cast<double>(e.flush) / n) + ", zero " +
                               pct(static_cast<double>(e.zeros) / n)) +
         ", subnormal " + pct(static_cast<double>(e.subnormal) / n) + ", normal " +
         pct(static_cast<double>(normal) / n) + ", overflow " + pct(static_cast<double>(e.overflow) / n);
}

std::string svg_exponent_histogram(const std::string& title, const std::vector<ExponentPanel>& panels) {
  const int height = kTop + static_cast<int>(panels.size()) * kPanelHeight;
  const int slots = GradientExponents::kHi - GradientExponents::kLo + 1 + kZeroBar;
  const double slot_w = static_cast<double>(kWidth - kLeft - kRight) / slots;
  auto x_of = [&](double log2) { return kLeft + (log2 - GradientExponents::kLo + kZeroBar) * slot_w; };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << kWidth << ' ' << height << "\" width=\"" << kWidth
     << "\" height=\"" << height << "\" role=\"img\" aria-label=\"" << plot::xml_escape(title)
     << "\" font-family=\"system-ui,Helvetica,Arial,sans-serif\" font-size=\"11\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n<text x=\"" << kWidth / 2
     << "\" y=\"17\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\">" << plot::xml_escape(title) << "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const GradientExponents& e = *panels[p].exponents;
    const int top = kTop + static_cast<int>(p) * kPanelHeight + 16, base = top + kPlotHeight;
    os << "<text x=\"" << kLeft << "\" y=\"" << top - 4 << "\" font-weight=\"600\">" << plot::xml_escape(panels[p].title)
       << "</text>\n";
    for (const Band& b : kBands) {
      const double x0 = std::max(x_of(b.lo), x_of(GradientExponents::kLo)), x1 = std::min(x_of(b.hi), x_of(21));
      os << "<rect x=\"" << x0 << "\" y=\"" << top << "\" width=\"" << x1 - x0 << "\" height=\"" << kPlotHeight
         << "\" fill=\"" << b.fill << "\"><title>" << plot::xml_escape(b.name) << "</title></rect>\n"
         << "<text x=\"" << (x0 + x1) / 2 << "\" y=\"" << top + 12 << "\" text-anchor=\"middle\" fill=\"#555\">"
         << plot::xml_escape(b.name) << "</text>\n";
    }
    const double n = std::max<double>(1, static_cast<double>(e.numel));
    double tallest = static_cast<double>(e.zeros) / n;
    for (int64_t c : e.bins) tallest = std::max(tallest, static_cast<double>(c) / n);
    tallest = std::max(tallest, 1e-9);
    auto bar = [&](double x, double frac, const char* colour, const std::string& tip) {
      const double h = (kPlotHeight - 18) * frac / tallest;
      os << "<rect x=\"" << x + 0.5 << "\" y=\"" << base - h << "\" width=\"" << slot_w - 1 << "\" height=\"" << h
         << "\" fill=\"" << colour << "\"><title>" << plot::xml_escape(tip) << "</title></rect>\n";
    };
    bar(x_of(GradientExponents::kLo - kZeroBar), static_cast<double>(e.zeros) / n, "#D55E00", "exactly 0: " + pct(e.zeros / n));
    for (int k = GradientExponents::kLo; k <= GradientExponents::kHi; ++k) {
      const double frac = static_cast<double>(e.bins[static_cast<size_t>(k - GradientExponents::kLo)]) / n;
      if (frac > 0) bar(x_of(k), frac, "#0072B2", "[2^" + std::to_string(k) + ", 2^" + std::to_string(k + 1) + "): " + pct(frac));
    }
    os << "<line x1=\"" << kLeft << "\" y1=\"" << base << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << base
       << "\" stroke=\"#333\"/>\n<text x=\"" << x_of(GradientExponents::kLo - kZeroBar) + slot_w / 2 << "\" y=\"" << base + 13
       << "\" text-anchor=\"middle\">=0</text>\n";
    for (int k = -40; k <= 20; k += 5)
      os << "<text x=\"" << x_of(k) + slot_w / 2 << "\" y=\"" << base + 13 << "\" text-anchor=\"middle\">" << k << "</text>\n";
    os << "<text x=\"" << kLeft << "\" y=\"" << base + 28 << "\" fill=\"#333\">log2 |g| (binade); "
       << plot::xml_escape(exponent_bands_text(e)) << "</text>\n<text x=\"" << kLeft << "\" y=\"" << base + 42
       << "\" fill=\"#555\">f16: |g| \u2264 2^-25 rounds to 0; below 2^-14 subnormal; \u2265 65520 rounds to inf</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace hg::segbench
