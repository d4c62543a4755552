#pragma once
// The one redaction of secrets in text that is logged, stored or shown: the server's log
// (log::write), job logs (what the runner writes and what the API and the web UI read), job
// reasons. Two kinds of secret are masked:
//   - the userinfo of every URL ("https://USER:TOKEN@host/..."): whatever stands between
//     "SCHEME://" and the '@' of its authority;
//   - every secret registered with add_secret() (passwords of upstreams, tokens of git
//     credential files, ...), wherever it occurs.
// Masking replaces each byte by '*' and keeps the length, so that offsets into a log stay
// valid: a reader that redacts a window of a file returns the same number of bytes it read.
// Thread-safe.

#include <cstddef>
#include <string>
#include <string_view>

namespace wf {

/// Secrets shorter than this are not registered: masking every "abc" in a log would destroy
/// it. (Such a password in a URL's userinfo is still masked there.)
inline constexpr std::size_t kMinSecretLength = 6;

/// Registers `secret` for the rest of the process: redact() masks it from now on. Ignored when
/// shorter than kMinSecretLength or registered already.
void add_secret(std::string_view secret);

/// True when redact() would change `text` (a URL with userinfo, or a registered secret).
[[nodiscard]] bool needs_redaction(std::string_view text);

/// `text` with URL userinfo and registered secrets masked ('*' for each byte).
[[nodiscard]] std::string redact(std::string_view text);

/// The same, in place; true when something was masked.
bool redact_in_place(std::string& text);

/// How much text before and after a window a reader must look at so that a secret or a URL's
/// userinfo that crosses the window's edge is still recognised: the longest registered
/// secret, and at least a URL's scheme and userinfo (512 bytes).
[[nodiscard]] std::size_t redaction_margin();

}  // namespace wf
