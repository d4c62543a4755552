#pragma once
// What the JSON renderers share (internal to the render module): the two document types and
// how an answer is written.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "wheelforge/util/time.hpp"

namespace wf::render::detail {

using Json = nlohmann::json;
/// Small answers keep their fields in the order written.
using OrderedJson = nlohmann::ordered_json;

/// An answer's text: compact, invalid UTF-8 replaced, one trailing newline.
template <class JsonT>
[[nodiscard]] std::string dump(const JsonT& j) {
  return j.dump(-1, ' ', false, JsonT::error_handler_t::replace) + "\n";
}

/// An ISO 8601 time, or null when there is none.
template <class JsonT>
[[nodiscard]] JsonT time_or_null(const std::optional<Micros>& t) {
  return t ? JsonT(iso8601_micros(*t)) : JsonT(nullptr);
}

}  // namespace wf::render::detail
