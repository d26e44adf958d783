// Names, sizes and promotion of dtypes.
#include "framework/dtype.h"

namespace hg {

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::b8: return "bool";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "f64" || s == "float64" || s == "double") return DType::f64;
  if (s == "f32" || s == "float32" || s == "float") return DType::f32;
  if (s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "i64" || s == "int64") return DType::i64;
  if (s == "bool" || s == "b8") return DType::b8;
  throw Error("unknown dtype '" + s + "'; valid: f64, f32, f16, bf16, i64, bool");
}

size_t dtype_size(DType dt) {
  return visit_dtype(dt, []<typename T>() { return sizeof(T); });
}

bool is_floating(DType dt) { return dt == DType::f64 || dt == DType::f32 || dt == DType::f16 || dt == DType::bf16; }
bool is_reduced(DType dt) { return dt == DType::f16 || dt == DType::bf16; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType d) {
    switch (d) {
      case DType::b8: return 0;
      case DType::i64: return 1;
      case DType::f16:
      case DType::bf16: return 2;
      case DType::f32: return 3;
      case DType::f64: return 4;
    }
    return 0;
  };
  if (rank(a) == 2 && rank(b) == 2) return DType::f32;  // f16 with bf16: neither holds the other
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace hg
