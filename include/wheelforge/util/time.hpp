#pragma once
// Wall-clock helpers. Timestamps are microseconds since the Unix epoch, UTC.

#include <cstdint>
#include <string>

namespace wf {

using Micros = std::int64_t;

[[nodiscard]] Micros now_micros();
/// "YYYY-MM-DDTHH:MM:SS.ffffffZ" (the simple API's upload-time: docs/packaging.md, "Simple API:
/// JSON").
[[nodiscard]] std::string iso8601_micros(Micros t);
/// HTTP's IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT" (docs/formats.md, "Dates").
[[nodiscard]] std::string http_date(Micros t);

}  // namespace wf
