#pragma once
// The SQLite catalog, private to the catalog module: the class and the row mapping shared by
// its source files (sqlite_catalog.cpp: files, projects and snapshots; sqlite_edits.cpp:
// yanks, claims, deletions, damage records and findings recorded after ingest;
// sqlite_audit.cpp: tokens and the audit trail; sqlite_schema.cpp: migrations and backfills). Every
// function blocks on SQLite; one mutex serializes the connection.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/row_mapping.hpp"
#include "catalog/sqlite_db.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/version.hpp"

namespace wf::catalog::detail {

using sqlite::Db;
using sqlite::Stmt;

/// A file row selected with kFileColumns.
core::FileRecord read_file_row(const Stmt& s);

/// Binds the nine hint columns (backend .. label_extra) starting at parameter `first`.
void bind_hints(Stmt& s, int first, const core::VariantHints& h);

/// Applies the migrations after the database's schema version up to `target` (all of them for
/// SIZE_MAX), in one write transaction. Opening a catalog runs all; tests stop at an earlier
/// version to build a database as an older wheelforge left it.
Status migrate_to(Db& db, std::size_t target);

class SqliteCatalog final : public Catalog {
 public:
  explicit SqliteCatalog(Db db) : db_(std::move(db)) {}

  Status init();
  Result<std::optional<core::FileRecord>> find_file(std::string_view filename) override;
  Result<std::optional<core::FileRecord>> find_same_file(std::string_view filename,
                                                         std::string_view sha256) override;
  Result<Inserted> insert_file(const NewFile& nf, const std::function<Status()>& publish) override;
  Result<std::vector<Result<Inserted>>> insert_files(
      const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
      const std::function<Status()>& before_commit) override;
  Result<std::uint64_t> generation() override;
  Result<Contents> load() override;
  Result<Contents> load_projects(std::vector<std::string> projects) override;
  Result<std::vector<std::string>> set_yanked(const std::string_view project,
                                              const std::optional<std::string>& version,
                                              const std::optional<std::string>& filename,
                                              const std::optional<std::string>& reason,
                                              const Actor& by) override;
  Result<core::ProjectRecord> set_claim(std::string_view project, const core::ProjectClaim& claim,
                                        const Actor& by) override;
  Result<core::FileRecord> delete_file(std::string_view filename, const Actor& by) override;
  Result<bool> is_reserved(std::string_view filename) override;
  Result<std::optional<DeletedFile>> find_reservation(std::string_view filename) override;
  Result<std::optional<Inserted>> precheck(const NewFile& file) override;
  Result<std::vector<DeletedFile>> deleted_files(std::string_view project) override;
  Result<TokenRecord> revoke_token(std::int64_t id, const Actor& by) override;
  Result<TokenRecord> insert_token(const TokenRecord& token, const Actor& by) override;
  Result<PublisherRecord> insert_publisher(const PublisherRecord& publisher,
                                           const Actor& by) override;
  Result<PublisherRecord> remove_publisher(std::int64_t id, const Actor& by) override;
  Result<std::vector<PublisherRecord>> publishers() override;
  Result<TokenRecord> mint_token(const MintRequest& req, const Actor& by) override;
  Result<std::vector<TokenRecord>> tokens() override;
  Status record_token_uses(const std::vector<std::pair<std::int64_t, Micros>>& uses) override;
  Status record_upstream_blob(const UpstreamBlob& blob) override;
  Result<std::vector<UpstreamBlob>> upstream_blobs() override;
  Status touch_upstream_blob(std::string_view sha256, Micros at) override;
  Result<bool> forget_upstream_blob(std::string_view sha256) override;
  Status record_audit(const AuditRecord& entry) override;
  Result<std::vector<AuditRecord>> audit(const AuditQuery& query) override;
  Result<core::FileRecord> restore_file(std::string_view filename, std::string_view sha256,
                                        const std::function<Status()>& publish) override;
  Result<bool> mark_damaged(std::string_view sha256, std::string_view detail,
                            const std::function<Result<bool>()>& quarantine) override;
  Status clear_damaged(const std::vector<std::string>& sha256s) override;
  Result<std::vector<DamagedBlob>> damaged_blobs() override;
  Result<std::vector<BlobRef>> referenced_blobs() override;
  Result<std::vector<UninspectedWheel>> uninspected_wheels() override;
  Result<bool> set_provenance(std::string_view filename, std::string_view sha256,
                              std::string_view provenance_sha256, std::uint64_t provenance_size,
                              const Actor& by) override;
  Result<bool> record_findings(std::string_view filename, std::string_view sha256,
                               const core::WheelFindings& findings) override;
  Status backup_to(const std::filesystem::path& dest) override;
  Result<std::vector<TableRows>> export_rows() override;
  Result<ImportCounts> import_rows(const TableRows& rows) override;

 private:
  static constexpr const char* kTokenColumns =
      "id, hash, scope, project, description, created_at, revoked_at, expires_at, "
      "last_used_at, created_by, publisher_id";
  static TokenRecord read_token_row(const Stmt& s);
  Result<std::vector<TokenRecord>> tokens_locked();
  /// Appends an audit entry inside the caller's transaction (`at` 0: now).
  Status append_audit_locked(const AuditRecord& entry);

  Status migrate();
  // Computes the canonical keys of rows stored before keys existed. Rows whose keys collide
  // stay as they are (both files remain served); only new files are held to the rule.
  Status backfill_canonical();
  // Computes the variant hints of rows stored before hints existed (or by an older parser).
  Status backfill_hints();
  static core::VariantHints hints_for_row(const std::string& project, const std::string& version,
                                          const std::vector<std::string>& requires_dist);
  /// Drops the damage records of blobs that were just published (or found intact).
  Status forget_damage_locked(const std::vector<std::string>& sha256s);
  Result<std::optional<core::FileRecord>> find_file_locked(std::string_view filename);
  /// The live file whose name is `filename` after normalization (core::canonical_file_key).
  /// Databases from before the rule may hold several: the one with these bytes, else the one
  /// of this exact name, else the oldest.
  Result<std::optional<core::FileRecord>> find_canonical_locked(std::string_view filename,
                                                                std::string_view sha256);
  /// The deleted file whose name is `filename` after normalization, if any.
  Result<std::optional<DeletedFile>> find_reservation_locked(std::string_view filename);
  Result<Inserted> insert_file_locked(const NewFile& nf, const std::function<Status()>& publish);
  /// Inside a write transaction: ok when `by` acts without a token, or with one that exists, is
  /// not revoked and has not expired now; Errc::unauthorized saying which otherwise.
  Status check_actor_token_locked(const Actor& by);
  Result<std::optional<core::FileRecord>> variant_clash_locked(const core::FileRecord& f);
  // The outcome of an insert that stores nothing (the claim refuses the uploader, the name is
  // taken or reserved, the variant contradicts the release), nullopt when the file may be
  // stored; `claim` is the project's, read under the same lock.
  Result<std::optional<Inserted>> refusal_locked(const NewFile& nf,
                                                 const std::optional<core::ProjectClaim>& claim);
  Result<core::FileRecord> delete_file_locked(std::string_view filename);
  /// A project's claim; nullopt when the project does not exist.
  Result<std::optional<core::ProjectClaim>> project_claim_locked(std::string_view project);
  static core::ProjectClaim read_claim(Stmt& s, int col);
  static void bind_claim(Stmt& s, int col, const core::ProjectClaim& claim);
  Status write_claim_locked(std::string_view project, const core::ProjectClaim& claim);
  Result<core::ProjectRecord> set_claim_locked(std::string_view project,
                                               const core::ProjectClaim& claim);
  Result<std::vector<std::string>> set_yanked_locked(std::string_view project,
                                                     const std::optional<core::Version>& version,
                                                     const std::optional<std::string>& filename,
                                                     const std::optional<std::string>& reason,
                                                     const Actor& by);
  Result<std::uint64_t> generation_locked();
  /// Every project (sorted by name), or only those of `only` (sorted, without repeats).
  Result<std::vector<core::ProjectRecord>> projects_locked(
      const std::vector<std::string>* only = nullptr);
  /// Everything, or with `only` (sorted, without repeats) those projects and their files.
  Result<Contents> load_locked(const std::vector<std::string>* only = nullptr);
  Result<std::vector<BlobRef>> referenced_blobs_locked();
  // Copies every page in one step inside one read transaction: in WAL mode writers in other
  // processes go on, and the copy is the database as of the transaction's first read.
  Status backup_into(const Db& out, const std::filesystem::path& dest);

  std::mutex mu_;
  Db db_;
};

}  // namespace wf::catalog::detail
