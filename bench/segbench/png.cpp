// PNG encoding with stored (uncompressed) deflate blocks, CRC32 and Adler32 computed here,
// and the prediction grid. Files are written to a temporary name and renamed, so a
// reader never sees half a PNG.
#include "bench/segbench/png.h"

#include "framework/serialize/atomic_write.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "framework/error.h"

namespace hg::segbench {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[n] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

uint32_t crc32(const uint8_t* data, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = kCrcTable[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t adler32(const std::vector<uint8_t>& data) {
  uint32_t a = 1, b = 0;
  for (uint8_t v : data) {
    a = (a + v) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

void put_u32_be(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void put_chunk(std::vector<uint8_t>& out, const char type[4], const std::vector<uint8_t>& body) {
  put_u32_be(out, static_cast<uint32_t>(body.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), body.begin(), body.end());
  put_u32_be(out, crc32(out.data() + start, out.size() - start));
}

// A zlib stream of stored deflate blocks (at most 65535 bytes each).
std::vector<uint8_t> zlib_stored(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> z{0x78, 0x01};  // deflate, 32 KiB window, no preset dictionary
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, raw.size() - pos);
    const bool last = pos + len == raw.size();
    z.push_back(last ? 1 : 0);  // BFINAL, BTYPE = 00 (stored), padded to the byte
    z.push_back(static_cast<uint8_t>(len));
    z.push_back(static_cast<uint8_t>(len >> 8));
    z.push_back(static_cast<uint8_t>(~len));
    z.push_back(static_cast<uint8_t>(~len >> 8));
    z.insert(z.end(), raw.begin() + pos, raw.begin() + pos + len);
    pos += len;
  } while (pos < raw.size());
  put_u32_be(z, adler32(raw));
  return z;
}

}  // namespace

std::vector<uint8_t> encode_png(const Image8& image) {
  HG_CHECK(image.channels == 1 || image.channels == 3, "encode_png: channels must be 1 (gray) or 3 (RGB), got ",
           image.channels);
  HG_CHECK(image.width > 0 && image.height > 0 && image.width <= 0x7FFFFFFF && image.height <= 0x7FFFFFFF,
           "encode_png: width and height must be in [1, 2^31 - 1], got ", image.width, " x ", image.height);
  const size_t row = static_cast<size_t>(image.width) * image.channels;
  HG_CHECK(image.pixels.size() == row * image.height, "encode_png: a ", image.width, " x ", image.height, " x ",
           image.channels, " image needs ", row * image.height, " bytes, got ", image.pixels.size());

  std::vector<uint8_t> raw;  // each row behind filter type 0 (none)
  raw.reserve((row + 1) * image.height);
  for (int64_t y = 0; y < image.height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), image.pixels.begin() + y * row, image.pixels.begin() + (y + 1) * row);
  }

  std::vector<uint8_t> png{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32_be(ihdr, static_cast<uint32_t>(image.width));
  put_u32_be(ihdr, static_cast<uint32_t>(image.height));
  // Bit depth 8; colour type 0 gray or 2 RGB; deflate; filter set 0; no interlace.
  ihdr.insert(ihdr.end(), {8, static_cast<uint8_t>(image.channels == 1 ? 0 : 2), 0, 0, 0});
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", zlib_stored(raw));
  put_chunk(png, "IEND", {});
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
