// Checkpoints as safetensors files with section-prefixed names and a few metadata keys
// of their own, and the generator state they carry.
#include "framework/serialize/checkpoint.h"

#include <algorithm>
#include <bit>
#include <charconv>

#include "framework/serialize/safetensors.h"

namespace hg {
namespace {

using detail::concat;

constexpr const char* kFormat = "halfgrad-checkpoint";
constexpr const char* kVersion = "1";
// Listing the sections keeps one saved empty (an optimizer before its first step) from
// vanishing on the way back.
constexpr const char* kReservedKeys[] = {"format", "version", "step", "sections"};

bool valid_section_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

const std::string* find(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

std::string describe(const std::string* value) { return value ? concat('"', *value, '"') : std::string("missing"); }

// Digits only, as the saver writes them: no sign (so no "-0"), no spaces.
bool parse_step(const std::string& s, int64_t& out) {
  const char* end = s.data() + s.size();
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  auto [stop, err] = std::from_chars(s.data(), end, out);
  return stop == end && err == std::errc{};
}

Tensor u64_scalar(uint64_t v) {
  Tensor t = empty({}, {i64});
  *t.data<int64_t>() = std::bit_cast<int64_t>(v);
  return t;
}

uint64_t u64_of(const StateDict& state, const char* key) {
  auto it = state.find(key);
  HG_CHECK(it != state.end(), "set_generator_state: the state has no \"", key, "\" tensor");
  const Tensor& t = it->second;
  HG_CHECK(t.defined() && t.dtype() == i64 && t.numel() == 1, "set_generator_state: \"", key,
           "\" must be a one-element i64 tensor, got ",
           t.defined() ? concat(dtype_name(t.dtype()), " of shape ", shape_str(t.shape())) : "an undefined tensor");
  // Read the bits directly: a detour through double would lose the low bits of large values.
  return std::bit_cast<uint64_t>(*t.detach().to(Device::cpu()).contiguous().data<int64_t>());
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  HG_CHECK(checkpoint.step >= 0, path, ": checkpoint step ", checkpoint.step, " is negative; steps count from 0");
  StateDict flat;
  std::string sections;
  for (const auto& [section, state] : checkpoint.sections) {
    HG_CHECK(valid_section_name(section), path, ": checkpoint section name \"", section,
             "\" must be non-empty and use only letters, digits, '_' and '-'");
    if (!sections.empty()) sections += ',';
    sections += section;
    for (const auto& [name, t] : state) flat.emplace(section + "/" + name, t);
  }
  std::map<std::string, std::string> metadata = checkpoint.metadata;
  for (const char* key : kReservedKeys)
    HG_CHECK(!metadata.count(key), path, ": metadata key \"", key, "\" is reserved by the checkpoint format");
  metadata.emplace("format", kFormat);
  metadata.emplace("version", kVersion);
  metadata.emplace("step", std::to_string(checkpoint.step));
  metadata.emplace("sections", sections);
  save_safetensors(path, flat, metadata);
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  const std::string* format = find(file.metadata, "format");
  HG_CHECK(format && *format == kFormat, path, ": not a halfgrad checkpoint (metadata \"format\" is ",
           describe(format), ", expected \"", kFormat, "\")");
  const std::string* version = find(file.metadata, "version");
  HG_CHECK(version && *version == kVersion, path, ": checkpoint version ", describe(version),
           " is not one this build reads (it reads version ", kVersion, ")");

  Checkpoint ck;
  const std::string* step = find(file.metadata, "step");
  HG_CHECK(step && parse_step(*step, ck.step), path, ": checkpoint step ", describe(step),
           " is not a non-negative 64-bit integer");
  // With a "sections" list (every saver writes one), a tensor must be in a listed section;
  // without one, the sections are those the names show.
  const std::string* listed = find(file.metadata, "sections");
  if (listed && !listed->empty()) {
    for (size_t begin = 0, comma; begin <= listed->size(); begin = comma + 1) {
      comma = std::min(listed->find(',', begin), listed->size());
      const std::string section = listed->substr(begin, comma - begin);
      HG_CHECK(valid_section_name(section), path, ": metadata \"sections\" lists an invalid section name \"",
               section, "\"");
      HG_CHECK(ck.sections.emplace(section, StateDict{}).second, path, ": metadata \"sections\" lists \"", section,
               "\" twice");
    }
  }
  for (auto& [name, t] : file.tensors) {
    const size_t slash = name.find('/');
    HG_CHECK(slash != std::string::npos && valid_section_name(name.substr(0, slash)), path, ": tensor \"", name,
             "\" is not named \"<section>/<name>\"");
    const std::string section = name.substr(0, slash);
    HG_CHECK(slash + 1 < name.size(), path, ": tensor \"", name, "\" has an empty name after its section \"",
             section, "/\"");
    auto it = ck.sections.find(section);
    HG_CHECK(!listed || it != ck.sections.end(), path, ": tensor \"", name, "\" is in section \"", section,
             "\", which the metadata \"sections\" (", describe(listed), ") does not list");
    if (it == ck.sections.end()) it = ck.sections.emplace(section, StateDict{}).first;
    it->second.emplace(name.substr(slash + 1), std::move(t));
  }
  // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
  for (auto& kv : file.metadata) {
    const std::string& key = kv.first;
    if (std::none_of(std::begin(kReservedKeys), std::end(kReservedKeys), [&](const char* r) { return key == r; }))
      ck.metadata.emplace(key, std::move(kv.second));
  }
  return ck;
}

StateDict generator_state(const Generator& gen) {
  return {{"seed", u64_scalar(gen.seed())}, {"draws", u64_scalar(gen.draws())}};
}

void set_generator_state(Generator& gen, const StateDict& state) {
  for (const auto& [key, t] : state)
    HG_CHECK(key == "seed" || key == "draws", "set_generator_state: unexpected tensor \"", key,
             "\" (a generator state holds \"seed\" and \"draws\")");
  gen.set_state(u64_of(state, "seed"), u64_of(state, "draws"));
}

}  // namespace hg
