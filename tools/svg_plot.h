// Plots as inline SVG text (segbench's HTML report, docs/figures): line plots (several
// series, legend, ticks, linear or log2 y, NaN/inf points broken out and marked, markers
// at chosen x such as skipped steps) and a per-layer bar chart, one panel per series.
#pragma once
#include <cmath>
#include <string>
#include <vector>

namespace hg::plot {

// Colour-blind-safe series colours (Okabe-Ito without the yellow, which vanishes on white).
inline constexpr const char* kSeriesColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                                 "#D55E00", "#56B4E9", "#000000"};
const char* series_colour(size_t index);

struct Series {
  std::string name, colour;  // colour "" = series_colour(position in the plot)
  std::vector<double> x, y;  // same length; non-finite y (or y <= 0 on a log2 axis) breaks the line
  std::vector<double> marker_x;  // a cross on the series at each of these x (e.g. skipped steps)
};

struct HLine {
  double y = 0;
  std::string label;
};

struct LinePlot {
  std::string id;  // unique within the page: names the clip path
  std::string title, x_label, y_label;
  bool log2_y = false;
  double y_min = NAN, y_max = NAN;  // NaN: from the finite data
  std::string marker_label = "skipped step";
  std::vector<HLine> h_lines{};  // dashed reference lines, e.g. a target
  std::vector<Series> series{};
  int width = 560, height = 340;
};

// An <svg> element. Points whose y is not plottable are drawn as triangles on the top
// edge (bottom edge for -inf) so a NaN is visible, never silently dropped.
std::string svg_line_plot(const LinePlot& plot);

struct BarPanel {
  std::string name, colour;  // colour "" = series_colour(position)
  std::vector<double> values;  // one per category in [0, 1]; NaN = no value
};

struct BarChart {
  std::string title, value_label;
  std::vector<std::string> categories{};  // rows, e.g. layer names
  std::vector<BarPanel> panels{};       // columns, e.g. precision modes
};

// An <svg> element: one row per category, one panel of horizontal bars per series, each
// bar labelled with its value as a percentage.
std::string svg_bar_chart(const BarChart& chart);

// Text escaped for XML/HTML character data and attribute values.
std::string xml_escape(const std::string& s);

}  // namespace hg::plot
