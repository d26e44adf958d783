// PNG encoding through stb_image_write (Debian's libstb-dev; this file holds its
// implementation) and the prediction grid. Files are written to a temporary name and
// renamed, so a reader never sees half a PNG.
#include "bench/segbench/png.h"

#include <algorithm>

#include "framework/error.h"
#include "framework/serialize/atomic_write.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC  // its functions stay private to this file
#define STBI_WRITE_NO_STDIO     // bytes go to memory, then through write_file_atomically
#include <stb/stb_image_write.h>

namespace hg::segbench {

std::vector<uint8_t> encode_png(const Image8& image) {
  HG_CHECK(image.channels == 1 || image.channels == 3, "encode_png: channels must be 1 (gray) or 3 (RGB), got ",
           image.channels);
  // stb_image_write takes int sizes and row strides.
  HG_CHECK(image.width > 0 && image.height > 0 && image.width * image.channels <= 0x7FFFFFFF &&
               image.height <= 0x7FFFFFFF,
           "encode_png: width and height must be positive and a row at most 2^31 - 1 bytes, got ", image.width, " x ",
           image.height, " x ", image.channels);
  const size_t row = static_cast<size_t>(image.width) * image.channels;
  HG_CHECK(image.pixels.size() == row * image.height, "encode_png: a ", image.width, " x ", image.height, " x ",
           image.channels, " image needs ", row * image.height, " bytes, got ", image.pixels.size());
  std::vector<uint8_t> png;
  auto append = [](void* out, void* data, int n) {
    auto* bytes = static_cast<const uint8_t*>(data);
    static_cast<std::vector<uint8_t>*>(out)->insert(static_cast<std::vector<uint8_t>*>(out)->end(), bytes, bytes + n);
  };
  const int ok = stbi_write_png_to_func(append, &png, static_cast<int>(image.width), static_cast<int>(image.height),
                                        image.channels, image.pixels.data(), static_cast<int>(row));
  HG_CHECK(ok != 0 && !png.empty(), "encode_png: stb_image_write could not encode the ", image.width, " x ",
           image.height, " image (out of memory?)");
  return png;
}

void write_png(const std::string& path, const Image8& image) {
  const std::vector<uint8_t> bytes = encode_png(image);
  write_file_atomically(path, {{bytes.data(), bytes.size()}});
}

Image8 prediction_grid(const std::vector<GridRow>& rows, int64_t size) {
  constexpr int64_t kGap = 2;
  HG_CHECK(!rows.empty(), "prediction_grid: no rows given");
  HG_CHECK(size > 0, "prediction_grid: panel size must be positive, got ", size);
  const size_t plane = static_cast<size_t>(size * size), preds = rows[0].predictions.size();
  const int64_t cols = 2 + static_cast<int64_t>(preds);
  Image8 out;
  out.channels = 3;
  out.width = cols * size + (cols - 1) * kGap;
  out.height = static_cast<int64_t>(rows.size()) * size + (static_cast<int64_t>(rows.size()) - 1) * kGap;
  out.pixels.assign(static_cast<size_t>(out.width * out.height * 3), 255);

  auto panel = [&](int64_t r, int64_t c, auto&& colour_of) {
    for (int64_t y = 0; y < size; ++y)
      for (int64_t x = 0; x < size; ++x) {
        const std::array<uint8_t, 3> rgb = colour_of(y * size + x);
        uint8_t* px = &out.pixels[3 * ((r * (size + kGap) + y) * out.width + c * (size + kGap) + x)];
        std::copy(rgb.begin(), rgb.end(), px);
      }
  };
  auto labels = [&](const std::vector<int64_t>& map, size_t r, const char* what) {
    HG_CHECK(map.size() == plane, "prediction_grid: row ", r, ": ", what, " has ", map.size(), " labels, expected ",
             plane, " (", size, " x ", size, ")");
    for (int64_t l : map)
      HG_CHECK(l >= 0 && l < 4, "prediction_grid: row ", r, ": ", what, " holds label ", l, ", valid are 0-3");
    return [&map](int64_t p) { return kClassPalette[static_cast<size_t>(map[p])]; };
  };
  for (size_t r = 0; r < rows.size(); ++r) {
    const GridRow& row = rows[r];
    HG_CHECK(row.image.size() == plane, "prediction_grid: row ", r, ": image has ", row.image.size(),
             " values, expected ", plane, " (", size, " x ", size, ")");
    HG_CHECK(row.predictions.size() == preds, "prediction_grid: row ", r, " has ", row.predictions.size(),
             " predictions, row 0 has ", preds);
    panel(r, 0, [&](int64_t p) {
      const float f = row.image[p] > 0 ? std::min(row.image[p], 1.0f) : 0.0f;  // NaN shows as black
      const auto v = static_cast<uint8_t>(f * 255.0f + 0.5f);
      return std::array<uint8_t, 3>{v, v, v};
    });
    panel(r, 1, labels(row.truth, r, "truth"));
    for (size_t k = 0; k < preds; ++k) panel(r, 2 + static_cast<int64_t>(k), labels(row.predictions[k], r, "prediction"));
  }
  return out;
}

}  // namespace hg::segbench
