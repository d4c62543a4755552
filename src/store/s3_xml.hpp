#pragma once
// The little XML the S3 API answers with (ListObjectsV2, InitiateMultipartUpload, errors),
// read without a parser library: the text of elements found by name, entities decoded.
// Enough for S3's flat, attribute-free answer elements; not a general XML reader.

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

/// Escapes & < > " ' for element text.
[[nodiscard]] std::string escape(std::string_view s);

}  // namespace wf::store::xml
