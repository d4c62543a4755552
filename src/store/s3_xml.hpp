#pragma once
// The little XML the S3 API answers with (ListObjectsV2, InitiateMultipartUpload, errors),
// read without a parser library: the text of elements found by name, entities decoded.
// Enough for S3's flat, attribute-free answer elements; not a general XML reader.

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wf::store::xml {

/// The raw contents of each `<tag>...</tag>` (and "" for each `<tag/>`) in `doc`, in order,
/// not descending into a match.
[[nodiscard]] std::vector<std::string_view> elements(std::string_view doc, std::string_view tag);

/// The decoded text of the first `<tag>` in `doc`; nullopt when there is none.
[[nodiscard]] std::optional<std::string> text(std::string_view doc, std::string_view tag);

/// Decodes the five predefined entities and numeric character references (as UTF-8);
/// anything else is kept as written.
[[nodiscard]] std::string unescape(std::string_view s);

/// A date S3 answers with as Unix seconds: an HTTP date ("Sat, 28 Nov 2026 13:26:42 GMT", a
/// HEAD's Last-Modified) or ISO 8601 in UTC ("2026-11-28T13:26:42.000Z", a listing's
/// LastModified); 0 when it is neither (callers treat 0 as unknown).
[[nodiscard]] std::time_t parse_time(const std::string& text);

/// Escapes & < > " ' for element text.
[[nodiscard]] std::string escape(std::string_view s);

}  // namespace wf::store::xml
