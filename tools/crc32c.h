// CRC-32C (Castagnoli), the checksum of TFRecord files (TensorBoard event files), written
// by hand so the event writer needs no library: a byte-wise table of the reflected polynomial.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hg::logging {

// CRC-32C of n bytes; pass a previous result as `crc` to extend it over more bytes.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord's masked form: a CRC of data that itself holds CRCs is rotated and offset.
uint32_t masked_crc32c(const void* data, size_t n);

}  // namespace hg::logging
