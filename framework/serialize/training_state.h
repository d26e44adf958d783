// Exact resume in one call: save_training_state writes the state of every named part of a
// run (model, optimizer, scheduler, scaler, generators, data loader) as one atomic
// checkpoint; load_training_state checks the names and restores all parts or none.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/generator.h"
#include "framework/state_dict.h"

namespace hg {

// Anything whose state round-trips through a StateDict: modules, optimizers, schedulers,
// amp::GradScaler, data::DataLoader (and your own classes with these two members).
template <class T>
concept HasStateDict = requires(T& t, const StateDict& sd) {
  { t.state_dict() } -> std::convertible_to<StateDict>;
  t.load_state_dict(sd);
};

// A reference to one part of a run's state, by type erasure, so this layer needs no
// include of the layers above it. It refers to the object (does not copy it): build it
// in the call's argument list, as in the example below.
class Stateful {
 public:
  template <class T>
    requires HasStateDict<T> && (!std::same_as<std::remove_cvref_t<T>, Stateful>)
  Stateful(T& object)  // NOLINT(google-explicit-constructor): {"model", model} must convert
      : save_([&object] { return StateDict(object.state_dict()); }),
        load_([&object](const StateDict& sd) { object.load_state_dict(sd); }) {}
  // A Generator (default_generator() or your own): its seed and draw count.
  Stateful(Generator& gen);  // NOLINT(google-explicit-constructor)

  StateDict state_dict() const { return save_(); }
  void load_state_dict(const StateDict& sd) const { load_(sd); }

 private:
  std::function<StateDict()> save_;
  std::function<void(const StateDict&)> load_;
};

struct NamedState {
  std::string name;  // the checkpoint section: letters, digits, '_' and '-'
  Stateful state;
};

//   save_training_state(path, step, {{"model", model}, {"optimizer", opt}, {"scheduler", sched},
//                                    {"scaler", scaler}, {"rng", default_generator()}, {"loader", loader}});
//   int64_t step = load_training_state(path, {...the same list...});
//
// Saving writes one checkpoint file atomically (save_checkpoint): a crash mid-save
// leaves the previous file intact. Names must be unique.
void save_training_state(const std::string& path, int64_t step, const std::vector<NamedState>& parts);

// Returns the saved step. Refuses (hg::Error naming them, nothing changed) a file whose
// sections are not exactly the given names: a missing part would silently keep its
// fresh state, an extra one means the list differs from the one that was saved.
// Restores all parts or none: each part's current state is copied first, the parts are
// loaded in order, and if one refuses its state, those already loaded get their copies
// back before the error propagates. That holds when every part's own load_state_dict
// changes nothing on failure and accepts its own state_dict() again, as modules (strict),
// optimizers, schedulers, GradScaler, DataLoader and generators do. It costs one copy of
// every part's state (model weights and optimizer moments included) while loading.
int64_t load_training_state(const std::string& path, const std::vector<NamedState>& parts);

}  // namespace hg
