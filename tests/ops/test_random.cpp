// Seeded draws pinned to the bits they gave when the Philox-to-value step moved into a
// shared helper (ops/random_kernels.h): any change to that arithmetic changes a seeded
// model's initial weights on every device, so it must show up here.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "halfgrad.h"

using namespace hg;

namespace {
// FNV-1a over the tensor's bytes: one number stands for every element's bits.
uint64_t fingerprint(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<unsigned char> b(static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  std::memcpy(b.data(), c.data_ptr(), b.size());
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char x : b) h = (h ^ x) * 0x100000001b3ull;
  return h;
}
}  // namespace

TEST_CASE("seeded draws keep their bits in every dtype and distribution", "[ops][random]") {
  struct Case {
    const char* what;
    Tensor t;
    uint64_t want;
  };
  Generator g(20261204);
  const Case cases[] = {
      {"randn f32", randn({257}, {f32}, &g), 0x70c738686c5dd9ffull},
      {"randn f64", randn({257}, {f64}, &g), 0x8a2d8d25b3ccf330ull},
      {"randn f16", randn({257}, {f16}, &g), 0x417df5066536333aull},
      {"randn bf16", randn({257}, {bf16}, &g), 0x70bd2138364988b8ull},
      {"uniform f32", uniform({257}, -2, 5, {f32}, &g), 0xa46afa81922ef61full},
      {"uniform f64", uniform({257}, -2, 5, {f64}, &g), 0xdb2dd334707224f5ull},
      {"normal bf16", normal({257}, 3, 0.5, {bf16}, &g), 0x0ce7786d32aa0727ull},
      {"randint i64", randint(-5, 1000, {257}, {i64}, &g), 0xa63b87464a0ac67eull},
      {"randint f32", randint(0, 7, {257}, {f32}, &g), 0x1a414b59697b7c85ull},
      {"bernoulli", bernoulli({257}, 0.3, Device::cpu(), &g), 0x7dc08a0e71494c0aull},
  };
  for (const Case& c : cases) {
    INFO(c.what << ": 0x" << std::hex << fingerprint(c.t));
    CHECK(fingerprint(c.t) == c.want);
  }
}
