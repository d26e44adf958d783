// save_training_state / load_training_state: one checkpoint section per named part; the
// load checks the section names, copies every part's state, then loads with rollback.
#include "framework/serialize/training_state.h"

#include <exception>
#include <set>

#include "framework/autograd.h"
#include "framework/error.h"
#include "framework/serialize/checkpoint.h"

namespace hg {

Stateful::Stateful(Generator& gen)
    : save_([&gen] { return generator_state(gen); }),
      load_([&gen](const StateDict& sd) { set_generator_state(gen, sd); }) {}

namespace {

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "\"" : ", \"") + n + "\"";
  return s;
}

std::set<std::string> unique_names(const std::vector<NamedState>& parts, const char* fn) {
  std::set<std::string> names;
  for (const auto& p : parts) HG_CHECK(names.insert(p.name).second, fn, ": the part \"", p.name, "\" is named twice");
  return names;
}

}  // namespace

void save_training_state(const std::string& path, int64_t step, const std::vector<NamedState>& parts) {
  unique_names(parts, "save_training_state");
  Checkpoint ck;
  ck.step = step;
  for (const auto& p : parts) ck.sections[p.name] = p.state.state_dict();
  save_checkpoint(path, ck);
}

int64_t load_training_state(const std::string& path, const std::vector<NamedState>& parts) {
  const std::set<std::string> wanted = unique_names(parts, "load_training_state");
  const Checkpoint ck = load_checkpoint(path);
  std::set<std::string> missing, extra;
  for (const auto& n : wanted)
    if (!ck.sections.count(n)) missing.insert(n);
  for (const auto& [n, sd] : ck.sections)
    if (!wanted.count(n)) extra.insert(n);
  if (!missing.empty() || !extra.empty()) {
    std::string msg = detail::concat("load_training_state: ", path, " does not hold the parts asked for; nothing was loaded.");
    if (!missing.empty()) msg += " Not in the file: " + join(missing) + ".";
    if (!extra.empty()) msg += " In the file but not asked for: " + join(extra) + ".";
    throw Error(msg + " The file holds " + std::to_string(ck.sections.size()) +
                " sections; pass the same list of names that was saved.");
  }
  // Copies, not aliases: a module's state_dict() shares its parameters' storage, which
  // the load below overwrites.
  std::vector<StateDict> before(parts.size());
  {
    NoGrad ng;
    for (size_t i = 0; i < parts.size(); ++i)
      for (auto& [k, v] : parts[i].state.state_dict()) before[i][k] = v.defined() ? v.clone() : v;
  }
  size_t loaded = 0;
  try {
    for (; loaded < parts.size(); ++loaded) parts[loaded].state.load_state_dict(ck.sections.at(parts[loaded].name));
  } catch (const std::exception& e) {
    std::string rollback = "the parts loaded before it were put back";
    for (size_t j = loaded; j-- > 0;) {
      try {
        parts[j].state.load_state_dict(before[j]);
      } catch (const std::exception& again) {
        rollback = detail::concat("putting back \"", parts[j].name, "\" failed too (", again.what(),
                                  "): the run's state is now mixed, do not continue it");
      }
    }
    throw Error(detail::concat("load_training_state: ", path, ": the part \"", parts[loaded].name,
                               "\" refused its state (", e.what(), "); ", rollback, "."));
  }
  return ck.step;
}

}  // namespace hg
