#pragma once
// The PostgreSQL catalog, private to the catalog module: the class shared by its source files
// (pg_catalog.cpp: files, projects and snapshots; pg_edits.cpp: yanks, claims, deletions,
// damage records and findings; pg_audit.cpp: tokens, upstream blobs and the audit trail;
// pg_schema.cpp: migrations and the openers). The semantics are SqliteCatalog's, statement for
// statement, without SQLite's one writer at a time: a write that changes one project's files
// (an upload, a yank, a claim, a deletion) runs beside the writes of other projects, and waits
// only for those of its own project (an advisory lock per project name, lock_projects_locked),
// so each of its checks (one file per canonical name, claims, reservations, variant
// conflicts) sees every commit before it. The rest (tokens, imports, damage records) runs
// alone, as before (Conn::WriteLock). The generation is the sum of 64 counters that triggers
// move, each project on its own (PostgreSQL migration 5). Reads run in one REPEATABLE READ
// snapshot. Every function blocks on the database; one mutex serializes the connection.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/pg_conn.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/core/version.hpp"

namespace wf::catalog::detail {

/// Applies the PostgreSQL migrations the database lacks, in one transaction under an advisory
/// lock (concurrent openers wait; the second finds nothing to do).
Status pg_migrate(pg::Conn& conn);

/// Connects to `uri` and migrates its schema; the connection serializes writers.
Result<std::unique_ptr<pg::Conn>> open_pg(std::string_view uri);

/// The write locks (Conn::set_write_locks): one advisory lock ("wfwrite" in ASCII), taken
/// exclusively by a write that must run alone, shared by those that lock their projects.
inline constexpr const char* kPgExclusiveWrite = "SELECT pg_advisory_xact_lock(33608185435223141)";
inline constexpr const char* kPgSharedWrite =
    "SELECT pg_advisory_xact_lock_shared(33608185435223141)";

class PgCatalog final : public Catalog {
 public:
  explicit PgCatalog(std::unique_ptr<pg::Conn> conn) : conn_(std::move(conn)) {}

  Result<std::optional<core::FileRecord>> find_file(std::string_view filename) override;
  Result<std::optional<core::FileRecord>> find_same_file(std::string_view filename,
                                                         std::string_view sha256) override;
  Result<Inserted> insert_file(const NewFile& nf, const std::function<Status()>& publish) override;
  Result<std::vector<Result<Inserted>>> insert_files(
      const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
      const std::function<Status()>& before_commit) override;
  Result<std::uint64_t> generation() override;
  Result<std::uint64_t> position() override;
  Result<Contents> load() override;
  Result<Contents> load_projects(std::vector<std::string> projects) override;
  Result<std::vector<std::string>> set_yanked(std::string_view project,
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
  /// Errc::invalid: a PostgreSQL catalog is backed up with pg_dump.
  Status backup_to(const std::filesystem::path& dest) override;
  Result<std::vector<TableRows>> export_rows() override;
  Result<ImportCounts> import_rows(const TableRows& rows) override;

 private:
  static constexpr const char* kTokenColumns =
      "id, hash, scope, project, description, created_at, revoked_at, expires_at, "
      "last_used_at, created_by, publisher_id";
  Result<std::vector<TokenRecord>> tokens_locked();
  Status append_audit_locked(const AuditRecord& entry);
  Status forget_damage_locked(const std::vector<std::string>& sha256s);
  Result<std::optional<core::FileRecord>> find_file_locked(std::string_view filename);
  Result<std::optional<core::FileRecord>> find_canonical_locked(std::string_view filename,
                                                                std::string_view sha256);
  Result<std::optional<DeletedFile>> find_reservation_locked(std::string_view filename);
  Result<Inserted> insert_file_locked(const NewFile& nf, const std::function<Status()>& publish);
  Status check_actor_token_locked(const Actor& by);
  /// Waits for the writers of these projects (canonical names) and keeps new ones waiting
  /// until this transaction ends; in a shared write transaction, before its first check.
  Status lock_projects_locked(std::vector<std::string> projects);
  Result<std::optional<core::FileRecord>> variant_clash_locked(const core::FileRecord& f);
  // The outcome of an insert that stores nothing (the claim refuses the uploader, the name is
  // taken or reserved, the variant contradicts the release), nullopt when the file may be
  // stored; `claim` is the project's, read under the same lock.
  Result<std::optional<Inserted>> refusal_locked(const NewFile& nf,
                                                 const std::optional<core::ProjectClaim>& claim);
  Result<core::FileRecord> delete_file_locked(std::string_view filename);
  Result<std::optional<core::ProjectClaim>> project_claim_locked(std::string_view project);
  static core::ProjectClaim read_claim(const pg::Rows& rows, int row, int col);
  static void add_claim(pg::Params& p, const core::ProjectClaim& claim);
  Status write_claim_locked(std::string_view project, const core::ProjectClaim& claim);
  Result<core::ProjectRecord> set_claim_locked(std::string_view project,
                                               const core::ProjectClaim& claim);
  Result<std::vector<std::string>> set_yanked_locked(std::string_view project,
                                                     const std::optional<core::Version>& version,
                                                     const std::optional<std::string>& filename,
                                                     const std::optional<std::string>& reason,
                                                     const Actor& by);
  Result<std::uint64_t> generation_locked();
  /// Every project, or only those named in `only` (sorted by name either way).
  Result<std::vector<core::ProjectRecord>> projects_locked(
      const std::vector<std::string>* only = nullptr);
  Result<Contents> load_locked(const std::vector<std::string>* only = nullptr);
  Result<std::vector<BlobRef>> referenced_blobs_locked();

  std::mutex mu_;
  std::unique_ptr<pg::Conn> conn_;
};

/// The blobs the rows of `conn`'s catalog reference, as Catalog::referenced_blobs() lists them
/// (in the caller's transaction, if any).
Result<std::vector<BlobRef>> read_referenced_blobs(pg::Conn& conn);

}  // namespace wf::catalog::detail
