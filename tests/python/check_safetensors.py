"""Cross-checks halfgrad's safetensors files against the reference Python package.

Usage: check_safetensors.py DIR
Reads DIR/from_cpp.safetensors (written by tests/framework/test_safetensors.cpp) and
checks every name, dtype, shape and value against values recomputed here; then writes
DIR/from_python.safetensors for the C++ test to read. Exits non-zero on any mismatch.

Usage: check_safetensors.py --verdicts DIR
Prints "<file> read" or "<file> refused: <why>" for each DIR/*.safetensors, as the
reference parser (safetensors.deserialize, which safe_open's header checks match) sees
it; tests/framework/test_safetensors_reference.cpp compares these with halfgrad's.
"""
import os
import sys

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import save_file


def expected_from_cpp():
    k6 = np.arange(6, dtype=np.float64)
    bf16_values = np.array([0.5, 1.5, 2.5, 3.5], dtype=np.float32).reshape(2, 2)
    return {
        "f64": ("F64", (k6 * 0.25).reshape(2, 3)),
        "f32": ("F32", (k6 * 0.25 - 1).astype(np.float32).reshape(3, 2)),
        "f16": ("F16", (k6 * 0.5).astype(np.float16)),
        # These values are exact in bf16, so its bits are the top half of the f32 bits.
        "bf16": ("BF16", (bf16_values.view(np.uint32) >> 16).astype(np.uint16)),
        "i64": ("I64", np.arange(-2, 3, dtype=np.int64) * 10**12),
        "bool": ("BOOL", (np.arange(6) % 3 == 0).reshape(2, 3)),
        "scalar": ("F32", np.array(3.25, dtype=np.float32)),
        "empty": ("F32", np.zeros((0, 4), dtype=np.float32)),
    }


def raw_bf16_bits(path, name):
    # numpy has no bfloat16, and safetensors.numpy raises on BF16 ("data type 'bfloat16'
    # not understood"), so take the raw little-endian bytes from the reference parser.
    with open(path, "rb") as f:
        for tensor_name, info in safetensors.deserialize(f.read()):
            if tensor_name == name:
                return np.frombuffer(bytes(info["data"]), dtype="<u2").reshape(info["shape"])
    raise KeyError(name)


def check_from_cpp(path):
    expected = expected_from_cpp()
    errors = []
    with safe_open(path, framework="np") as f:
        metadata = f.metadata()
        if metadata != {"producer": "halfgrad", "note": "\u00e9"}:
            errors.append(f"metadata: {metadata}")
        if sorted(f.keys()) != sorted(expected):
            errors.append(f"names: {sorted(f.keys())} != {sorted(expected)}")
        for name, (dtype, want) in expected.items():
            if name not in f.keys():
                continue
            got_dtype = f.get_slice(name).get_dtype()
            if got_dtype != dtype:
                errors.append(f"{name}: dtype {got_dtype} != {dtype}")
                continue
            got = raw_bf16_bits(path, name) if dtype == "BF16" else f.get_tensor(name)
            if got.shape != want.shape:
                errors.append(f"{name}: shape {got.shape} != {want.shape}")
            elif got.dtype != want.dtype or not np.array_equal(got, want):
                errors.append(f"{name}: {got!r} != {want!r}")
    return errors


def write_for_cpp(path):
    save_file(
        {
            "f64": np.arange(6, dtype=np.float64).reshape(2, 3) / 8,
            "f32": np.arange(4, dtype=np.float32) * np.float32(-0.75),
            "f16": np.arange(5, dtype=np.float16) * np.float16(0.25),
            "i64": np.arange(3, dtype=np.int64) * 2**40,
            "bool": np.arange(4) % 2 == 1,
            "scalar": np.array(7.0, dtype=np.float32),
            "empty": np.zeros((0, 2), dtype=np.float64),
        },
        path,
        metadata={"writer": "python"},
    )


def print_verdicts(directory):
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        try:
            safetensors.deserialize(data)
            print(f"{name} read")
        except Exception as e:  # the package raises SafetensorError, a plain Exception
            print(f"{name} refused: {e}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--verdicts":
        print_verdicts(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    errors = check_from_cpp(f"{directory}/from_cpp.safetensors")
    for e in errors:
        print("mismatch:", e)
    write_for_cpp(f"{directory}/from_python.safetensors")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
