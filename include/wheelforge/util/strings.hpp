#pragma once
// Small string helpers shared by every module. Pure functions, no allocation beyond the result.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf {

[[nodiscard]] std::string to_lower(std::string_view s);
[[nodiscard]] bool iequals(std::string_view a, std::string_view b);
[[nodiscard]] std::string_view trim(std::string_view s);
[[nodiscard]] std::vector<std::string_view> split(std::string_view s, char sep);
[[nodiscard]] bool starts_with_icase(std::string_view s, std::string_view prefix);

/// Lower-case hex of bytes.
[[nodiscard]] std::string hex_encode(std::string_view bytes);
/// Decodes lower/upper-case hex; nullopt on odd length or a non-hex digit.
[[nodiscard]] std::optional<std::string> hex_decode(std::string_view hex);
/// True when s is exactly 64 lower-case hex digits (a sha256 as used in URLs and the store).
[[nodiscard]] bool is_sha256_hex(std::string_view s);

/// Decodes %XX escapes (and nothing else: '+' stays '+'). nullopt on a malformed escape or %00.
[[nodiscard]] std::optional<std::string> percent_decode(std::string_view s);
/// Escapes everything outside the unreserved characters and '/' (docs/formats.md, "Host values
/// and percent-encoding").
[[nodiscard]] std::string percent_encode_path(std::string_view s);

/// `s` in single quotes for /bin/sh (a quote inside becomes '\\'').
[[nodiscard]] std::string shell_quote(std::string_view s);

/// Escapes &, <, >, " and ' for HTML text and attribute values.
[[nodiscard]] std::string html_escape(std::string_view s);

/// Replaces control characters and non-ASCII bytes by '?', redacts secrets and caps the
/// length (then appends "..."), so that client-supplied strings are safe in log lines and
/// headers. Secrets: API tokens ("wf_" and at least 32 URL-safe base64 characters become
/// "wf_[redacted]") and the value of anything named token ("token=VALUE" or
/// "access_token=VALUE", any case, up to '&', ';', '#' or a space, becomes
/// "token=[redacted]").
[[nodiscard]] std::string sanitize_for_log(std::string_view s, std::size_t max_len = 200);
/// The same, appended to `out` (no string of its own).
void append_for_log(std::string& out, std::string_view s, std::size_t max_len);

/// Checks a free-text value that is stored and shown again, in the audit trail, listings and
/// logs (a yank reason, a token description). Errc::invalid, naming `field`, when the value
/// holds a C0 control character (tab, CR and LF included), DEL or a C1 control (U+0080 to
/// U+009F), or is not UTF-8: a line break in a reason would let it pass for rows of its own in
/// `wheelforge audit`, and an escape sequence would rewrite a terminal. Printable UTF-8 passes.
[[nodiscard]] Status check_free_text(std::string_view field, std::string_view value);

/// `s` made safe for one line of terminal output, for stored values older than
/// check_free_text(): tab, LF and CR become `\t`, `\n`, `\r`; other C0 controls, DEL and
/// bytes that are not UTF-8 become `\xNN`; C1 controls become `\u0085` etc. Everything else,
/// valid UTF-8 included, is kept as it is.
[[nodiscard]] std::string escape_control(std::string_view s);

/// Appends `value` in decimal, left-padded with zeros to at least `min_width` digits.
void append_decimal(std::string& out, std::uint64_t value, std::size_t min_width = 0);

/// Parses a non-negative decimal integer that fits in uint64 (no sign, no spaces).
[[nodiscard]] std::optional<std::uint64_t> parse_u64(std::string_view s);

/// Base64 (standard alphabet, with padding) encode / decode.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view s);
/// URL-safe base64 without padding (as used in wheel RECORD files).
[[nodiscard]] std::string base64url_nopad_encode(std::string_view bytes);

}  // namespace wf
