#pragma once
// How a git source reaches its credentials (README, "Git sources"). Builds run with HOME in the
// job's work directory and nothing of the server's environment, so the server user's
// ~/.gitconfig, credential helpers and ~/.netrc are never seen. A private repository's
// credentials come from the recipe instead:
//   - `source.credentials`: a git credential-store file, one "https://USER:TOKEN@HOST" line
//     per host (what `git credential-store` writes);
//   - or a URL with userinfo (`git = "https://USER:TOKEN@HOST/repo.git"`): the userinfo is
//     taken out of the URL git is given and written into a credential-store file of the job
//     (0600, removed after the fetch), so that neither git's output, the clone's .git/config
//     nor the job's log holds it.
// Either file is read by a helper that only answers git's "get" (git's own `store` helper
// would rewrite the file after a success and erase a line after a refused login), and only
// for the clone and the submodule fetches. Every password found is registered for redaction
// (util/redact.hpp).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/build.hpp"

namespace wf::build {

/// A git URL split into the URL git is given and the credential-store line its userinfo
/// becomes: "https://USER:TOKEN@host/r.git" -> {"https://host/r.git",
/// "https://USER:TOKEN@host"}. Only http(s) URLs whose userinfo has a password are split; any
/// other URL comes back as it is, without a line.
struct SplitGitUrl {
  std::string url;
  std::optional<std::string> credential_line;
};
[[nodiscard]] SplitGitUrl split_git_url(std::string_view url);

/// The secrets a credential-store text names: each line's userinfo, its password as written
/// and percent-decoded.
[[nodiscard]] std::vector<std::string> credential_secrets(std::string_view store_text);

/// Registers the secrets `source` names for redaction: its URL's userinfo and the passwords of
/// its credentials file (when the file can be read). Blocks on the file.
void register_source_secrets(const core::SourceSpec& source);

/// The `-c` options of a git command that fetches from `source` with the credential-store
/// file `store` (empty: none): git's helpers reset and a get-only reader of `store` in their
/// place, and the file transport allowed for the submodules of a repository on this host (git
/// refuses it for submodules by default; the recipe's own repository is trusted).
[[nodiscard]] std::vector<std::string> git_fetch_options(const core::SourceSpec& source,
                                                         std::string_view store);

}  // namespace wf::build
