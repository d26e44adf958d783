// PNG files (8-bit gray or RGB, encoded by stb_image_write) and the grid of sample
// predictions the segmentation benchmark writes into its report.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hg::segbench {

struct Image8 {
  int64_t width = 0, height = 0;
  int channels = 1;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // row-major, channels interleaved
};

// The PNG file's bytes. Throws hg::Error on a bad shape or channel count.
std::vector<uint8_t> encode_png(const Image8& image);
// Writes path atomically (a temporary file renamed over it); throws hg::Error on failure.
void write_png(const std::string& path, const Image8& image);

// Colours of classes 0-3 in label panels: dark gray, vermillion, sky blue, yellow
// (Okabe-Ito, distinguishable with the common colour-vision deficiencies).
inline constexpr std::array<std::array<uint8_t, 3>, 4> kClassPalette{
    {{40, 40, 40}, {213, 94, 0}, {86, 180, 233}, {240, 228, 66}}};

// One row of the grid: an image (size * size floats in [0, 1]), its true label map and
// one predicted label map per column after the truth (e.g. one per precision).
struct GridRow {
  std::vector<float> image;
  std::vector<int64_t> truth;
  std::vector<std::vector<int64_t>> predictions;
};
// An RGB grid, rows = samples, columns = image | truth | predictions..., panels of
// size x size separated by 2 px white lines. Every row needs the same number of
// predictions. Throws hg::Error on inconsistent sizes or labels outside 0-3.
Image8 prediction_grid(const std::vector<GridRow>& rows, int64_t size);

}  // namespace hg::segbench
