// The segmentation benchmark's procedural data set: every image is a pure function of
// (seed, split, index), bit for bit on every machine and thread count, so nothing is
// downloaded and a golden hash can pin the generator's output.
//
// Recipe of one S x S image (1 channel, f32 in [0,1]) and its label map (4 classes):
//  0 background  value noise: 4 octaves with cells of S/2, S/4, S/8, S/16 px (weights
//                1, 1/2, 1/4, 1/8), mean level m in [0.35, 0.65], amplitude +-[0.08, 0.15].
//  1 blobs       1-3 wobbly ellipses (semi-axes 0.06-0.20 S, any rotation, a 3rd/4th
//                harmonic on the radius): the background plus an offset of +-[0.15, 0.30].
//  2 texture     1-2 wobbly ellipses (semi-axes 0.10-0.22 S): the background plus a
//                zero-mean texture, an oriented sine grating (period 4-8 px, amplitude
//                0.10-0.20) or a +-[0.12, 0.20] speckle on 2x2 px cells. After all shapes
//                are drawn, the texture's mean over the pixels each region still owns is
//                subtracted, so the region's mean equals the background's there: only
//                the texture tells class 2 apart.
//  3 curves      thin paths 1-2 px wide: chains of max(1, S/64) C1-continuous cubic
//                Bezier segments, total length 0.20-0.35 S * S/64, 2-4 of them (1-3% of the
//                pixels); the background plus an offset of +-[0.20, 0.40].
// Blobs and texture regions are drawn in a random order, curves last; a later shape
// wins in the label map. Then a multiplicative bias field 1 +- [0, 0.25] (value noise
// with cells of S/2), a [1 2 1]/4 blur in each direction, Gaussian noise with sigma in
// [0.015, 0.045], and a clamp to [0, 1].
//
// Randomness: Philox4x32 keyed by (seed, index), with split in the counter's top bit, a
// substream (scene or pixel noise) in bits 48-62 and a running counter below. Uniforms,
// normals (Box-Muller) and sin/log are computed here from + - * / sqrt only, which IEEE
// rounds identically everywhere; libm and std:: distributions are not used.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "framework/tensor.h"

namespace hg::segbench {

inline constexpr int kNumClasses = 4;

struct Sample {
  std::vector<float> image;    // size * size, row-major
  std::vector<int64_t> label;  // size * size, in [0, kNumClasses)
  int64_t size = 0;
};

// Split 0 is training, 1 validation. size: a multiple of 16, at least 32.
Sample make_sample(uint64_t seed, int split, uint64_t index, int64_t size);
// The same scene and labels before the bias field, blur and noise (what the texture
// regions' matched mean is defined on).
Sample make_clean_sample(uint64_t seed, int split, uint64_t index, int64_t size);

struct Batch {
  Tensor image;  // [n, size, size, 1] f32 (NHWC)
  Tensor label;  // [n, size, size] i64
};
// Samples first_index .. first_index + n - 1, generated in parallel (OpenMP).
Batch make_batch(uint64_t seed, int split, uint64_t first_index, int64_t n, int64_t size);

// FNV-1a (64 bit) over the size, the image quantised to uint16(v * 65535 + 0.5) and the
// labels, all little-endian: a last-ulp difference in the image rarely changes it.
uint64_t hash_sample(const Sample& sample);
// Fraction of pixels of each class.
std::array<double, kNumClasses> class_fractions(const Sample& sample);

}  // namespace hg::segbench
