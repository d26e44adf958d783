// SVG plots written as text: axis ranges snap to "nice" ticks (1/2/5 x 10^k, or whole
// powers of two on a log2 axis), long series are thinned to a few points per pixel
// column so a 100k-step curve stays small, and unplottable points are drawn, not dropped.
#include "tools/svg_plot.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace hg::plot {
namespace {

constexpr const char* kFont = "system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif";
constexpr const char* kMuted = "#555";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string svg_open(int width, int height, const std::string& title) {
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << width << ' ' << height << "\" width=\""
     << width << "\" height=\"" << height << "\" role=\"img\" aria-label=\"" << xml_escape(title)
     << "\" font-family=\"" << kFont << "\" font-size=\"11\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
     << "<text x=\"" << width / 2 << "\" y=\"17\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\">"
     << xml_escape(title) << "</text>\n";
  return os.str();
}

// Ticks covering [lo, hi] at a 1/2/5 x 10^k spacing; widens [lo, hi] to whole ticks
// unless the range was fixed by the caller.
std::vector<double> linear_ticks(double& lo, double& hi, bool fixed) {
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag, step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
  if (!fixed) {
    lo = std::floor(lo / step + 1e-9) * step;
    hi = std::ceil(hi / step - 1e-9) * step;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t + 0.0);
  return ticks;
}

std::string tick_text(double v, double step) {
  char buf[32];
  if (std::abs(v) >= 1e5 || step < 1e-4) std::snprintf(buf, sizeof buf, "%g", v);
  else std::snprintf(buf, sizeof buf, "%.*f", std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9))), v);
  return std::string(buf) == "-0" ? "0" : buf;
}

// Keeps the first, lowest, highest and last point of each run of points that fall in the
// same pixel column: the drawn line is unchanged, the SVG stays small.
std::vector<std::pair<double, double>> thin(const std::vector<std::pair<double, double>>& pts) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < pts.size();) {
    size_t j = i, lo = i, hi = i;
    while (j < pts.size() && std::floor(pts[j].first) == std::floor(pts[i].first)) {
      if (pts[j].second < pts[lo].second) lo = j;
      if (pts[j].second > pts[hi].second) hi = j;
      ++j;
    }
    std::vector<size_t> keep{i, std::min(lo, hi), std::max(lo, hi), j - 1};
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t k : keep) out.push_back(pts[k]);
    i = j;
  }
  return out;
}

}  // namespace

const char* series_colour(size_t index) { return kSeriesColours[index % std::size(kSeriesColours)]; }

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_line_plot(const LinePlot& p) {
  auto to_axis = [&](double y) { return p.log2_y ? (y > 0 ? std::log2(y) : NAN) : y; };
  auto colour = [&](size_t i) { return p.series[i].colour.empty() ? series_colour(i) : p.series[i].colour.c_str(); };

  // Data ranges, from plottable points only.
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : p.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i])) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      const double y = to_axis(s.y[i]);
      if (std::isfinite(y)) y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  const bool has_data = std::isfinite(y_lo);
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1;
  if (x_hi == x_lo) x_lo -= 1, x_hi += 1;
  const bool fixed_y = std::isfinite(to_axis(p.y_min)) && std::isfinite(to_axis(p.y_max));
  if (fixed_y) y_lo = to_axis(p.y_min), y_hi = to_axis(p.y_max);
  if (!std::isfinite(y_lo)) y_lo = 0, y_hi = 1;
  if (y_hi == y_lo) {
    const double pad = p.log2_y ? 1 : (y_lo != 0 ? std::abs(y_lo) * 0.1 : 1);
    y_lo -= pad, y_hi += pad;
  }
  const std::vector<double> x_ticks = linear_ticks(x_lo, x_hi, false);
  std::vector<double> y_ticks;
  if (p.log2_y) {
    y_lo = std::floor(y_lo), y_hi = std::ceil(y_hi);
    const double stride = std::max(1.0, std::ceil((y_hi - y_lo) / 8));
    for (double k = y_lo; k <= y_hi; k += stride) y_ticks.push_back(k);
  } else {
    y_ticks = linear_ticks(y_lo, y_hi, fixed_y);
  }

  // Legend entries: the series, then the marker kinds that occur.
  struct Entry {
    std::string label, colour;
    char glyph;  // 'l' line, 'x' cross, 't' triangle
  };
  std::vector<Entry> legend;
  bool any_marker = false, any_nonfinite = false;
  for (size_t i = 0; i < p.series.size(); ++i) {
    const Series& s = p.series[i];
    legend.push_back({s.name, colour(i), 'l'});
    any_marker |= !s.marker_x.empty();
    for (double y : s.y) any_nonfinite |= !std::isfinite(to_axis(y));
  }
  if (any_marker) legend.push_back({p.marker_label, kMuted, 'x'});
  if (any_nonfinite) legend.push_back({p.log2_y ? "NaN/inf/<=0 (not plottable)" : "NaN/inf", kMuted, 't'});

  const double left = 62, right = p.width - 14;
  std::ostringstream leg;
  double lx = left, ly = 36;
  for (const Entry& e : legend) {
    const double w = 26 + 6.2 * static_cast<double>(e.label.size()) + 14;
    if (lx + w > right && lx > left) lx = left, ly += 16;
    if (e.glyph == 'l')
      leg << "<line x1=\"" << num(lx) << "\" y1=\"" << num(ly - 4) << "\" x2=\"" << num(lx + 20) << "\" y2=\""
          << num(ly - 4) << "\" stroke=\"" << e.colour << "\" stroke-width=\"2.5\"/>";
    else if (e.glyph == 'x')
      leg << "<path d=\"M" << num(lx + 6) << ' ' << num(ly - 8) << "l8 8m0-8l-8 8\" stroke=\"" << e.colour
          << "\" stroke-width=\"1.6\"/>";
    else
      leg << "<path d=\"M" << num(lx + 10) << ' ' << num(ly - 9) << "l4.5 8h-9z\" fill=\"" << e.colour << "\"/>";
    leg << "<text x=\"" << num(lx + 26) << "\" y=\"" << num(ly) << "\">" << xml_escape(e.label) << "</text>\n";
    lx += w;
  }
  const double top = ly + 14, bottom = p.height - 42;
  auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); };
  auto py = [&](double y) { return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top); };

  std::ostringstream os;
  os << svg_open(p.width, p.height, p.title) << leg.str();
  const std::string clip = p.id + "-clip";
  os << "<clipPath id=\"" << xml_escape(clip) << "\"><rect x=\"" << num(left) << "\" y=\"" << num(top - 1)
     << "\" width=\"" << num(right - left) << "\" height=\"" << num(bottom - top + 2) << "\"/></clipPath>\n";

  // Grid, ticks and axis labels.
  for (double t : y_ticks) {
    os << "<line x1=\"" << num(left) << "\" y1=\"" << num(py(t)) << "\" x2=\"" << num(right) << "\" y2=\""
       << num(py(t)) << "\" stroke=\"#e6e6e6\"/><text x=\"" << num(left - 6) << "\" y=\"" << num(py(t) + 4)
       << "\" text-anchor=\"end\" fill=\"" << kMuted << "\">";
    if (p.log2_y) os << "2<tspan dy=\"-5\" font-size=\"8.5\">" << static_cast<int>(t) << "</tspan>";
    else os << tick_text(t, y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 1);
    os << "</text>\n";
  }
  for (double t : x_ticks)
    os << "<line x1=\"" << num(px(t)) << "\" y1=\"" << num(bottom) << "\" x2=\"" << num(px(t)) << "\" y2=\""
       << num(bottom + 4) << "\" stroke=\"#999\"/><text x=\"" << num(px(t)) << "\" y=\"" << num(bottom + 16)
       << "\" text-anchor=\"middle\" fill=\"" << kMuted << "\">"
       << tick_text(t, x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1) << "</text>\n";
  os << "<path d=\"M" << num(left) << ' ' << num(top) << "V" << num(bottom) << "H" << num(right)
     << "\" fill=\"none\" stroke=\"#999\"/>\n"
     << "<text x=\"" << num((left + right) / 2) << "\" y=\"" << p.height - 8 << "\" text-anchor=\"middle\">"
     << xml_escape(p.x_label) << "</text>\n"
     << "<text transform=\"translate(14 " << num((top + bottom) / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
     << xml_escape(p.y_label) << "</text>\n";
  if (!has_data)
    os << "<text x=\"" << num((left + right) / 2) << "\" y=\"" << num((top + bottom) / 2)
       << "\" text-anchor=\"middle\" fill=\"" << kMuted << "\">no data</text>\n";

  os << "<g clip-path=\"url(#" << xml_escape(clip) << ")\">\n";
  for (const HLine& h : p.h_lines) {
    const double y = py(to_axis(h.y));
    if (!std::isfinite(y)) continue;
    os << "<line x1=\"" << num(left) << "\" y1=\"" << num(y) << "\" x2=\"" << num(right) << "\" y2=\"" << num(y)
       << "\" stroke=\"#777\" stroke-dasharray=\"5 4\"/><text x=\"" << num(left + 6) << "\" y=\"" << num(y - 5)
       << "\" fill=\"" << kMuted << "\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">"
       << xml_escape(h.label) << "</text>\n";
  }
  for (size_t si = 0; si < p.series.size(); ++si) {
    const Series& s = p.series[si];
    const size_t n = std::min(s.x.size(), s.y.size());
    std::vector<std::vector<std::pair<double, double>>> segments(1);
    std::vector<std::pair<double, bool>> unplottable;  // pixel x, at the bottom edge (-inf)
    size_t plottable = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.x[i])) continue;
      const double y = to_axis(s.y[i]);
      if (std::isfinite(y)) {
        segments.back().emplace_back(px(s.x[i]), py(y));
        ++plottable;
        continue;
      }
      if (!segments.back().empty()) segments.emplace_back();
      const double x = px(s.x[i]);
      const bool low = s.y[i] == -INFINITY || (p.log2_y && s.y[i] <= 0);
      if (unplottable.empty() || std::abs(unplottable.back().first - x) >= 1 || unplottable.back().second != low)
        unplottable.emplace_back(x, low);
    }
    os << "<g stroke=\"" << colour(si) << "\" fill=\"" << colour(si) << "\">\n";
    for (const auto& seg : segments) {
      if (seg.size() < 2) continue;
      os << "<path fill=\"none\" stroke-width=\"1.8\" stroke-linejoin=\"round\" d=\"";
      const auto pts = thin(seg);
      for (size_t i = 0; i < pts.size(); ++i) os << (i ? 'L' : 'M') << num(pts[i].first) << ' ' << num(pts[i].second);
      os << "\"/>\n";
    }
    // Dots where a line would not show every point: sparse series and isolated points.
    for (const auto& seg : segments)
      if (plottable <= 40 || seg.size() == 1)
        for (const auto& [x, y] : seg) os << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"2.6\"/>";
    for (const auto& [x, low] : unplottable)
      os << "<path stroke=\"#222\" stroke-width=\"0.6\" d=\"M" << num(x) << ' '
         << num(low ? bottom - 1 : top + 1) << (low ? "l-4.5 -8h9z" : "l-4.5 8h9z") << "\"/>";
    std::pair<double, double> last_marker{NAN, NAN};
    for (double mx : s.marker_x) {
      // The marker sits on the series at the last point at or before mx (x ascending).
      const auto it = std::upper_bound(s.x.begin(), s.x.begin() + static_cast<ptrdiff_t>(n), mx);
      const size_t i = it == s.x.begin() ? 0 : static_cast<size_t>(it - s.x.begin()) - 1;
      const double y = n ? to_axis(s.y[i]) : NAN;
      const std::pair<double, double> at{std::round(px(mx)), std::round(std::isfinite(y) ? py(y) : top + 5)};
      if (at == last_marker) continue;
      last_marker = at;
      os << "<path fill=\"none\" stroke-width=\"1.6\" d=\"M" << num(at.first - 4) << ' ' << num(at.second - 4)
         << "l8 8m0-8l-8 8\"/>";
    }
    os << "</g>\n";
  }
  os << "</g>\n</svg>\n";
  return os.str();
}

std::string svg_bar_chart(const BarChart& c) {
  constexpr double kRow = 16, kBar = 110, kPanel = 168, kTop = 52;
  size_t longest = 0;
  for (const std::string& name : c.categories) longest = std::max(longest, name.size());
  const double label_w = std::clamp(6.4 * static_cast<double>(longest) + 16, 80.0, 300.0);
  const int width = static_cast<int>(label_w + kPanel * static_cast<double>(c.panels.size()) + 10);
  const int height = static_cast<int>(kTop + kRow * static_cast<double>(c.categories.size()) + 26);
  // A full bar is the smallest of 1/2/5 x 10^k percent that holds the largest value, so
  // small fractions stay visible; the footer says what a full bar means.
  double largest = 0;
  for (const BarPanel& panel : c.panels)
    for (double v : panel.values)
      if (std::isfinite(v)) largest = std::max(largest, v);
  double full = 1;
  for (const double f : {0.01, 0.02, 0.05, 0.1, 0.2, 0.5})
    if (largest <= f) {
      full = f;
      break;
    }

  std::ostringstream os;
  os << svg_open(width, height, c.title);
  for (size_t r = 0; r < c.categories.size(); ++r) {
    const double y = kTop + kRow * static_cast<double>(r);
    if (r % 2 == 1)
      os << "<rect x=\"4\" y=\"" << num(y) << "\" width=\"" << width - 8 << "\" height=\"" << kRow
         << "\" fill=\"#f5f6f8\"/>";
    os << "<text x=\"" << num(label_w - 8) << "\" y=\"" << num(y + 11.5) << "\" text-anchor=\"end\">"
       << xml_escape(c.categories[r]) << "</text>\n";
  }
  for (size_t k = 0; k < c.panels.size(); ++k) {
    const BarPanel& panel = c.panels[k];
    const char* fill = panel.colour.empty() ? series_colour(k) : panel.colour.c_str();
    const double x0 = label_w + kPanel * static_cast<double>(k);
    os << "<text x=\"" << num(x0) << "\" y=\"" << num(kTop - 8) << "\" font-weight=\"600\" fill=\"" << fill << "\">"
       << xml_escape(panel.name) << "</text>\n";
    for (size_t r = 0; r < c.categories.size(); ++r) {
      const double y = kTop + kRow * static_cast<double>(r), v = r < panel.values.size() ? panel.values[r] : NAN;
      os << "<rect x=\"" << num(x0) << "\" y=\"" << num(y + 3) << "\" width=\"" << kBar
         << "\" height=\"10\" fill=\"#e9ebef\"/>";
      char text[32];
      if (!std::isfinite(v)) std::snprintf(text, sizeof text, "\u2013");
      else if (v > 0 && v < 0.001) std::snprintf(text, sizeof text, "<0.1%%");
      else std::snprintf(text, sizeof text, "%.1f%%", 100 * v);
      if (std::isfinite(v) && v > 0)
        os << "<rect x=\"" << num(x0) << "\" y=\"" << num(y + 3) << "\" width=\""
           << num(std::max(1.0, kBar * std::min(v / full, 1.0))) << "\" height=\"10\" fill=\"" << fill << "\"/>";
      os << "<text x=\"" << num(x0 + kBar + 5) << "\" y=\"" << num(y + 11.5) << "\" fill=\"" << kMuted << "\">"
         << xml_escape(text) << "</text>\n";
    }
  }
  os << "<text x=\"" << num(label_w) << "\" y=\"" << height - 8 << "\" fill=\"" << kMuted << "\">"
     << xml_escape(c.value_label) << "; a full bar is " << 100 * full << "%</text>\n</svg>\n";
  return os.str();
}

}  // namespace hg::plot
