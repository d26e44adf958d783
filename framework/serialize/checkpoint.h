// Training checkpoints: everything a run needs to resume (model, optimizer, scheduler,
// loss scaler, random generators) in one safetensors file, written atomically so a
// crash mid-save leaves the previous checkpoint usable.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "framework/generator.h"
#include "framework/state_dict.h"

namespace hg {

// Tensors are stored as "<section>/<name>" ("model/conv1.weight", "optimizer/exp_avg.3").
// Section names are non-empty and use letters, digits, '_' and '-'; a section saved
// empty comes back empty. The keys "format", "version", "step" and "sections" of the
// file's metadata are the checkpoint's own; user metadata may not use them.
struct Checkpoint {
  std::map<std::string, StateDict> sections;
  std::map<std::string, std::string> metadata;
  int64_t step = 0;  // non-negative
};

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// Throws hg::Error if the file is not a halfgrad checkpoint or of a version this build
// does not read, or is inconsistent: a step that is not a non-negative integer, a section
// listed twice, a tensor "<section>/" with no name, or one in a section the metadata's
// "sections" does not list (a file without that key takes its sections from the names).
Checkpoint load_checkpoint(const std::string& path);

// A generator's state as 0-d i64 tensors "seed" and "draws" (the u64 bits, unchanged).
StateDict generator_state(const Generator& gen);
void set_generator_state(Generator& gen, const StateDict& state);

}  // namespace hg
