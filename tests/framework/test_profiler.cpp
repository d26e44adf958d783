// hg::Profiler: what it records (op names, module paths, dtypes, phases, FLOPs, bytes),
// that op times account for a step's wall time, that its Chrome trace is valid trace
// event format JSON, and that nothing is recorded while no profiler runs.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <thread>

#include "framework/cpu/isa.h"
#include "framework/profiler.h"
#include "halfgrad.h"
#include "tests/nn/module_models.h"
#include "tests/framework/trace_check.h"

using namespace hg;

namespace {

std::vector<const ProfileEvent*> ops_named(const Profiler& p, const std::string& name) {
  std::vector<const ProfileEvent*> out;
  for (const ProfileEvent& e : p.events())
    if (e.kind == ProfileEvent::Kind::op && e.name == name) out.push_back(&e);
  return out;
}

}  // namespace

TEST_CASE("profiler: events carry module paths, dtypes, shapes and the phase", "[profiler]") {
  test::Outer model;
  Tensor x = randn({5, 3});
  Profiler prof;
  Tensor y = model(x);
  sum(y).backward();
  prof.stop();

  // Forward: the two linears (recorded by linear_stub) in their modules, ReLU in head.1.
  auto linears = ops_named(prof, "linear");
  std::map<std::string, int> fwd_linear_modules;
  for (auto* e : linears)
    if (!e->backward) fwd_linear_modules[e->module]++;
  CHECK(fwd_linear_modules == std::map<std::string, int>{{"enc.fc", 1}, {"head.0", 1}});
  auto relus = ops_named(prof, "relu");
  REQUIRE(relus.size() == 1);
  CHECK(relus[0]->module == "head.1");
  CHECK_FALSE(relus[0]->backward);
  CHECK(relus[0]->stub == "unary");
  CHECK(relus[0]->dtype == "f32");
  CHECK(relus[0]->shapes == std::vector<Shape>{{5, 2}, {5, 2}});
  CHECK(relus[0]->device == Device::cpu());
  CHECK(relus[0]->kernel == cpu::isa_name(cpu::isa()));
  // cpu ops are timed on the host only: no device span, no allocator bytes of a device.
  CHECK_FALSE(relus[0]->device_timed());
  CHECK(relus[0]->time_ns() == relus[0]->dur_ns);
  CHECK(relus[0]->allocator_reserved == -1);
  CHECK(prof.device_timing().pairs == 0);

  // Backward: relu's gradient is relu_grad, run for the relu node recorded in head.1.
  auto relu_grads = ops_named(prof, "relu_grad");
  REQUIRE(relu_grads.size() == 1);
  CHECK(relu_grads[0]->backward);
  CHECK(relu_grads[0]->forward_op == "relu");
  CHECK(relu_grads[0]->module == "head.1");
  int bwd_in_enc_fc = 0;
  for (const ProfileEvent& e : prof.events())
    if (e.kind == ProfileEvent::Kind::op && e.backward && e.module == "enc.fc") {
      CHECK(e.forward_op == "matmul");
      ++bwd_in_enc_fc;
    }
  CHECK(bwd_in_enc_fc >= 2);  // the weight gradient and the bias gradient at least
  // The engine's node ranges sit on the backward track and name the forward op.
  bool relu_node_range = false;
  for (const ProfileEvent& e : prof.events())
    relu_node_range = relu_node_range || (e.kind == ProfileEvent::Kind::range && e.name == "relu_backward" && e.backward);
  CHECK(relu_node_range);
}

TEST_CASE("profiler: reduced-precision ops and casts are told apart", "[profiler]") {
  Tensor x = randn({64});
  Profiler prof;
  Tensor h = x.to(f16);
  Tensor r = relu(h);
  Tensor b = r.to(bf16);
  prof.stop();
  auto casts = ops_named(prof, "cast");
  REQUIRE(casts.size() == 2);
  CHECK(casts[0]->dtype == "f32->f16");
  CHECK(casts[1]->dtype == "f16->bf16");
  auto relus = ops_named(prof, "relu");
  REQUIRE(relus.size() == 1);
  CHECK(relus[0]->dtype == "f16");
  CHECK(relus[0]->dtypes == std::vector<DType>{f16, f16});
  CHECK(relus[0]->bytes_allocated >= 64 * 2);  // its f16 output, allocated just before the kernel
  const auto stats = prof.key_averages();
  int cast_rows = 0;
  for (const OpStats& s : stats) cast_rows += s.name == "cast";
  CHECK(cast_rows == 2);  // grouped by op and dtype
}

TEST_CASE("profiler: FLOPs of matrix products and convolutions", "[profiler]") {
  Tensor x = randn({2, 8, 8, 3}).set_requires_grad();  // NHWC
  Tensor w = randn({4, 3, 3, 3}).set_requires_grad();  // [K, R, S, C]
  Tensor a = randn({6, 5}), wl = randn({7, 5});
  Tensor b1 = randn({3, 4, 5}), b2 = randn({3, 5, 2});
  Profiler prof;
  Tensor y = conv2d(x, w, Tensor(), {{1, 1}, {1, 1}});
  sum(y).backward();
  Tensor l = linear(a, wl);
  Tensor m = matmul(b1, b2);
  prof.stop();
  // conv: 2 * (N*P*Q*K) * (R*S*C) = 2 * (2*8*8*4) * 27 for the forward and both gradients.
  const double conv_flops = 2.0 * (2 * 8 * 8 * 4) * 27;
  for (const char* op : {"conv2d_forward", "conv2d_dgrad", "conv2d_wgrad"}) {
    auto evs = ops_named(prof, op);
    REQUIRE(evs.size() == 1);
    CHECK(evs[0]->flops == conv_flops);
  }
  auto lin = ops_named(prof, "linear");
  REQUIRE(lin.size() == 1);
  CHECK(lin[0]->flops == 2.0 * 6 * 7 * 5);
  auto bmm = ops_named(prof, "bmm");
  REQUIRE(bmm.size() == 1);
  CHECK(bmm[0]->flops == 2.0 * 3 * 4 * 2 * 5);
  CHECK(ops_named(prof, "sum").at(0)->flops == 0);
}

TEST_CASE("profiler: op times add up to the wall time of a training step", "[profiler]") {
  // Large enough that kernels dominate: ops must cover most of the step (the rest is
  // autograd bookkeeping, allocation and the recording itself) and never more than all.
  nn::Sequential model(std::make_shared<nn::Linear>(384, 384), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(384, 384));
  Tensor x = randn({384, 384});
  Profiler prof;
  auto t0 = std::chrono::steady_clock::now();
  mean(square(model(x))).backward();
  auto t1 = std::chrono::steady_clock::now();
  prof.stop();
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  const int64_t ops = prof.op_total_ns();
  INFO("ops " << ops << " ns of a " << wall << " ns step\n" << prof.table());
  CHECK(ops <= wall);
#if !defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer the allocations and bookkeeping between ops are instrumented too,
  // and their share grows with the heap the suite has left behind (41-44% coverage after
  // the 218 tests before this one, 60%+ alone): coverage is a property of the real build.
  CHECK(static_cast<double>(ops) >= 0.6 * static_cast<double>(wall));
#endif
  CHECK(prof.wall_ns() >= wall);
  // The tables partition the same time: per op and per module totals equal the op total.
  int64_t by_op = 0, by_module = 0;
  for (const OpStats& s : prof.key_averages()) by_op += s.total_ns;
  for (const ModuleStats& s : prof.module_averages()) by_module += s.forward_ns + s.backward_ns;
  CHECK(by_op == ops);
  CHECK(by_module == ops);
}

TEST_CASE("profiler: the Chrome trace is valid trace event format", "[profiler]") {
  test::Outer model;
  Profiler prof;
  {
    auto step = profile_range("step");
    auto inner = profile_range("forward");
    sum(model(randn({4, 3}).to(f16).to(f32))).backward();
  }
  prof.stop();
  const test::TraceSummary trace = test::check_trace(prof.chrome_trace());
  CHECK(trace.process_names == std::map<int, std::string>{{1, "halfgrad"}});  // no device track for cpu ops
  CHECK(trace.flows.empty());
  int ops = 0, fwd_tid = -1, bwd_tid = -1;
  for (const auto& ev : trace.spans) {
    if (ev.at("cat") != "op") continue;
    ++ops;
    REQUIRE(ev.at("args").at("dtype").is_string());
    REQUIRE(ev["args"].at("shapes").is_array());
    (ev["args"].contains("forward_op") ? bwd_tid : fwd_tid) = ev["tid"];
  }
  CHECK(ops > 0);
  // One tensor-memory counter per op, on the host: cpu ops have no allocator counter.
  CHECK(trace.counters.size() == static_cast<size_t>(ops));
  for (const auto& c : trace.counters) CHECK(c.at("name") == "memory");
  CHECK(trace.counters.back()["ts"].get<double>() > 0);
  REQUIRE(trace.counters.back().at("args").at("bytes in use").is_number_integer());
  // Forward and backward on separate, named tracks.
  REQUIRE(fwd_tid != -1);
  REQUIRE(bwd_tid != -1);
  CHECK(fwd_tid != bwd_tid);
  CHECK(trace.track_names.at({1, fwd_tid}) == "thread 0 forward");
  CHECK(trace.track_names.at({1, bwd_tid}) == "thread 0 backward");
  // The ranges nest as written: "forward" inside "step".
  const ProfileEvent *step = nullptr, *fwd = nullptr;
  for (const ProfileEvent& e : prof.events()) {
    if (e.kind == ProfileEvent::Kind::range && e.name == "step") step = &e;
    if (e.kind == ProfileEvent::Kind::range && e.name == "forward") fwd = &e;
  }
  REQUIRE(step != nullptr);
  REQUIRE(fwd != nullptr);
  CHECK(fwd->depth == step->depth + 1);
  CHECK(fwd->start_ns >= step->start_ns);
  CHECK(fwd->start_ns + fwd->dur_ns <= step->start_ns + step->dur_ns);
}

TEST_CASE("profiler: nothing is recorded while no profiler runs", "[profiler]") {
  Tensor x = randn({16});
  {
    Profiler idle;
    idle.stop();
    Tensor y = relu(x) + x;  // after stop(): not recorded
    auto r = profile_range("after stop");
    CHECK(idle.events().empty());
  }
  Tensor before = relu(x);
  Profiler prof;
  CHECK_THROWS_WITH(prof.events(), Catch::Contains("still recording"));
  CHECK_THROWS_WITH(Profiler(), Catch::Contains("another Profiler is already recording"));
  Tensor during = exp(x);
  prof.stop();
  Tensor after = relu(x);
  REQUIRE(prof.events().size() == 1);
  CHECK(prof.events()[0].name == "exp");
  Profiler again;  // a new one may start once the first stopped
  again.stop();
  CHECK(again.events().empty());
}

TEST_CASE("profiler: tables name every column and row group", "[profiler]") {
  test::Outer model;
  Profiler prof;
  sum(model(randn({2, 3}))).backward();
  prof.stop();
  const std::string ops = prof.table(), mods = prof.module_table();
  CHECK_THAT(ops, Catch::Contains("Op") && Catch::Contains("Total ms") && Catch::Contains("GFLOP/s") &&
                      Catch::Contains("relu_grad") && Catch::Contains("bwd"));
  CHECK_THAT(mods, Catch::Contains("enc.fc") && Catch::Contains("head.1") && Catch::Contains("Bwd ms"));
}

TEST_CASE("profiler: other threads are recorded on their own tracks, or left out", "[profiler]") {
  Tensor x = randn({32});
  auto run_elsewhere = [&] { std::thread([&] { Tensor y = exp(x); }).join(); };
  Profiler all;
  Tensor here = relu(x);
  run_elsewhere();
  all.stop();
  auto relus = ops_named(all, "relu"), exps = ops_named(all, "exp");
  REQUIRE(relus.size() == 1);
  REQUIRE(exps.size() == 1);
  CHECK(relus[0]->thread != exps[0]->thread);

  Profiler mine(/*this_thread_only=*/true);
  Tensor here2 = relu(x);
  run_elsewhere();
  mine.stop();
  CHECK(ops_named(mine, "relu").size() == 1);
  CHECK(ops_named(mine, "exp").empty());
}

TEST_CASE("profiler: a ProfilePause records nothing and is left out of the wall time", "[profiler]") {
  const Tensor a = randn({64}), b = randn({64});
  Profiler prof(true);
  Tensor c = a + b;
  {
    ProfilePause pause;
    Tensor hidden = a * b;  // not recorded
    {
      ProfilePause nested;  // does nothing, and must not resume recording when it ends
    }
    Tensor still_hidden = a - b;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  Tensor d = c + a;
  prof.stop();
  CHECK(ops_named(prof, "add").size() == 2);
  CHECK(ops_named(prof, "mul").empty());
  CHECK(ops_named(prof, "sub").empty());
  // Two additions on 64 elements outside the pause; the 300 ms sleep inside it is not counted.
  CHECK(prof.wall_ns() < 300'000'000);
  CHECK(prof.wall_ns() >= prof.op_total_ns());
}

TEST_CASE("profiler: a ProfilePause without a recording profiler does nothing", "[profiler]") {
  { ProfilePause pause; }
  Profiler prof(true);
  Tensor c = randn({4}) + randn({4});
  prof.stop();
  CHECK(ops_named(prof, "add").size() == 1);
}
