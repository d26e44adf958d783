// The procedural segmentation data set (recipe in data.h). All arithmetic that decides a
// label or a pixel is + - * / sqrt floor on doubles, so no platform's libm is involved.
#include "bench/segbench/data.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "framework/cpu/threads.h"
#include "framework/error.h"
#include "framework/generator.h"

namespace hg::segbench {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kSqrtHalf = 0.70710678118654752440;

// sin(x) by range reduction to [-pi/2, pi/2] and its Taylor series to x^15 (error < 1e-11).
double sine(double x) {
  x -= 2 * kPi * std::floor(x / (2 * kPi) + 0.5);
  if (x > kPi / 2) x = kPi - x;
  else if (x < -kPi / 2) x = -kPi - x;
  const double x2 = x * x;
  double p = -1.0 / 1307674368000.0;
  p = p * x2 + 1.0 / 6227020800.0;
  p = p * x2 - 1.0 / 39916800.0;
  p = p * x2 + 1.0 / 362880.0;
  p = p * x2 - 1.0 / 5040.0;
  p = p * x2 + 1.0 / 120.0;
  p = p * x2 - 1.0 / 6.0;
  return x + x * x2 * p;
}
double cosine(double x) { return sine(x + kPi / 2); }

// log(x) for x > 0: frexp is exact; log of the mantissa is 2 atanh(s), |s| < 0.172.
double natural_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);
  if (m < kSqrtHalf) {
    m *= 2;
    --e;
  }
  const double s = (m - 1) / (m + 1), s2 = s * s;
  double p = 1.0 / 13;
  for (double k : {11.0, 9.0, 7.0, 5.0, 3.0, 1.0}) p = p * s2 + 1.0 / k;
  return e * kLn2 + 2 * s * p;
}

enum Substream : uint64_t { kScene = 0, kPixelNoise = 1 };

// One Philox stream of an image: key (seed, index); the counter holds the split in bit 63,
// the substream in bits 48-62 and a running count below.
class Stream {
 public:
  Stream(uint64_t seed, int split, uint64_t index, Substream sub)
      : key_{seed, index}, counter_((static_cast<uint64_t>(split) << 63) | (static_cast<uint64_t>(sub) << 48)) {}

  uint32_t bits() {
    if (used_ == 4) {
      words_ = philox4x32(key_, counter_++);
      used_ = 0;
    }
    return words_[used_++];
  }
  double uniform() {
    const uint32_t hi = bits();
    return uniform_f64(hi, bits());
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int integer(int lo, int hi) { return lo + static_cast<int>(uniform() * (hi - lo + 1)); }  // inclusive
  // +-[lo, hi]; the sign is drawn first (two draws in one expression would be unsequenced).
  double signed_uniform(double lo, double hi) {
    const double sign = (bits() & 1) ? 1.0 : -1.0;
    return sign * uniform(lo, hi);
  }
  // Box-Muller; the second value of each pair is kept for the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2 * natural_log(1 - uniform())), u = uniform();
    const double sin_t = sine(2 * kPi * u), cos_abs = std::sqrt(std::max(0.0, 1 - sin_t * sin_t));
    spare_ = r * sin_t;
    has_spare_ = true;
    return u > 0.25 && u < 0.75 ? -r * cos_abs : r * cos_abs;
  }

 private:
  PhiloxKey key_;
  uint64_t counter_;
  std::array<uint32_t, 4> words_{};
  int used_ = 4;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Value noise in [0, 1]: per octave a lattice of uniforms, smoothstep-interpolated at
// pixel centres; octave o has coarsest_cells * 2^o cells across and weight 2^-o.
std::vector<double> value_noise(Stream& rng, int64_t size, int64_t coarsest_cells, int octaves) {
  std::vector<double> out(size * size, 0.0), lattice, smooth(size);
  std::vector<int64_t> cell(size);
  double weight = 1, total = 0;
  for (int o = 0; o < octaves; ++o, weight /= 2) {
    const int64_t cells = coarsest_cells << o, n = cells + 1;
    lattice.resize(n * n);
    for (double& v : lattice) v = rng.uniform();
    for (int64_t i = 0; i < size; ++i) {  // the same along x and y
      const double t = (i + 0.5) * cells / size;
      cell[i] = std::min<int64_t>(static_cast<int64_t>(t), cells - 1);
      const double f = t - cell[i];
      smooth[i] = f * f * (3 - 2 * f);
    }
    for (int64_t y = 0; y < size; ++y) {
      const double sy = smooth[y];
      double* row = &out[y * size];
      for (int64_t x = 0; x < size; ++x) {
        const double* l = &lattice[cell[y] * n + cell[x]];
        const double top = l[0] + smooth[x] * (l[1] - l[0]), bottom = l[n] + smooth[x] * (l[n + 1] - l[n]);
        row[x] += weight * (top + sy * (bottom - top));
      }
    }
    total += weight;
  }
  for (double& v : out) v /= total;
  return out;
}

// An ellipse whose radius carries a 3rd and 4th angular harmonic, so blobs are not all
// perfect ellipses. Angles enter through powers of (u, v): no atan2 needed.
struct Blob {
  double cx, cy, a, b, c, s, h3c, h3s, h4c, h4s;

  static Blob random(Stream& rng, int64_t size, double min_axis, double max_axis) {
    Blob e{};
    e.cx = rng.uniform(0.1, 0.9) * size;
    e.cy = rng.uniform(0.1, 0.9) * size;
    e.a = rng.uniform(min_axis, max_axis) * size;
    e.b = rng.uniform(min_axis, max_axis) * size;
    const double theta = rng.uniform(0, kPi), phase3 = rng.uniform(0, 2 * kPi), phase4 = rng.uniform(0, 2 * kPi);
    const double h3 = rng.uniform(0, 0.12), h4 = rng.uniform(0, 0.08);
    e.c = cosine(theta);
    e.s = sine(theta);
    e.h3c = h3 * cosine(phase3);
    e.h3s = h3 * sine(phase3);
    e.h4c = h4 * cosine(phase4);
    e.h4s = h4 * sine(phase4);
    return e;
  }
  double reach() const { return std::max(a, b) * 1.2 + 1; }
  bool contains(double x, double y) const {
    const double dx = x - cx, dy = y - cy;
    const double u = (dx * c + dy * s) / a, v = (dy * c - dx * s) / b;
    const double r2 = u * u + v * v;
    if (r2 == 0) return true;
    const double r = std::sqrt(r2), u2 = u * u, v2 = v * v;
    const double cos3 = (u * u2 - 3 * u * v2) / (r2 * r), sin3 = (3 * u2 * v - v * v2) / (r2 * r);
    const double cos4 = (u2 * u2 - 6 * u2 * v2 + v2 * v2) / (r2 * r2), sin4 = 4 * u * v * (u2 - v2) / (r2 * r2);
    return r < 1 + h3c * cos3 - h3s * sin3 + h4c * cos4 - h4s * sin4;
  }
};

struct Canvas {
  int64_t size;
  std::vector<double> background, offset;  // image = background + offset
  std::vector<int64_t> label;
  std::vector<int> owner;  // index of the shape that drew each pixel, -1 for none
};

// Calls f(x, y) for each pixel whose centre lies in the blob.
template <class F> void for_each_inside(const Blob& e, int64_t size, F&& f) {
  const double r = e.reach();
  const int64_t x0 = std::max<int64_t>(0, static_cast<int64_t>(e.cx - r)), x1 = std::min<int64_t>(size, static_cast<int64_t>(e.cx + r) + 1);
  const int64_t y0 = std::max<int64_t>(0, static_cast<int64_t>(e.cy - r)), y1 = std::min<int64_t>(size, static_cast<int64_t>(e.cy + r) + 1);
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x)
      if (e.contains(x + 0.5, y + 0.5)) f(x, y);
}

void draw_blob(Canvas& cv, Stream& rng, int id) {
  const Blob e = Blob::random(rng, cv.size, 0.06, 0.20);
  const double offset = rng.signed_uniform(0.15, 0.30);
  for_each_inside(e, cv.size, [&](int64_t x, int64_t y) {
    const int64_t p = y * cv.size + x;
    cv.offset[p] = offset;
    cv.label[p] = 1;
    cv.owner[p] = id;
  });
}

void draw_texture(Canvas& cv, Stream& rng, int id) {
  const Blob e = Blob::random(rng, cv.size, 0.10, 0.22);
  if (rng.uniform() < 0.6) {
    const double period = rng.uniform(4, 8), angle = rng.uniform(0, kPi), phase = rng.uniform(0, 2 * kPi);
    const double amplitude = rng.uniform(0.10, 0.20);
    const double kx = 2 * kPi / period * cosine(angle), ky = 2 * kPi / period * sine(angle);
    for_each_inside(e, cv.size, [&](int64_t x, int64_t y) {
      const int64_t p = y * cv.size + x;
      cv.offset[p] = amplitude * sine(kx * x + ky * y + phase);
      cv.label[p] = 2;
      cv.owner[p] = id;
    });
  } else {
    const double amplitude = rng.uniform(0.12, 0.20);
    const int64_t cells = (cv.size + 1) / 2;
    std::vector<double> speckle(cells * cells);
    for (double& v : speckle) v = (rng.bits() & 1) ? amplitude : -amplitude;
    for_each_inside(e, cv.size, [&](int64_t x, int64_t y) {
      const int64_t p = y * cv.size + x;
      cv.offset[p] = speckle[(y / 2) * cells + x / 2];
      cv.label[p] = 2;
      cv.owner[p] = id;
    });
  }
}

// Marks pixels whose centre is within half_width of the segment p-q.
void stroke_segment(Canvas& cv, double px, double py, double qx, double qy, double half_width, double offset, int id) {
  const int64_t x0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(std::min(px, qx) - half_width)));
  const int64_t x1 = std::min<int64_t>(cv.size, static_cast<int64_t>(std::max(px, qx) + half_width) + 1);
  const int64_t y0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(std::min(py, qy) - half_width)));
  const int64_t y1 = std::min<int64_t>(cv.size, static_cast<int64_t>(std::max(py, qy) + half_width) + 1);
  const double dx = qx - px, dy = qy - py, len2 = dx * dx + dy * dy;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) {
      const double wx = x + 0.5 - px, wy = y + 0.5 - py;
      const double t = len2 > 0 ? std::clamp((wx * dx + wy * dy) / len2, 0.0, 1.0) : 0.0;
      const double ex = wx - t * dx, ey = wy - t * dy;
      if (ex * ex + ey * ey <= half_width * half_width) {
        const int64_t p = y * cv.size + x;
        cv.offset[p] = offset;
        cv.label[p] = 3;
        cv.owner[p] = id;
      }
    }
}

struct Vec {
  double x, y;
};
Vec operator+(Vec a, Vec b) { return {a.x + b.x, a.y + b.y}; }
Vec operator-(Vec a, Vec b) { return {a.x - b.x, a.y - b.y}; }
Vec operator*(double k, Vec a) { return {k * a.x, k * a.y}; }
Vec rotate(Vec v, double angle) {
  const double c = cosine(angle), s = sine(angle);
  return {v.x * c - v.y * s, v.x * s + v.y * c};
}

// A path of cubic Bezier segments, each leaving along the previous one's end tangent
// (C1). A segment that would end outside the image turns towards the centre instead,
// so long paths at large sizes stay in view.
void draw_curve(Canvas& cv, Stream& rng, int id) {
  // Length grows as size^2 so that 1-2 px wide curves cover the same fraction at any size.
  const double size = static_cast<double>(cv.size);
  const int64_t segments = std::max<int64_t>(1, cv.size / 64);
  const double seg_len = rng.uniform(0.20, 0.35) * size * size / 64.0 / segments;
  const double half_width = rng.uniform(1.1, 2.0) / 2, offset = rng.signed_uniform(0.20, 0.40);
  Vec p{rng.uniform(0.1, 0.9) * size, rng.uniform(0.1, 0.9) * size};
  Vec heading = rotate({1, 0}, rng.uniform(0, 2 * kPi));
  const int steps = static_cast<int>(seg_len) + 2;  // polyline pieces shorter than ~1.3 px
  for (int64_t s = 0; s < segments; ++s) {
    const double turn = rng.uniform(-0.8, 0.8), bend = rng.uniform(-0.8, 0.8);
    Vec chord = rotate(heading, turn), q = p + seg_len * chord;
    if (q.x < 0 || q.y < 0 || q.x > size || q.y > size) {
      const Vec in = Vec{size / 2, size / 2} - p;
      chord = rotate((1 / std::sqrt(in.x * in.x + in.y * in.y)) * in, turn);
      q = p + seg_len * chord;
    }
    const Vec out = rotate(chord, bend);
    const Vec a = p + (seg_len / 3) * heading, b = q - (seg_len / 3) * out;
    Vec last = p;
    for (int k = 1; k <= steps; ++k) {
      const double t = static_cast<double>(k) / steps, m = 1 - t;
      const Vec c = (m * m * m) * p + (3 * m * m * t) * a + (3 * m * t * t) * b + (t * t * t) * q;
      stroke_segment(cv, last.x, last.y, c.x, c.y, half_width, offset, id);
      last = c;
    }
    p = q;
    heading = out;
  }
}

// Removes each texture region's mean over the pixels it still owns, so that inside it
// the image's mean is the background's: only the texture distinguishes class 2.
void center_textures(Canvas& cv, const std::vector<char>& is_texture) {
  std::vector<double> sum(is_texture.size(), 0.0), count(is_texture.size(), 0.0);
  for (size_t p = 0; p < cv.owner.size(); ++p)
    if (cv.owner[p] >= 0 && is_texture[cv.owner[p]]) {
      sum[cv.owner[p]] += cv.offset[p];
      count[cv.owner[p]] += 1;
    }
  for (size_t p = 0; p < cv.owner.size(); ++p)
    if (cv.owner[p] >= 0 && is_texture[cv.owner[p]]) cv.offset[p] -= sum[cv.owner[p]] / count[cv.owner[p]];
}

// [1 2 1] / 4 along rows and then columns, edges replicated.
void blur(std::vector<double>& img, int64_t size) {
  std::vector<double> tmp(img.size());
  for (int64_t y = 0; y < size; ++y)
    for (int64_t x = 0; x < size; ++x) {
      const double* row = &img[y * size];
      tmp[y * size + x] = (row[std::max<int64_t>(x - 1, 0)] + 2 * row[x] + row[std::min(x + 1, size - 1)]) / 4;
    }
  for (int64_t y = 0; y < size; ++y)
    for (int64_t x = 0; x < size; ++x)
      img[y * size + x] = (tmp[std::max<int64_t>(y - 1, 0) * size + x] + 2 * tmp[y * size + x] +
                           tmp[std::min(y + 1, size - 1) * size + x]) / 4;
}

void check_args(int split, int64_t size, const char* fn) {
  HG_CHECK(size >= 32 && size % 16 == 0, "segbench::", fn, ": image size must be a multiple of 16 and at least 32 (e.g. 64, 128, 256), got ", size);
  HG_CHECK(split == 0 || split == 1, "segbench::", fn, ": split must be 0 (train) or 1 (validation), got ", split);
}

Sample render(uint64_t seed, int split, uint64_t index, int64_t size, bool corrupt) {
  Stream rng(seed, split, index, kScene);
  Canvas cv{size, {}, std::vector<double>(size * size, 0.0), std::vector<int64_t>(size * size, 0),
            std::vector<int>(size * size, -1)};

  const double level = rng.uniform(0.35, 0.65), amplitude = rng.uniform(0.08, 0.15);
  cv.background = value_noise(rng, size, 2, 4);
  for (double& v : cv.background) v = level + amplitude * (2 * v - 1);

  // Shape ids are draw order; blobs and texture regions are shuffled, curves come last.
  const int blobs = rng.integer(1, 3), textures = rng.integer(1, 2), curves = rng.integer(2, 4);
  std::vector<char> is_texture(blobs + textures + curves, 0);
  std::fill(is_texture.begin() + blobs, is_texture.begin() + blobs + textures, 1);
  for (int i = blobs + textures - 1; i > 0; --i) std::swap(is_texture[i], is_texture[rng.integer(0, i)]);
  for (int id = 0; id < blobs + textures + curves; ++id) {
    if (id >= blobs + textures) draw_curve(cv, rng, id);
    else if (is_texture[id]) draw_texture(cv, rng, id);
    else draw_blob(cv, rng, id);
  }
  center_textures(cv, is_texture);

  std::vector<double> img(size * size);
  for (size_t p = 0; p < img.size(); ++p) img[p] = cv.background[p] + cv.offset[p];
  if (corrupt) {
    const double bias = rng.uniform(0, 0.25), sigma = rng.uniform(0.015, 0.045);
    const std::vector<double> field = value_noise(rng, size, 2, 1);
    for (size_t p = 0; p < img.size(); ++p) img[p] *= 1 + bias * (2 * field[p] - 1);
    blur(img, size);
    Stream noise(seed, split, index, kPixelNoise);
    for (double& v : img) v += sigma * noise.normal();
  }

  Sample s;
  s.size = size;
  s.image.resize(img.size());
  for (size_t p = 0; p < img.size(); ++p) s.image[p] = static_cast<float>(std::clamp(img[p], 0.0, 1.0));
  s.label = std::move(cv.label);
  return s;
}

}  // namespace

Sample make_sample(uint64_t seed, int split, uint64_t index, int64_t size) {
  check_args(split, size, "make_sample");
  return render(seed, split, index, size, true);
}

Sample make_clean_sample(uint64_t seed, int split, uint64_t index, int64_t size) {
  check_args(split, size, "make_clean_sample");
  return render(seed, split, index, size, false);
}

Batch make_batch(uint64_t seed, int split, uint64_t first_index, int64_t n, int64_t size) {
  check_args(split, size, "make_batch");
  HG_CHECK(n > 0, "segbench::make_batch: the number of samples n must be positive, got ", n);
  Batch b{empty({n, size, size, 1}, {f32}), empty({n, size, size}, {i64})};
  float* image = b.image.data<float>();
  int64_t* label = b.label.data<int64_t>();
  const int64_t plane = size * size;
  // On halfgrad's threads, as many as the calling thread may use: one on the training loop's
  // prefetch thread (its ThreadLimit), so preparing the next batch takes one core, not all of
  // them (an OpenMP team here ignored that limit and competed with the step's own threads).
  // Each image depends only on its index: the same batch on any number of threads. Nothing in
  // the loop throws: the arguments were checked above.
  std::atomic<int64_t> next{0};
  cpu::parallel_run(static_cast<int>(std::min<int64_t>(num_threads(), n)), [&](int) {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      const Sample s = render(seed, split, first_index + static_cast<uint64_t>(i), size, true);
      std::memcpy(image + i * plane, s.image.data(), plane * sizeof(float));
      std::memcpy(label + i * plane, s.label.data(), plane * sizeof(int64_t));
    }
  });
  return b;
}

uint64_t hash_sample(const Sample& sample) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&](uint64_t value, int bytes) {
    for (int k = 0; k < bytes; ++k) {
      h ^= (value >> (8 * k)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(sample.size), 8);
  for (float v : sample.image) mix(static_cast<uint16_t>(v * 65535.0f + 0.5f), 2);
  for (int64_t l : sample.label) mix(static_cast<uint64_t>(l), 8);
  return h;
}

std::array<double, kNumClasses> class_fractions(const Sample& sample) {
  std::array<double, kNumClasses> f{};
  for (int64_t l : sample.label) f[l] += 1;
  for (double& v : f) v /= sample.label.empty() ? 1 : static_cast<double>(sample.label.size());
  return f;
}

}  // namespace hg::segbench
