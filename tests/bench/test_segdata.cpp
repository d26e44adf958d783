// The segmentation benchmark's procedural data set (determinism, class statistics, the
// texture-only cue) and its PNG writer, read back by stb_image with every chunk's CRC checked.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "bench/segbench/data.h"
#include "bench/segbench/png.h"
#include "framework/cpu/threads.h"
#include "framework/error.h"

// The PNG reader, private to this file (the writer's implementation is in png.cpp).
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#include <stb/stb_image.h>

using namespace hg::segbench;

namespace {

// Mean image value inside class c minus the mean over background pixels within `reach`
// px (Chebyshev) of class c; NaN when either set is empty.
double contrast_to_surroundings(const Sample& s, int64_t c, int64_t reach) {
  const int64_t n = s.size;
  double inside = 0, ring = 0;
  int64_t n_inside = 0, n_ring = 0;
  for (int64_t y = 0; y < n; ++y)
    for (int64_t x = 0; x < n; ++x) {
      const int64_t p = y * n + x;
      if (s.label[p] == c) {
        inside += s.image[p];
        ++n_inside;
        continue;
      }
      if (s.label[p] != 0) continue;
      bool near = false;
      for (int64_t yy = std::max<int64_t>(0, y - reach); yy <= std::min(n - 1, y + reach) && !near; ++yy)
        for (int64_t xx = std::max<int64_t>(0, x - reach); xx <= std::min(n - 1, x + reach) && !near; ++xx)
          near = s.label[yy * n + xx] == c;
      if (near) {
        ring += s.image[p];
        ++n_ring;
      }
    }
  return n_inside && n_ring ? inside / n_inside - ring / n_ring : std::nan("");
}

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b.at(at)} << 24 | uint32_t{b.at(at + 1)} << 16 | uint32_t{b.at(at + 2)} << 8 | b.at(at + 3);
}

// Bit-at-a-time CRC32, independent of the writer's.
uint32_t crc32_bitwise(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

// The pixels of a PNG as stb_image reads them, after checking the file's structure (which
// stb_image does not): signature, every chunk's CRC, IHDR first with 8-bit gray/RGB, IEND last.
Image8 decode_png(const std::vector<uint8_t>& png) {
  const std::vector<uint8_t> signature{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  REQUIRE(png.size() > 8);
  REQUIRE(std::vector<uint8_t>(png.begin(), png.begin() + 8) == signature);
  size_t pos = 8;
  std::string type;
  int ihdr_colour = -1;
  while (type != "IEND") {
    const uint32_t len = be32(png, pos);
    REQUIRE(pos + 12 + len <= png.size());
    type.assign(png.begin() + pos + 4, png.begin() + pos + 8);
    CHECK(be32(png, pos + 8 + len) == crc32_bitwise(png.data() + pos + 4, len + 4));
    if (pos == 8) {
      REQUIRE(type == "IHDR");
      CHECK(png.at(pos + 16) == 8);  // bit depth
      ihdr_colour = png.at(pos + 17);
      CHECK((ihdr_colour == 0 || ihdr_colour == 2));  // gray or RGB
    }
    pos += 12 + len;
  }
  CHECK(pos == png.size());
  int w = 0, h = 0, channels = 0;
  uint8_t* px = stbi_load_from_memory(png.data(), static_cast<int>(png.size()), &w, &h, &channels, 0);
  REQUIRE(px != nullptr);
  Image8 img{w, h, channels, std::vector<uint8_t>(px, px + static_cast<size_t>(w) * h * channels)};
  stbi_image_free(px);
  CHECK(channels == (ihdr_colour == 0 ? 1 : 3));
  return img;
}

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("a sample is a pure function of (seed, split, index)", "[segdata]") {
  const Sample a = make_sample(7, 0, 5, 64), b = make_sample(7, 0, 5, 64);
  REQUIRE(a.image.size() == 64 * 64);
  REQUIRE(a.label.size() == 64 * 64);
  CHECK(a.image == b.image);
  CHECK(a.label == b.label);
  CHECK(hash_sample(a) == hash_sample(b));
  for (const Sample& other : {make_sample(7, 0, 6, 64), make_sample(7, 1, 5, 64), make_sample(8, 0, 5, 64)}) {
    CHECK(other.image != a.image);
    CHECK(other.label != a.label);
    CHECK(hash_sample(other) != hash_sample(a));
  }
  // The clean version is the same scene.
  CHECK(make_clean_sample(7, 0, 5, 64).label == a.label);
}

TEST_CASE("hash_sample ignores sub-quantum noise but sees any label or visible change", "[segdata]") {
  Sample s = make_sample(0, 1, 3, 32);
  const uint64_t h = hash_sample(s);
  Sample t = s;
  for (float& v : t.image) v = (std::round(v * 65535.0f) + 0.25f) / 65535.0f;  // stays in its quantum
  CHECK(hash_sample(t) == h);
  t = s;
  t.label[100] = (t.label[100] + 1) % kNumClasses;
  CHECK(hash_sample(t) != h);
  t = s;
  t.image[100] = t.image[100] > 0.5f ? t.image[100] - 0.001f : t.image[100] + 0.001f;
  CHECK(hash_sample(t) != h);
}

TEST_CASE("golden hashes pin the first training samples", "[segdata]") {
  // A regression pin of the generator's output (seed 0, train, 64 x 64): if a change to
  // data.cpp is meant to alter the data set, recompute these and say so in the commit.
  CHECK(hash_sample(make_sample(0, 0, 0, 64)) == 0x1f6b518e8bbdef4cull);
  CHECK(hash_sample(make_sample(0, 0, 1, 64)) == 0xdcf70ffc0fe25fddull);
  CHECK(hash_sample(make_sample(0, 0, 2, 64)) == 0x2ab0d441b0dea65eull);
}

TEST_CASE("every class is present in most images; curves cover 1-3% of pixels", "[segdata]") {
  for (int64_t size : {64, 128}) {
    const int images = size == 64 ? 32 : 8;
    std::array<int, kNumClasses> present{};
    std::array<double, kNumClasses> mean{};
    for (int i = 0; i < images; ++i) {
      const std::array<double, kNumClasses> f = class_fractions(make_sample(1, 0, i, size));
      CHECK(f[0] + f[1] + f[2] + f[3] == Approx(1.0));
      for (int c = 0; c < kNumClasses; ++c) {
        present[c] += f[c] > 0;
        mean[c] += f[c] / images;
      }
    }
    INFO("size " << size << ": mean fractions " << mean[0] << " " << mean[1] << " " << mean[2] << " " << mean[3]);
    for (int c = 1; c < kNumClasses; ++c) CHECK(present[c] >= 0.7 * images);
    CHECK(mean[0] > 0.5);
    CHECK(mean[3] >= 0.01);
    CHECK(mean[3] <= 0.03);
  }
}

TEST_CASE("texture regions have the background's mean: only texture reveals them", "[segdata]") {
  // Over the clean scenes the texture's mean is removed exactly; what remains is the
  // background's own slow variation between the region and a 3-px ring around it.
  // Blobs (class 1) show the same statistic is sensitive: their offsets are >= 0.15.
  double texture = 0, texture_worst = 0, blob = 0, texture_noisy = 0, step_texture = 0, step_background = 0;
  int n = 0;
  for (int i = 0; i < 32; ++i) {
    const Sample clean = make_clean_sample(2, 1, i, 64), noisy = make_sample(2, 1, i, 64);
    const double d2 = contrast_to_surroundings(clean, 2, 3), d1 = contrast_to_surroundings(clean, 1, 3);
    const double d2_noisy = contrast_to_surroundings(noisy, 2, 3);
    if (std::isnan(d2) || std::isnan(d1) || std::isnan(d2_noisy)) continue;
    ++n;
    texture += std::fabs(d2);
    texture_worst = std::max(texture_worst, std::fabs(d2));
    blob += std::fabs(d1);
    texture_noisy += std::fabs(d2_noisy);
    // RMS difference between neighbours (right and below) of the same class: the cue.
    std::array<double, kNumClasses> sq{};
    std::array<int64_t, kNumClasses> pairs{};
    for (int64_t p = 0; p + 64 < 64 * 64; ++p)
      for (int64_t q : {p + 1, p + 64})
        if (clean.label[p] == clean.label[q] && (q != p + 1 || q % 64 != 0)) {
          sq[clean.label[p]] += (clean.image[q] - clean.image[p]) * (clean.image[q] - clean.image[p]);
          ++pairs[clean.label[p]];
        }
    step_texture += std::sqrt(sq[2] / std::max<int64_t>(pairs[2], 1));
    step_background += std::sqrt(sq[0] / std::max<int64_t>(pairs[0], 1));
  }
  REQUIRE(n >= 24);
  CHECK(texture / n < 0.015);
  CHECK(texture_worst < 0.05);
  CHECK(texture_noisy / n < 0.02);  // with the bias field, blur and noise on top
  CHECK(blob / n > 0.1);
  CHECK(step_texture > 5 * step_background);
}

TEST_CASE("images lie in [0, 1] at every valid size", "[segdata]") {
  for (int64_t size : {32, 48, 96}) {
    const Sample s = make_sample(3, 0, 11, size);
    REQUIRE(s.size == size);
    REQUIRE(s.image.size() == static_cast<size_t>(size * size));
    CHECK(std::all_of(s.image.begin(), s.image.end(), [](float v) { return v >= 0.0f && v <= 1.0f; }));
    CHECK(std::all_of(s.label.begin(), s.label.end(), [](int64_t l) { return l >= 0 && l < kNumClasses; }));
    CHECK(*std::max_element(s.image.begin(), s.image.end()) - *std::min_element(s.image.begin(), s.image.end()) > 0.3f);
  }
}

TEST_CASE("make_batch returns NHWC tensors equal to make_sample's", "[segdata]") {
  const Batch b = make_batch(4, 1, 10, 3, 32);
  CHECK(b.image.shape() == hg::Shape{3, 32, 32, 1});
  CHECK(b.label.shape() == hg::Shape{3, 32, 32});
  CHECK(b.image.dtype() == hg::f32);
  CHECK(b.label.dtype() == hg::i64);
  const std::vector<float> image = b.image.to_vector<float>();
  const std::vector<int64_t> label = b.label.to_vector<int64_t>();
  for (int64_t i = 0; i < 3; ++i) {
    const Sample s = make_sample(4, 1, 10 + i, 32);
    CHECK(std::equal(s.image.begin(), s.image.end(), image.begin() + i * 32 * 32));
    CHECK(std::equal(s.label.begin(), s.label.end(), label.begin() + i * 32 * 32));
  }
}

TEST_CASE("make_batch gives the same batch on one thread (a prefetch thread's limit) as on all", "[segdata]") {
  const Batch all = make_batch(4, 0, 20, 7, 32);
  Batch one;
  {
    hg::ThreadLimit limit(1);
    one = make_batch(4, 0, 20, 7, 32);
  }
  CHECK(all.image.to_vector<float>() == one.image.to_vector<float>());
  CHECK(all.label.to_vector<int64_t>() == one.label.to_vector<int64_t>());
}

TEST_CASE("bad data arguments name the value and what is valid", "[segdata][errors]") {
  using Catch::Contains;
  CHECK_THROWS_AS(make_sample(0, 0, 0, 50), hg::Error);
  CHECK_THROWS_WITH(make_sample(0, 0, 0, 50), Contains("multiple of 16") && Contains("got 50"));
  CHECK_THROWS_WITH(make_sample(0, 0, 0, 16), Contains("at least 32") && Contains("got 16"));
  CHECK_THROWS_WITH(make_clean_sample(0, 2, 0, 64), Contains("split") && Contains("got 2"));
  CHECK_THROWS_WITH(make_batch(0, -1, 0, 4, 64), Contains("0 (train) or 1 (validation)") && Contains("got -1"));
  CHECK_THROWS_WITH(make_batch(0, 0, 0, 0, 64), Contains("n must be positive") && Contains("got 0"));
  CHECK_THROWS_WITH(make_batch(0, 0, 0, 2, 40), Contains("got 40"));
}

TEST_CASE("PNGs decode to the same pixels with valid CRCs", "[segdata][png]") {
  Image8 gray{5, 3, 1, {}};
  for (int i = 0; i < 15; ++i) gray.pixels.push_back(static_cast<uint8_t>(i * 17));
  const Image8 g = decode_png(encode_png(gray));
  CHECK(g.width == 5);
  CHECK(g.height == 3);
  CHECK(g.channels == 1);
  CHECK(g.pixels == gray.pixels);

  Image8 rgb{200, 120, 3, {}};  // 72,120 bytes of rows: more than one deflate block
  for (int64_t i = 0; i < 200 * 120 * 3; ++i) rgb.pixels.push_back(static_cast<uint8_t>((i * 7919) >> 3));
  const Image8 c = decode_png(encode_png(rgb));
  CHECK(c.width == 200);
  CHECK(c.channels == 3);
  CHECK(c.pixels == rgb.pixels);

  CHECK_THROWS_WITH(encode_png(Image8{2, 2, 4, std::vector<uint8_t>(16)}), Catch::Contains("channels must be 1"));
  CHECK_THROWS_WITH(encode_png(Image8{2, 2, 3, std::vector<uint8_t>(5)}), Catch::Contains("needs 12 bytes, got 5"));
  // stb_image_write's row stride is an int: a wider row is refused before any pixel is read.
  CHECK_THROWS_WITH(encode_png(Image8{int64_t{1} << 30, 1, 3, {}}), Catch::Contains("a row at most 2^31 - 1 bytes"));
}

TEST_CASE("write_png replaces the file atomically and reports failures", "[segdata][png]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("hg_segdata_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "x.png";
  Image8 img{3, 2, 1, {0, 50, 100, 150, 200, 250}};
  write_png(file.string(), img);
  img.pixels[0] = 9;
  write_png(file.string(), img);
  CHECK(decode_png(read_file(file)).pixels == img.pixels);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
  CHECK_THROWS_AS(write_png((dir / "missing" / "y.png").string(), img), hg::Error);
  CHECK_THROWS_WITH(write_png((dir / "missing" / "y.png").string(), img), Catch::Contains("cannot create"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the prediction grid lays panels out with palette colours and separators", "[segdata][png]") {
  const Sample s = make_sample(5, 1, 0, 32);
  std::vector<int64_t> all_three(32 * 32, 3);
  const Image8 grid = prediction_grid({{s.image, s.label, {s.label, all_three}}, {s.image, s.label, {all_three, s.label}}}, 32);
  CHECK(grid.channels == 3);
  CHECK(grid.width == 4 * 32 + 3 * 2);
  CHECK(grid.height == 2 * 32 + 2);
  auto px = [&](int64_t x, int64_t y) {
    const uint8_t* p = &grid.pixels[3 * (y * grid.width + x)];
    return std::array<uint8_t, 3>{p[0], p[1], p[2]};
  };
  const auto v = static_cast<uint8_t>(s.image[0] * 255.0f + 0.5f);
  CHECK(px(0, 0) == std::array<uint8_t, 3>{v, v, v});
  CHECK(px(34, 0) == kClassPalette[s.label[0]]);
  CHECK(px(3 * 34 + 5, 7) == kClassPalette[3]);    // row 0, second prediction
  CHECK(px(2 * 34 + 5, 34 + 7) == kClassPalette[3]);  // row 1, first prediction
  CHECK(px(32, 10) == std::array<uint8_t, 3>{255, 255, 255});  // vertical separator
  CHECK(px(10, 33) == std::array<uint8_t, 3>{255, 255, 255});  // horizontal separator

  std::vector<int64_t> bad = s.label;
  bad[5] = 4;
  CHECK_THROWS_WITH(prediction_grid({{s.image, s.label, {bad}}}, 32), Catch::Contains("label 4") && Catch::Contains("0-3"));
  CHECK_THROWS_WITH(prediction_grid({{s.image, s.label, {s.label}}, {s.image, s.label, {}}}, 32),
                    Catch::Contains("row 1 has 0 predictions"));
  CHECK_THROWS_WITH(prediction_grid({{s.image, s.label, {}}}, 16), Catch::Contains("expected 256"));
}
