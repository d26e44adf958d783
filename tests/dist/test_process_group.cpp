// The MPI process group under mpirun -np 2: each collective against values computed by
// hand (rank r contributes values that depend on r), f16/bf16 rounding, bad input.
#include <catch2/catch.hpp>

#include <cmath>

#include "dist/process_group.h"
#include "halfgrad.h"

using namespace hg;
using hg::dist::ReduceOp;

namespace {
dist::ProcessGroup& pg() { return *dist::default_group(); }
}  // namespace

TEST_CASE("all_reduce sum/max/min/avg of f32; f64 and i64 match hand-computed values", "[dist]") {
  REQUIRE(pg().size() == 2);
  const double r = pg().rank();
  // Rank 0 holds {1, -2, 5}, rank 1 holds {10, 3, -5}.
  auto mine = [&](DType dt) { return tensor({1 + 9 * r, -2 + 5 * r, 5 - 10 * r}, {dt}); };
  for (DType dt : {f32, f64}) {
    Tensor s = mine(dt), mx = mine(dt), mn = mine(dt), av = mine(dt);
    pg().all_reduce(s, ReduceOp::sum);
    pg().all_reduce(mx, ReduceOp::max);
    pg().all_reduce(mn, ReduceOp::min);
    pg().all_reduce(av, ReduceOp::avg);
    CHECK(s.to_vector<double>() == std::vector<double>{11, 1, 0});
    CHECK(mx.to_vector<double>() == std::vector<double>{10, 3, 5});
    CHECK(mn.to_vector<double>() == std::vector<double>{1, -2, -5});
    CHECK(av.to_vector<double>() == std::vector<double>{5.5, 0.5, 0});
  }
  Tensor i = from_data<int64_t>({int64_t(1) << 40, 7 * static_cast<int64_t>(r)}, {2});
  pg().all_reduce(i, ReduceOp::sum);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{int64_t(1) << 41, 7});
}

TEST_CASE("f16 and bf16 all_reduce: the exact sum rounded once (ties to even); NaN wins max", "[dist]") {
  const bool r1 = pg().rank() == 1;
  // f16 at 1: ulp 2^-10. 1 + 2^-11 is a tie -> 1 (even); (1 + 2^-10) + 2^-11 -> 1 + 2^-9.
  // 60000 + 10000 overflows f16 (max 65504) -> inf. 2^-24 + 2^-24 = 2^-23 (subnormals).
  Tensor h = tensor({r1 ? std::ldexp(1.0, -11) : 1.0, r1 ? std::ldexp(1.0, -11) : 1 + std::ldexp(1.0, -10),
                     r1 ? 10000.0 : 60000.0, std::ldexp(1.0, -24)},
                    {f16});
  pg().all_reduce(h, ReduceOp::sum);
  std::vector<double> got = h.to_vector<double>();
  CHECK(got[0] == 1.0);
  CHECK(got[1] == 1 + std::ldexp(1.0, -9));
  CHECK(std::isinf(got[2]));
  CHECK(got[3] == std::ldexp(1.0, -23));
  // bf16 at 1: ulp 2^-7; 1 + 3*2^-9 = 1.005859375 -> nearest bf16 is 1 + 2^-7.
  Tensor b = tensor({r1 ? 3 * std::ldexp(1.0, -9) : 1.0}, {bf16});
  pg().all_reduce(b, ReduceOp::sum);
  CHECK(b.item<double>() == 1 + std::ldexp(1.0, -7));
  Tensor m = tensor({r1 ? NAN : 1.0, r1 ? 2.0 : -3.0}, {f16});
  pg().all_reduce(m, ReduceOp::max);
  CHECK(std::isnan(m.to_vector<double>()[0]));
  CHECK(m.to_vector<double>()[1] == 2.0);
  Tensor a = tensor({r1 ? 3.0 : 0.0}, {f16});
  pg().all_reduce(a, ReduceOp::avg);
  CHECK(a.item<double>() == 1.5);
}

TEST_CASE("broadcast from rank 1; all_gather in rank order; async all_reduce; barrier", "[dist]") {
  const double r = pg().rank();
  Tensor t = tensor({r, 2 * r}, {f32});
  pg().broadcast(t, 1);
  CHECK(t.to_vector<double>() == std::vector<double>{1, 2});
  std::vector<Tensor> all = pg().all_gather(tensor({r + 0.5}, {f64}));
  REQUIRE(all.size() == 2);
  CHECK(all[0].item<double>() == 0.5);
  CHECK(all[1].item<double>() == 1.5);
  Tensor s = tensor({r + 1}, {f32});
  auto w = pg().all_reduce_async(s, ReduceOp::sum);
  w->wait();
  CHECK(s.item<double>() == 3.0);
  pg().barrier();
}

TEST_CASE("bad collective input is refused with a message naming it; on every rank alike", "[dist]") {
  Tensor nc = zeros({3, 4}).transpose(0, 1);
  CHECK_THROWS_WITH(pg().all_reduce(nc), Catch::Contains("contiguous"));
  Tensor i = zeros({2}, {i64});
  CHECK_THROWS_WITH(pg().all_reduce(i, ReduceOp::avg), Catch::Contains("avg needs a floating dtype"));
  Tensor f = zeros({2});
  CHECK_THROWS_WITH(pg().broadcast(f, 2), Catch::Contains("valid: 0..1"));
  Tensor u;
  CHECK_THROWS_WITH(pg().all_reduce(u), Catch::Contains("undefined"));
}
