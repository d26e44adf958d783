// Training checkpoints: sections, metadata and step round-trip; the file is a plain
// safetensors file with namespaced names; format errors; generator state bit for bit.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>

#include "halfgrad.h"
#include "tests/temp_dir.h"

using namespace hg;
using hg::test::TempDir;

namespace {

Tensor i64_scalar(int64_t v) { return from_data<int64_t>({v}, {}, {i64}); }

void check_same(const StateDict& got, const StateDict& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(got.count(name));
    CHECK(got.at(name).dtype() == t.dtype());
    CHECK(got.at(name).shape() == t.shape());
    CHECK(got.at(name).to_vector<double>() == t.to_vector<double>());
  }
}

Checkpoint sample() {
  Checkpoint ck;
  ck.sections["model"] = {{"conv.weight", arange(0, 6, 1, {f32}).view({2, 3})},
                          {"conv.bias", tensor({0.5, -1.5}, {bf16})}};
  ck.sections["optimizer"] = {{"exp_avg.0", tensor({1e-3, -2e-3, 4e-3}, {f32})}, {"step", i64_scalar(17)}};
  ck.sections["scheduler"] = {{"last_epoch", i64_scalar(7)}};
  ck.sections["scaler"] = {{"scale", scalar_tensor(65536.0)}, {"growth_tracker", i64_scalar(3)}};
  ck.sections["rng"] = generator_state(Generator(42));
  ck.sections["ema"] = {};
  ck.metadata = {{"run", "unet-amp"}, {"policy", "params=f32,compute=f16,output=f32"}};
  ck.step = 123456789012;
  return ck;
}

}  // namespace

TEST_CASE("a checkpoint round-trips its sections, metadata and step", "[checkpoint]") {
  TempDir dir;
  const Checkpoint ck = sample();
  save_checkpoint(dir / "ck.safetensors", ck);
  const Checkpoint back = load_checkpoint(dir / "ck.safetensors");
  CHECK(back.step == 123456789012);
  CHECK(back.metadata == ck.metadata);
  REQUIRE(back.sections.size() == 6);
  for (const auto& [section, state] : ck.sections) {
    INFO(section);
    REQUIRE(back.sections.count(section));
    check_same(back.sections.at(section), state);
  }
  // What was loaded saves again unchanged: the checkpoint's own metadata keys are not
  // handed back as user metadata.
  save_checkpoint(dir / "again.safetensors", back);
  CHECK(load_checkpoint(dir / "again.safetensors").metadata == ck.metadata);
}

TEST_CASE("a checkpoint is a safetensors file with section-prefixed names", "[checkpoint]") {
  TempDir dir;
  Checkpoint ck;
  ck.sections["model"] = {{"w", tensor({1.0})}, {"nested/name", tensor({2.0})}};
  ck.sections["optimizer"] = {{"w.momentum", tensor({3.0})}};
  ck.step = 42;
  save_checkpoint(dir / "ck.safetensors", ck);
  SafetensorsFile f = load_safetensors(dir / "ck.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, t] : f.tensors) names.push_back(name);
  CHECK(names == std::vector<std::string>{"model/nested/name", "model/w", "optimizer/w.momentum"});
  CHECK(f.metadata.at("format") == "halfgrad-checkpoint");
  CHECK(f.metadata.at("version") == "1");
  CHECK(f.metadata.at("step") == "42");
  CHECK(load_checkpoint(dir / "ck.safetensors").sections.at("model").count("nested/name"));
}

TEST_CASE("files that are not checkpoints of a known version are rejected", "[checkpoint][errors]") {
  TempDir dir;
  const std::string path = dir / "f.safetensors";
  const StateDict ok = {{"model/w", tensor({1.0})}};
  auto write = [&](const StateDict& sd, const std::map<std::string, std::string>& meta) {
    save_safetensors(path, sd, meta);
  };
  write(ok, {});
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains(path) && Catch::Contains("not a halfgrad checkpoint") &&
                                               Catch::Contains("is missing"));
  write(ok, {{"format", "pytorch"}, {"version", "1"}, {"step", "0"}});
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("\"format\" is \"pytorch\""));
  write(ok, {{"format", "halfgrad-checkpoint"}, {"step", "0"}});
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("version missing"));
  write(ok, {{"format", "halfgrad-checkpoint"}, {"version", "2"}, {"step", "0"}});
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("version \"2\" is not one this build reads"));
  for (const char* step : {"", "12x", "99999999999999999999", " 1", "-5", "-0", "+5", "0x10"}) {
    INFO(step);
    write(ok, {{"format", "halfgrad-checkpoint"}, {"version", "1"}, {"step", step}});
    CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains(path) && Catch::Contains("step \"" + std::string(step) +
                                                                                  "\" is not a non-negative 64-bit integer"));
  }
  write({{"w", tensor({1.0})}}, {{"format", "halfgrad-checkpoint"}, {"version", "1"}, {"step", "3"}});
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("\"w\" is not named \"<section>/<name>\""));
  write(ok, {{"format", "halfgrad-checkpoint"}, {"version", "1"}, {"step", "3"}, {"sections", "model,bad name"}});
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("invalid section name \"bad name\""));
  write(ok, {{"format", "halfgrad-checkpoint"}, {"version", "1"}, {"step", "3"}});
  CHECK(load_checkpoint(path).step == 3);  // "sections" is optional: derived from the names
}

TEST_CASE("checkpoints whose sections disagree with their tensors are refused", "[checkpoint][errors]") {
  TempDir dir;
  const std::string path = dir / "f.safetensors";
  const std::map<std::string, std::string> meta = {{"format", "halfgrad-checkpoint"}, {"version", "1"}, {"step", "0"}};
  auto with = [&](std::map<std::string, std::string> m, const std::string& k, const std::string& v) {
    m[k] = v;
    return m;
  };
  save_safetensors(path, {{"model/w", tensor({1.0})}}, with(meta, "sections", "model,model"));
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains(path) && Catch::Contains("lists \"model\" twice"));
  save_safetensors(path, {{"a/w", tensor({1.0})}}, with(meta, "sections", "a,b,a"));
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("lists \"a\" twice"));
  save_safetensors(path, {{"model/", tensor({1.0})}}, with(meta, "sections", "model"));
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("tensor \"model/\" has an empty name after its section"));
  save_safetensors(path, {{"model/", tensor({1.0})}}, meta);
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("tensor \"model/\" has an empty name"));
  save_safetensors(path, {{"model/w", tensor({1.0})}, {"extra/w", tensor({2.0})}}, with(meta, "sections", "model"));
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("tensor \"extra/w\" is in section \"extra\", which the "
                                                           "metadata \"sections\" (\"model\") does not list"));
  save_safetensors(path, {{"model/w", tensor({1.0})}}, with(meta, "sections", ""));
  CHECK_THROWS_WITH(load_checkpoint(path), Catch::Contains("section \"model\", which the metadata \"sections\" (\"\")"));
  // Listed sections with no tensors, and a name that itself has slashes, are fine.
  save_safetensors(path, {{"model/a/b", tensor({1.0})}}, with(meta, "sections", "model,ema"));
  const Checkpoint ck = load_checkpoint(path);
  CHECK(ck.sections.size() == 2);
  CHECK(ck.sections.at("ema").empty());
  CHECK(ck.sections.at("model").count("a/b") == 1);
}

TEST_CASE("save_checkpoint refuses an empty or directory path and a negative step before writing", "[checkpoint][errors]") {
  TempDir dir;
  CHECK_THROWS_WITH(save_checkpoint("", sample()), Catch::Contains("cannot write a file at an empty path"));
  CHECK_THROWS_WITH(save_checkpoint(dir.path, sample()), Catch::Contains(dir.path) && Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(save_checkpoint(dir.path + "/", sample()), Catch::Contains("names a directory"));
  Checkpoint bad = sample();
  bad.step = -5;
  CHECK_THROWS_WITH(save_checkpoint(dir / "ck.safetensors", bad), Catch::Contains("step -5 is negative"));
  CHECK(dir.listing().empty());
}

TEST_CASE("invalid checkpoints are refused before anything is written", "[checkpoint][errors]") {
  TempDir dir;
  const std::string path = dir / "ck.safetensors";
  save_checkpoint(path, sample());
  Checkpoint bad = sample();
  bad.sections["a/b"] = {{"w", tensor({1.0})}};
  CHECK_THROWS_WITH(save_checkpoint(path, bad), Catch::Contains("section name \"a/b\""));
  bad = sample();
  bad.sections[""] = {};
  CHECK_THROWS_WITH(save_checkpoint(path, bad), Catch::Contains("must be non-empty"));
  bad = sample();
  bad.metadata["step"] = "5";
  CHECK_THROWS_WITH(save_checkpoint(path, bad), Catch::Contains("\"step\" is reserved"));
  bad = sample();
  bad.sections["model"]["w"] = Tensor();
  CHECK_THROWS_WITH(save_checkpoint(path, bad), Catch::Contains("'model/w' is undefined"));
  CHECK(load_checkpoint(path).step == 123456789012);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 1);
}

TEST_CASE("generator state round-trips bit for bit and resumes the same stream", "[checkpoint][rng]") {
  TempDir dir;
  Generator g;
  g.set_state(0xFEDCBA9876543210ull, 0x8000000000000003ull);  // both need all 64 bits
  rand({5}, {f32}, &g);
  const StateDict state = generator_state(g);
  REQUIRE(state.size() == 2);
  CHECK(state.at("seed").dtype() == i64);
  CHECK(state.at("seed").dim() == 0);
  CHECK(*state.at("seed").data<int64_t>() == -81985529216486896);  // 0xFEDCBA9876543210 - 2^64
  CHECK(*state.at("draws").data<int64_t>() == INT64_MIN + 4);

  Checkpoint ck;
  ck.sections["rng"] = state;
  save_checkpoint(dir / "ck.safetensors", ck);
  const std::vector<float> expected = rand({8}, {f32}, &g).to_vector<float>();
  const std::vector<float> expected_next = randn({3}, {f64}, &g).to_vector<float>();

  Generator resumed(1);
  set_generator_state(resumed, load_checkpoint(dir / "ck.safetensors").sections.at("rng"));
  CHECK(resumed.seed() == 0xFEDCBA9876543210ull);
  CHECK(resumed.draws() == 0x8000000000000004ull);
  CHECK(rand({8}, {f32}, &resumed).to_vector<float>() == expected);
  CHECK(randn({3}, {f64}, &resumed).to_vector<float>() == expected_next);

  Generator other;
  CHECK_THROWS_WITH(set_generator_state(other, {{"seed", i64_scalar(1)}}), Catch::Contains("no \"draws\""));
  CHECK_THROWS_WITH(set_generator_state(other, {{"seed", scalar_tensor(1.0)}, {"draws", i64_scalar(0)}}),
                    Catch::Contains("\"seed\" must be a one-element i64 tensor, got f32"));
  CHECK_THROWS_WITH(set_generator_state(other, {{"seed", i64_scalar(1)}, {"draws", i64_scalar(0)}, {"x", i64_scalar(0)}}),
                    Catch::Contains("unexpected tensor \"x\""));
  CHECK(other.seed() == 0);
  CHECK(other.draws() == 0);
}
