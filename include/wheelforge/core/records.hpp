#pragma once
// The catalog's view of the index, shared by the catalog (which produces it), the renderer
// and the HTTP layer (which read it). Plain data.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/core/wheel_variant.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::core {

struct FileRecord {
  std::int64_t id = 0;
  std::string filename;  ///< exactly as uploaded
  std::string project;   ///< normalized project name (docs/packaging.md, "Project names")
  std::string version;   ///< normalized version, with local label
  DistKind kind = DistKind::wheel;
  std::string sha256;  ///< lower-case hex of the file
  std::uint64_t size = 0;
  Micros upload_time = 0;
  std::optional<std::string> requires_python;
  std::string metadata_sha256;  ///< lower-case hex of the exact METADATA bytes
  std::uint64_t metadata_size = 0;
  /// nullopt when not yanked; a (possibly empty) reason when yanked (docs/packaging.md,
  /// "Yanking").
  std::optional<std::string> yanked;
  WheelTags tags;  ///< wheels only
  /// What the local version label and the requirements say about torch/CUDA/ABI.
  VariantHints hints;
  /// What the wheel's ELF binaries say (binding.hpp), read at ingest; nullopt for sdists and
  /// for wheels stored before wheels were inspected.
  std::optional<WheelFindings> binaries;
  /// A PEP 825 variant wheel's label and variant.json (docs/variants.md); nullopt for every
  /// other file. tags.variant_label equals its label.
  std::optional<WheelVariant> variant;
  /// Its file or METADATA blob was found damaged (corrupt or missing) by `fsck --repair`:
  /// not listed anywhere, its URLs answer 503 until the same bytes are ingested again.
  bool damaged = false;
  /// Who uploaded it: "token:<id>", "cli" (`wheelforge ingest`), "build" (the runner); empty
  /// for files stored before this was kept. Kept for the file's lifetime.
  std::string uploaded_by;
  std::int64_t uploaded_by_token = 0;  ///< the token's id when a token uploaded it
  /// The sha256 (lower-case hex) and size of its PEP 740 provenance object, stored as a blob
  /// of its own (docs/publishing.md, "Attestations"): made from the attestations verified when
  /// it was uploaded. Empty (size 0) when it came without attestations.
  std::string provenance_sha256;
  std::uint64_t provenance_size = 0;
  /// Empty for a file of this index; else the upstream index it is listed from
  /// (docs/upstreams.md): its URL is /upstream/<upstream>/<sha256>/<filename>, and upload_time and
  /// size are 0 when the upstream did not give them.
  std::string upstream;
};

/// Who may upload new files to a project besides admins. A project is claimed by the token
/// that uploads its first file, or by an admin (see claims.hpp).
enum class ClaimKind {
  unclaimed,  ///< created before claims existed: the next token that uploads claims it
  admin,      ///< only admin tokens (and tokens limited to the project) upload
  token,      ///< one upload token (and admins, and tokens limited to the project)
};

struct ProjectClaim {
  ClaimKind kind = ClaimKind::unclaimed;
  std::int64_t token_id = 0;  ///< for ClaimKind::token
  friend bool operator==(const ProjectClaim&, const ProjectClaim&) = default;
};

struct ProjectRecord {
  std::string name;          ///< normalized (docs/packaging.md, "Project names")
  std::string display_name;  ///< as first uploaded (METADATA Name)
  Micros last_upload = 0;
  ProjectClaim claim;
};

}  // namespace wf::core
