#pragma once
// The one ingest path for every source (HTTP PUT, twine uploads, `wheelforge ingest`, the
// build runner): validate -> store -> catalog. All methods block (archive reads, fsync,
// SQLite): call them from worker threads. Thread-safe.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/archive/reader.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/records.hpp"
#include "wheelforge/crypto/certificate.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::ingest {

struct Limits {
  /// Largest distribution file accepted (bytes). Torch wheels are several GB.
  std::uint64_t max_file_size = 8ULL * 1024 * 1024 * 1024;
  /// Largest METADATA / PKG-INFO / WHEEL accepted, inflated.
  std::uint64_t max_metadata_size = 4ULL * 1024 * 1024;
  /// The archive policy (see archive::Limits): most members, largest total of the declared
  /// member sizes, largest ratio of that total to the file's size.
  std::uint64_t max_archive_members = archive::Limits{}.max_members;
  std::uint64_t max_inflated_size = archive::Limits{}.max_inflated_bytes;
  std::uint64_t max_compression_ratio = archive::Limits{}.max_compression_ratio;
};

enum class Outcome {
  stored,     ///< new file published
  identical,  ///< same name and bytes already present: nothing changed
  restored,   ///< same name and bytes as a damaged file (see fsck): its blobs published again
};

/// The PEP 740 attestations that come with an upload (docs/publishing.md, "Attestations").
struct Attestations {
  std::string json;  ///< the `attestations` form field: a JSON array of attestation objects
  /// The trust roots configured ([attestations] trust_roots); null: none, and attestations are
  /// refused.
  const crypto::TrustStore* roots = nullptr;
  /// The trusted publisher whose minted token uploads the file, and its issuer's URL: the
  /// attestations' certificate must be that publisher's. nullopt for any other token.
  std::optional<catalog::PublisherRecord> publisher;
  std::string publisher_issuer_url;
  /// Set instead of `json` for the files this server made itself (the build runner's wheels):
  /// returns the file's provenance object, signed by the server, from its name and sha256
  /// (auth::BuildSigner::provenance). Nothing is verified against `roots`.
  std::function<Result<std::string>(std::string_view filename, std::string_view sha256)> sign;
};

struct Ingested {
  Outcome outcome = Outcome::stored;
  core::FileRecord file;
  std::string display_name;
};

class Ingestor {
 public:
  Ingestor(store::BlobStore& store, catalog::Catalog& catalog, Limits limits)
      : store_(store), catalog_(catalog), limits_(limits) {
    set_limits(limits);
  }

  /// The limits in force (a copy: they can change at runtime).
  [[nodiscard]] Limits limits() const {
    Limits l = limits_;
    l.max_file_size = max_file_size_.load();
    l.max_archive_members = max_archive_members_.load();
    l.max_inflated_size = max_inflated_size_.load();
    l.max_compression_ratio = max_compression_ratio_.load();
    return l;
  }
  /// Changes the file size limit and the archive policy for files checked from now on
  /// (configuration reload); max_metadata_size stays.
  void set_limits(const Limits& limits) {
    max_file_size_.store(limits.max_file_size);
    max_archive_members_.store(limits.max_archive_members);
    max_inflated_size_.store(limits.max_inflated_size);
    max_compression_ratio_.store(limits.max_compression_ratio);
  }
  [[nodiscard]] store::BlobStore& store() { return store_; }

  /// Validates a finished temp file uploaded under `filename` and publishes it. File names are
  /// compared after normalization (core::canonical_file_key): identical bytes under another
  /// spelling of a stored name are `identical` (the stored file is returned). The same bytes
  /// as a damaged file (core::FileRecord::damaged), under any spelling, heal it:
  /// Outcome::restored.
  /// Errors: invalid (bad name, archive or metadata: every problem listed), conflict (the
  /// name, or another spelling of it, exists with other bytes or belonged to a deleted file;
  /// a release already has an sdist; message starts "File already exists"), too_large,
  /// forbidden (the project is claimed by another uploader; see core/claims.hpp), and the
  /// server's own: storage_full, unavailable (the data directory is not writable), io (a
  /// storage fault such as EIO). On any error nothing is left behind: the temp file is
  /// removed, no blob is published, no row is written. `uploader` defaults to an admin (local
  /// commands, the build runner); `actor` (default: a local command) is recorded as the
  /// file's uploader and in the audit trail.
  /// With `attestations`, they are verified against the file before anything is stored
  /// (Errc::invalid naming the attestation and what is wrong) and the file's provenance object
  /// is stored with it (core::FileRecord::provenance_sha256). A file stored already is answered
  /// as it is (identical), its provenance unchanged.
  [[nodiscard]] Result<Ingested> ingest(store::TempFile temp, std::string_view filename,
                                        const core::Uploader& uploader = {},
                                        const catalog::Actor& actor = {},
                                        const Attestations* attestations = nullptr);

  /// Adds attestations to the stored file `filename` (exactly as stored) that has none: the
  /// attestations PUT after their file (docs/publishing.md, "Attestations"). They are verified
  /// as ingest() verifies them, against the file's sha256; its provenance blob is stored, then
  /// recorded with an audit entry by `actor` (Catalog::set_provenance). Returns the file as
  /// recorded and whether it changed (false: it had this very provenance already). Errors:
  /// not_found (no such file), unavailable (the file is damaged), invalid (the attestations do
  /// not verify: nothing is stored), conflict (the file has other provenance), and the
  /// store's and catalog's own.
  [[nodiscard]] Result<std::pair<core::FileRecord, bool>> add_attestations(
      std::string_view filename, const Attestations& attestations, const catalog::Actor& actor);

  /// Runs the file name, archive and metadata checks of ingest() without storing anything:
  /// the problems a file would be rejected for, all together (Errc::invalid), or ok.
  [[nodiscard]] Status check(const std::filesystem::path& file, std::string_view filename) const;

  /// Copies a local file into a temp file (hashing it on the way) and ingests it under its
  /// own base name, with `attestations` as ingest() takes them.
  [[nodiscard]] Result<Ingested> ingest_path(const std::filesystem::path& path,
                                             const catalog::Actor& actor = {},
                                             const Attestations* attestations = nullptr);

  /// ingest_path() for many files, as one batch: each file is checked and answered on its
  /// own (one result per path, in order, as ingest_path() calls one after another would give
  /// them), while the accepted ones are made durable with two filesystem flushes and recorded
  /// in one catalog transaction, instead of four syncs each. For wheelhouse imports; keep a
  /// batch to some hundred files, whose temp files stay open until it is recorded.
  [[nodiscard]] std::vector<Result<Ingested>> ingest_paths(
      const std::vector<std::filesystem::path>& paths);

 private:
  [[nodiscard]] Result<store::TempFile> copy_to_temp(const std::filesystem::path& path) const;

  store::BlobStore& store_;
  catalog::Catalog& catalog_;
  Limits limits_;
  std::atomic<std::uint64_t> max_file_size_{0};
  std::atomic<std::uint64_t> max_archive_members_{0};
  std::atomic<std::uint64_t> max_inflated_size_{0};
  std::atomic<std::uint64_t> max_compression_ratio_{0};
};

/// The 409 message for `filename` when `existing` is stored under it, or under another
/// spelling of it (catalog::Catalog::find_same_file), with other content. Starts with
/// "File already exists" (what `twine upload --skip-existing` looks for: docs/clients.md,
/// "twine, poetry, pdm").
[[nodiscard]] std::string already_exists_message(std::string_view filename,
                                                 const core::FileRecord& existing);
/// The 409 message for `filename` when it, or another spelling of it, was the name of the
/// deleted file `deleted`.
[[nodiscard]] std::string reserved_message(std::string_view filename,
                                           const catalog::DeletedFile& deleted);

}  // namespace wf::ingest
