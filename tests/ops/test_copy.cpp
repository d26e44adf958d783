// copy_ between views of one storage: overlapping source and destination read the values
// as they were before the copy; an expanded destination is refused (as in PyTorch).
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("copy_ from an overlapping shifted view reads the old values", "[copy][overlap]") {
  for (DType dt : {f32, f16, f64}) {
    Tensor t = arange(0, 6, 1, {dt});
    copy_(t.narrow(0, 1, 5), t.narrow(0, 0, 5));  // a memmove forward: UB with memcpy before
    CHECK(t.to_vector<double>() == std::vector<double>{0, 0, 1, 2, 3, 4});
    Tensor u = arange(0, 6, 1, {dt});
    copy_(u.narrow(0, 0, 5), u.narrow(0, 1, 5));
    CHECK(u.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 5});
  }
}

TEST_CASE("copy_ of a matrix onto its own transpose gives the transpose", "[copy][overlap]") {
  Tensor m = arange(0, 9).view({3, 3});
  copy_(m, m.transpose(0, 1));  // element by element this overwrote m[0][1] before reading it
  CHECK(m.to_vector<double>() == std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8});
  Tensor r = arange(0, 6).view({2, 3});
  copy_(r, r.select(0, 1));  // a broadcast source inside the destination
  CHECK(r.to_vector<double>() == std::vector<double>{3, 4, 5, 3, 4, 5});
}

TEST_CASE("copy_ into disjoint views of one storage is unaffected", "[copy][overlap]") {
  Tensor t = arange(0, 6);
  copy_(t.narrow(0, 3, 3), t.narrow(0, 0, 3));
  CHECK(t.to_vector<double>() == std::vector<double>{0, 1, 2, 0, 1, 2});
  Tensor e = arange(0, 8).view({4, 2});
  copy_(e.select(1, 0), e.select(1, 1));  // interleaved columns
  CHECK(e.to_vector<double>() == std::vector<double>{1, 1, 3, 3, 5, 5, 7, 7});
}

TEST_CASE("copy_ refuses an expanded destination", "[copy][errors]") {
  Tensor base = zeros({1, 3});
  CHECK_THROWS_WITH(copy_(base.expand({2, 3}), arange(0, 6).view({2, 3})),
                    Catch::Contains("more than one element of the written-to tensor refers to a single memory location") &&
                        Catch::Contains("axis 0"));
  CHECK(base.to_vector<double>() == std::vector<double>{0, 0, 0});  // nothing written
  CHECK(base.version() == 0);
  copy_(base.expand({1, 3}), ones({3}));  // stride 0 on an axis of size 1 writes each element once
  CHECK(base.to_vector<double>() == std::vector<double>{1, 1, 1});
}
