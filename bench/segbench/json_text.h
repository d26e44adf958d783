// report.json's text: a JSON value (nlohmann-json, which escapes strings, formats numbers
// and writes NaN/inf as null) laid out so that curves and small records stay on one line.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace hg::segbench {

// Arrays holding only scalars go on one line, and so do objects holding only scalars below
// the top object's direct children (those are sections a reader scans key by key); every
// other container has one item per line, indented by two spaces. Non-finite numbers
// become null (JSON has no NaN or inf); invalid UTF-8 in a string becomes U+FFFD.
std::string json_text(const nlohmann::ordered_json& value);

}  // namespace hg::segbench
