// BatchNorm's 16-lane row forms: batch_norm_vec.h instantiated on vec::Z16 (AVX-512), for
// channel counts that are multiples of 16. Half the instructions of the 8-lane forms for the
// same bits: the f16/bf16 widening and rounding around a few adds and multiplies is what
// bounds these passes, not memory.
#include "framework/cpu/isa.h"
#include "ops/cpu/batch_norm_rows.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
// GCC 12's AVX-512 intrinsics start from a deliberately uninitialised register
// (`__m512 __Y = __Y;`), which -Wmaybe-uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "ops/cpu/batch_norm_vec.h"
#include "ops/cpu/vec/vec16.h"

namespace hg::cpu::bn {

// Built (and its statics initialised) under this file's target: called only on a CPU that has it.
template <class T>
const VecRows<T>* table16() {
  static const VecRows<T> rows = lanes::table<vec::Z16, T>();
  return &rows;
}

}  // namespace hg::cpu::bn

#pragma GCC pop_options

namespace hg::cpu::bn {
template <class T>
const VecRows<T>* rows16() {
  return static_cast<int>(isa()) >= static_cast<int>(Isa::avx512) ? table16<T>() : nullptr;
}
}  // namespace hg::cpu::bn
#else
namespace hg::cpu::bn {
template <class T>
const VecRows<T>* rows16() {
  return nullptr;
}
}  // namespace hg::cpu::bn
#endif

namespace hg::cpu::bn {
template const VecRows<float>* rows16();
template const VecRows<half>* rows16();
template const VecRows<bfloat16>* rows16();
}  // namespace hg::cpu::bn
