// Parsing policies and the table of training modes.
#include "amp/policy.h"

#include <cstdlib>
#include <sstream>

#include "framework/error.h"

namespace hg::amp {

Policy Policy::parse(const std::string& spec) {
  Policy p;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    HG_CHECK(eq != std::string::npos, "Policy::parse: '", item, "' in \"", spec,
             "\" is not key=value; valid keys: params, compute, output, batchnorm, fallback");
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "fallback") {
      char* end = nullptr;
      const long long k = std::strtoll(val.c_str(), &end, 10);
      HG_CHECK(!val.empty() && *end == '\0' && k >= 0, "Policy::parse: fallback=", val,
               " is invalid; give the number of overflows after which a module falls back to f32 (0: off)");
      p.fallback_strikes = k;
      continue;
    }
    if (key == "batchnorm") {
      HG_CHECK(val == "f32" || val == "params", "Policy::parse: batchnorm=", val, " is invalid; valid: f32, params");
      p.keep_batchnorm_f32 = val == "f32";
      continue;
    }
    DType dt;
    try {
      dt = parse_dtype(val);
    } catch (const Error&) {
      throw Error("Policy::parse: unknown dtype '" + val + "' for " + key + " in \"" + spec +
                  "\"; valid: f32, f16, bf16 (or float32, float16, bfloat16)");
    }
    HG_CHECK(is_floating(dt), "Policy::parse: ", key, "=", val, " must be a floating dtype");
    if (key == "params") p.params = dt;
    else if (key == "compute") p.compute = dt;
    else if (key == "output") p.output = dt;
    else throw Error("Policy::parse: unknown key '" + key + "' in \"" + spec + "\"; valid: params, compute, output, batchnorm, fallback");
  }
  return p;
}

std::string Policy::str() const {
  return std::string("params=") + dtype_name(params) + ",compute=" + dtype_name(compute) + ",output=" +
         dtype_name(output) + ",batchnorm=" + (keep_batchnorm_f32 ? "f32" : "params") +
         (fallback_strikes > 0 ? ",fallback=" + std::to_string(fallback_strikes) : "");
}

std::vector<std::string> mode_names() { return {"fp32", "amp", "amp-master", "bf16", "fp16"}; }

Recipe recipe(const std::string& mode) {
  Recipe r;
  r.name = mode;
  if (mode == "fp32") {
    r.mode = Mode::fp32;
    r.description = "f32 parameters, activations and gradients";
  } else if (mode == "amp") {
    r.mode = Mode::amp;
    r.policy = Policy::parse("params=f32,compute=f16,output=f32");
    r.autocast = f16;
    r.loss_scaling = true;
    r.description = "O1: f32 parameters, autocast f16, dynamic loss scaling";
  } else if (mode == "amp-master") {
    r.mode = Mode::amp_master;
    r.policy = Policy::parse("params=f16,compute=f16,output=f32,batchnorm=f32");
    r.master_weights = true;
    r.loss_scaling = true;
    r.description = "O2: f16 parameters (BatchNorm f32), f32 master weights in the optimizer, dynamic loss scaling";
  } else if (mode == "bf16") {
    r.mode = Mode::bf16;
    r.policy = Policy::parse("params=f32,compute=bf16,output=f32");
    r.autocast = bf16;
    r.description = "f32 parameters, autocast bf16, no loss scaling (bf16 has f32's range)";
  } else if (mode == "fp16") {
    r.mode = Mode::fp16;
    r.policy = Policy::parse("params=f16,compute=f16,output=f16,batchnorm=params");
    r.optimizer_state_in_param_dtype = true;
    r.description = "O3 (naive): parameters, activations, gradients and Adam's moments in f16, no loss scaling";
  } else {
    throw Error("unknown precision mode '" + mode + "'; valid: fp32, amp, amp-master, bf16, fp16");
  }
  return r;
}

}  // namespace hg::amp
