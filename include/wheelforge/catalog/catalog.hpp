#pragma once
// The catalog: which projects, files and tokens exist. SQLite (WAL mode, migrations applied
// at open) is the embedded implementation; the interface exists so that others can follow.
// Every method blocks: call from worker threads. Implementations are thread-safe.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/claims.hpp"
#include "wheelforge/core/records.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::catalog {

enum class Scope { read, upload, admin };
[[nodiscard]] std::string_view scope_name(Scope scope);
[[nodiscard]] std::optional<Scope> parse_scope(std::string_view name);

struct TokenRecord {
  std::int64_t id = 0;
  std::string hash;  ///< sha256 hex of the token; the token itself is never stored
  Scope scope = Scope::read;
  std::optional<std::string> project;  ///< normalized project the token is limited to
  std::string description;
  Micros created_at = 0;
  bool revoked = false;
  std::optional<Micros> expires_at;    ///< the token stops working at this time; none: never
  std::optional<Micros> last_used_at;  ///< recorded at most once a minute (record_token_uses)
  std::string created_by;              ///< Actor::label() of its creator; "" before it was kept
  /// The trusted publisher it was minted for (Catalog::mint_token); 0 for any other token.
  std::int64_t publisher_id = 0;

  /// True when the token has an expiry and `now` is at or past it.
  [[nodiscard]] bool expired(Micros now) const { return expires_at && now >= *expires_at; }
};

/// A trusted publisher: a CI identity (an OIDC issuer and the claims its tokens must carry)
/// allowed to exchange its OIDC token for a short-lived upload token of one project
/// (docs/publishing.md, "Trusted publishing").
struct PublisherRecord {
  std::int64_t id = 0;
  std::string project;  ///< normalized
  std::string issuer;   ///< the name of a configured [[oidc_issuer]]
  /// Claim name and the value a token must carry for it, all of them; sorted by name.
  std::vector<std::pair<std::string, std::string>> claims;
  std::string description;
  Micros created_at = 0;
  std::string created_by;  ///< Actor::label() of the admin who added it
};

/// The claims of a publisher in their stored form: "name=value" lines, sorted by name.
[[nodiscard]] std::string encode_claims(const std::vector<std::pair<std::string, std::string>>& c);
/// The stored form back (lines without '=' are skipped).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> decode_claims(std::string_view text);

/// A token minted for a trusted publisher (Catalog::mint_token): the token, the OIDC token's id
/// that it used up, and until when that id must be remembered.
struct MintRequest {
  TokenRecord token;
  std::string jti_key;   ///< the issuer and the OIDC token's `jti` (one key per token)
  Micros jti_until = 0;  ///< the OIDC token's expiry: an id is forgotten after it
  std::int64_t publisher_id = 0;
  std::string detail;  ///< the audit entry's detail (the publisher, the claims that matched)
};

/// Who changes the catalog, as the audit trail records it.
struct Actor {
  std::int64_t token_id = 0;  ///< the token that authenticated an HTTP request; 0: none
  std::string token_description;
  std::string origin = "cli";  ///< without a token: "cli" (a local command), "build" (the runner)
  std::string address;  ///< the client's address (HTTP), "job N" (the runner); empty for commands

  /// "token:<id>", or the origin.
  [[nodiscard]] std::string label() const;
  /// The actor of a request authenticated with `token` from `address`.
  [[nodiscard]] static Actor of_token(const TokenRecord& token, std::string address);
};

/// One entry of the audit trail: an upload, yank, unyank, deletion, claim or release, token
/// creation or revocation, or build request.
struct AuditRecord {
  std::int64_t id = 0;
  Micros at = 0;
  std::string action;  ///< upload, attestations, yank, unyank, delete, claim, release,
                       ///< token-create, token-revoke, build
  Actor actor;
  std::string project;  ///< normalized; empty when the action has none (tokens)
  std::string target;   ///< the file, "token #ID" or "build #ID" acted on
  std::string detail;   ///< what else there is to say: a yank's reason, a token's scope, ...
};

/// The conflict Catalog::set_provenance answers for a file that has other provenance.
[[nodiscard]] inline std::string provenance_exists_message(std::string_view filename) {
  return std::string(filename) +
         " has provenance already: attestations are added to a file once, and a file's "
         "provenance does not change";
}

/// Which audit entries to read: newest first.
struct AuditQuery {
  std::optional<std::string> project;  ///< normalized
  Micros since = 0;                    ///< entries at or after this time
  std::size_t limit = 1000;
};

/// A file about to be recorded. `file.id` is ignored.
struct NewFile {
  core::FileRecord file;
  std::string display_name;  ///< project name as written in METADATA
  std::vector<std::string> requires_dist;
  /// Who uploads it: decides whether the project may receive it (core::decide_upload).
  core::Uploader uploader;
  /// Who uploads it, for the audit trail and the file's `uploaded_by`.
  Actor actor;
};

/// Names are compared after normalization (core::canonical_file_key): "the same file name"
/// below includes every spelling of it, and an sdist of a release that has one.
enum class InsertOutcome {
  inserted,   ///< a new row
  identical,  ///< a row with the same file name and sha256 existed already
  conflict,   ///< a row with the same file name and another sha256 exists
  forbidden,  ///< the project is claimed by another uploader; nothing was written
  reserved,   ///< the same file name belonged to a deleted file; nothing was written
  /// a variant wheel whose variant.json contradicts one of another file of the same release
  /// (core::variant_conflict; the row returned is that file); nothing was written
  variant_conflict,
};

/// A deleted file, whose name stays reserved.
struct DeletedFile {
  std::string filename;
  std::string project;
  std::string sha256;
};

/// Everything the server needs to answer reads, loaded in one consistent transaction.
struct Contents {
  std::uint64_t generation = 0;
  std::vector<core::ProjectRecord> projects;  ///< sorted by name
  std::vector<core::FileRecord> files;        ///< sorted by project, then file name
  std::vector<TokenRecord> tokens;
};

/// What a blob holds for the file row that references it.
enum class BlobRole { file, metadata, provenance };

/// A reference from a file row to a blob in the store.
struct BlobRef {
  std::string sha256;
  BlobRole role = BlobRole::file;
  std::string filename;    ///< the file row's name
  std::uint64_t size = 0;  ///< the size the row records for this blob
};

/// A blob fetched from an upstream index and kept in the store (docs/upstreams.md): the
/// file (or its .metadata, named so) as the upstream's page listed it.
struct UpstreamBlob {
  std::string sha256;
  std::string upstream;
  std::string filename;
  std::uint64_t size = 0;
  Micros stored_at = 0;
  Micros last_used_at = 0;  ///< when it was last served (recorded at most once a minute)
};

/// A blob that `fsck --repair` found damaged (corrupt: moved to quarantine, or missing).
struct DamagedBlob {
  std::string sha256;
  std::string detail;  ///< what was wrong, e.g. "content has sha256 ..."
  Micros found_at = 0;
};

/// A stored wheel whose binaries have no findings: stored before ingest read them.
struct UninspectedWheel {
  core::FileRecord file;
  std::vector<std::string> requires_dist;  ///< its METADATA's Requires-Dist, as stored
};

/// Every row of one catalog table in the form both backends read and write (export_rows(),
/// import_rows(): `wheelforge migrate`): each value as text (integers in decimal), nullopt for
/// NULL, in the order of `columns`.
struct TableRows {
  std::string table;
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;

  /// The position of `column` in `columns`; nullopt when the table has none.
  [[nodiscard]] std::optional<std::size_t> column(std::string_view name) const;
};

/// What import_rows() did with one table's rows.
struct ImportCounts {
  std::size_t inserted = 0;  ///< rows the catalog lacked, written
  std::size_t skipped = 0;   ///< rows present already with the same values
};

/// The methods that change files, claims and tokens take the Actor that asks, and append the
/// audit entries of what they changed in the same write transaction (one per file yanked,
/// unyanked, deleted or inserted; one per claim, release, token created or revoked).
class Catalog {
 public:
  /// What insert_file() did, and the row stored under the name (for `reserved`: the deleted
  /// file's name, project and sha256).
  using Inserted = std::pair<InsertOutcome, core::FileRecord>;

  virtual ~Catalog() = default;

  /// The file with this exact name, if recorded.
  [[nodiscard]] virtual Result<std::optional<core::FileRecord>> find_file(
      std::string_view filename) = 0;

  /// The file recorded under this name or another spelling of it (core::canonical_file_key;
  /// for an sdist: the sdist of the same release), if any. Databases written before the rule
  /// may hold several (all are kept and served): the one with `sha256` is returned first,
  /// then the one of this exact name.
  [[nodiscard]] virtual Result<std::optional<core::FileRecord>> find_same_file(
      std::string_view filename, std::string_view sha256) = 0;

  /// Records a file (and its project, created on first upload) in one write transaction.
  /// Returns the outcome and the stored row (the existing one for identical/conflict, which
  /// may be spelled differently: see find_same_file).
  /// `publish` runs inside the transaction, after the name was found free and before the row
  /// is written: the caller publishes the file's blobs there, so that concurrent uploads of one
  /// name (from any process) never publish a blob that no row will reference. A failing
  /// `publish` aborts the insert with its error. Blobs published anew are intact: damage
  /// records of the file's two blobs are dropped. When `file.actor` names a token, that token
  /// is checked first, inside the transaction: Errc::unauthorized, and nothing published or
  /// recorded, when it was revoked (or expired, or is gone) since it authorized the upload.
  [[nodiscard]] virtual Result<Inserted> insert_file(
      const NewFile& file, const std::function<Status()>& publish = {}) = 0;

  /// What insert_file() would answer now, asked as a read (without the write lock) by callers
  /// that do slow work before insert_file() (an object store's upload): Errc::unauthorized
  /// when `file.actor`'s token was revoked, expired or is gone (insert_file()'s message); the
  /// outcome when it would not store the file (forbidden, identical, conflict, reserved,
  /// variant_conflict, with insert_file()'s record); nullopt when it would store it.
  /// insert_file() decides again inside its transaction.
  [[nodiscard]] virtual Result<std::optional<Inserted>> precheck(const NewFile& file) = 0;

  /// insert_file() for many files in one write transaction. One result per file, in order,
  /// as insert_file() calls one after another would give them (a file sees the ones before
  /// it). `publish(i)` plays insert_file()'s `publish` for files[i]; when it fails, that file
  /// alone is rejected with its error. `before_commit` runs once, after the last file and
  /// before COMMIT, when a row was written: the caller makes the published blobs durable
  /// there. Its failure, or any database error, rolls every row back and is returned.
  [[nodiscard]] virtual Result<std::vector<Result<Inserted>>> insert_files(
      const std::vector<NewFile>& files, const std::function<Status(std::size_t)>& publish,
      const std::function<Status()>& before_commit) = 0;

  /// A counter that changes whenever any process commits a change to files, projects or
  /// tokens. Cheap; used to notice changes made by other processes.
  [[nodiscard]] virtual Result<std::uint64_t> generation() = 0;

  /// A catalog position at or past every change committed before this call (change_feed.hpp):
  /// a replica that has applied it shows those changes. The generation where there is no feed
  /// (SQLite).
  [[nodiscard]] virtual Result<std::uint64_t> position() { return generation(); }

  /// Loads projects, files and tokens.
  [[nodiscard]] virtual Result<Contents> load() = 0;

  /// Sets who may upload to an existing project (ClaimKind::unclaimed releases it: the next
  /// token that uploads claims it). A token claim must name a token that exists and is not
  /// revoked. Errc::not_found for an unknown project or token. Returns the updated project.
  [[nodiscard]] virtual Result<core::ProjectRecord> set_claim(std::string_view project,
                                                              const core::ProjectClaim& claim,
                                                              const Actor& by) = 0;

  /// Like load(), read in one transaction, but only these projects (those that exist) and
  /// their files; tokens and the generation in full.
  [[nodiscard]] virtual Result<Contents> load_projects(std::vector<std::string> projects) = 0;
  /// load_projects() of one project.
  [[nodiscard]] Result<Contents> load_project(std::string_view project) {
    return load_projects({std::string(project)});
  }

  /// Records a new token; its `created_by` is `by`'s label.
  [[nodiscard]] virtual Result<TokenRecord> insert_token(const TokenRecord& token,
                                                         const Actor& by) = 0;

  /// Revokes a token (kept, marked revoked, so listings show it). Errc::not_found if absent.
  [[nodiscard]] virtual Result<TokenRecord> revoke_token(std::int64_t id, const Actor& by) = 0;

  /// Every token (revoked ones too), with its last use, by id.
  [[nodiscard]] virtual Result<std::vector<TokenRecord>> tokens() = 0;

  /// Adds a trusted publisher (audit action "publisher-add"); its `created_by` is `by`'s label.
  [[nodiscard]] virtual Result<PublisherRecord> insert_publisher(const PublisherRecord& publisher,
                                                                 const Actor& by) = 0;
  /// Removes a trusted publisher (audit action "publisher-remove"). Errc::not_found if absent.
  [[nodiscard]] virtual Result<PublisherRecord> remove_publisher(std::int64_t id,
                                                                 const Actor& by) = 0;
  /// Every trusted publisher, by id.
  [[nodiscard]] virtual Result<std::vector<PublisherRecord>> publishers() = 0;
  /// In one write transaction: forgets OIDC token ids whose tokens expired, records
  /// `req.jti_key` (Errc::conflict when it is already recorded: the OIDC token was used
  /// before, here or by another server on the same catalog), inserts `req.token` and appends
  /// its "token-create" audit entry with `req.detail`. Returns the stored token.
  [[nodiscard]] virtual Result<TokenRecord> mint_token(const MintRequest& req, const Actor& by) = 0;

  /// Records when tokens were last used (id, time; a time older than the recorded one is
  /// ignored). Does not move the generation: pages do not depend on it.
  [[nodiscard]] virtual Status record_token_uses(
      const std::vector<std::pair<std::int64_t, Micros>>& uses) = 0;

  /// Records a blob stored from an upstream (the same sha256 again: nothing changes), so that
  /// referenced_blobs() lists it. Does not move the generation: pages do not depend on it.
  [[nodiscard]] virtual Status record_upstream_blob(const UpstreamBlob& blob) = 0;
  /// Every blob stored from an upstream, by sha256.
  [[nodiscard]] virtual Result<std::vector<UpstreamBlob>> upstream_blobs() = 0;
  /// Records that the upstream blob `sha256` was served at `at` (no row: nothing happens).
  [[nodiscard]] virtual Status touch_upstream_blob(std::string_view sha256, Micros at) = 0;
  /// Removes the row of the upstream blob `sha256` (evicted from the cache). True when a file
  /// of this index still references the same digest: its blob must stay.
  [[nodiscard]] virtual Result<bool> forget_upstream_blob(std::string_view sha256) = 0;

  /// Appends an entry to the audit trail (actions the catalog does not record itself: build
  /// requests). Its `at` is set when it is 0.
  [[nodiscard]] virtual Status record_audit(const AuditRecord& entry) = 0;

  /// The audit trail, newest first.
  [[nodiscard]] virtual Result<std::vector<AuditRecord>> audit(const AuditQuery& query) = 0;

  /// Marks files yanked (reason set, possibly empty) or not yanked (nullopt): docs/packaging.md,
  /// "Yanking". `version` selects every file of that public version (all local variants) and
  /// is compared after normalization; `filename` selects one file. Returns the files changed or
  /// already in that state; Errc::not_found when nothing matches.
  [[nodiscard]] virtual Result<std::vector<std::string>> set_yanked(
      std::string_view project, const std::optional<std::string>& version,
      const std::optional<std::string>& filename, const std::optional<std::string>& reason,
      const Actor& by) = 0;

  /// Removes the file of this exact name from the catalog and reserves its name forever, in
  /// every spelling (a later upload of the same name is InsertOutcome::reserved). The blob
  /// stays until garbage collection. Errc::not_found if absent.
  [[nodiscard]] virtual Result<core::FileRecord> delete_file(std::string_view filename,
                                                             const Actor& by) = 0;

  /// True when the name, or another spelling of it, belonged to a deleted file.
  [[nodiscard]] virtual Result<bool> is_reserved(std::string_view filename) = 0;

  /// The deleted file whose name is this name or another spelling of it, if any.
  [[nodiscard]] virtual Result<std::optional<DeletedFile>> find_reservation(
      std::string_view filename) = 0;

  /// The deleted files of a project (normalized name), whose names stay reserved, by
  /// file name.
  [[nodiscard]] virtual Result<std::vector<DeletedFile>> deleted_files(
      std::string_view project) = 0;

  /// Every blob a file row references: one entry per row and role (file bytes, METADATA),
  /// sorted by file name, read in one transaction. Deleted files reference nothing.
  [[nodiscard]] virtual Result<std::vector<BlobRef>> referenced_blobs() = 0;

  /// Heals a damaged file with its own bytes: in one write transaction, checks that
  /// `filename` is recorded with `sha256`, runs `publish` (the caller publishes the file's
  /// blobs again there) and drops the damage records of the file's blobs, which bumps the
  /// generation. Returns the row (no longer damaged). Errc::not_found when no such row,
  /// conflict when it holds other bytes; a failing `publish` changes nothing.
  [[nodiscard]] virtual Result<core::FileRecord> restore_file(
      std::string_view filename, std::string_view sha256,
      const std::function<Status()>& publish) = 0;

  /// Records a damaged blob (fsck --repair): the files that reference it disappear from every
  /// page and their URLs answer 503. `quarantine` runs first inside the write transaction, so
  /// that no upload publishes the blob meanwhile; it moves the blob aside and returns false
  /// when the blob turned out to be fine (then nothing is recorded). Returns whether the
  /// blob was recorded; the generation moves when it was.
  [[nodiscard]] virtual Result<bool> mark_damaged(
      std::string_view sha256, std::string_view detail,
      const std::function<Result<bool>()>& quarantine) = 0;

  /// Drops the damage records of these blobs (found intact again, e.g. restored from a
  /// backup). The generation moves when a record was dropped.
  [[nodiscard]] virtual Status clear_damaged(const std::vector<std::string>& sha256s) = 0;

  /// Every damaged blob, sorted by sha256.
  [[nodiscard]] virtual Result<std::vector<DamagedBlob>> damaged_blobs() = 0;

  /// The wheels whose binaries have no findings (`binaries` NULL: stored before wheels were
  /// inspected at ingest), by file name; damaged ones too. Sdists are not listed.
  [[nodiscard]] virtual Result<std::vector<UninspectedWheel>> uninspected_wheels() = 0;

  /// Records the findings of a wheel stored without them (`wheelforge reinspect`), in one
  /// write transaction: on the row `filename` holding `sha256`, only while it has none
  /// (findings already recorded, by another run or process, are kept: returns false). Returns
  /// true when written; the generation moves then. Errc::not_found when no such row (deleted
  /// meanwhile), conflict when the row holds other bytes, invalid for an sdist.
  [[nodiscard]] virtual Result<bool> record_findings(std::string_view filename,
                                                     std::string_view sha256,
                                                     const core::WheelFindings& findings) = 0;

  /// Records the provenance object of a file stored without one (attestations PUT after the
  /// file: docs/publishing.md, "Attestations"), with an "attestations" audit entry by `by`, in
  /// one write transaction: on the row `filename` holding `sha256`, only while it has no
  /// provenance. Returns true when written (the generation moves), false when the row has this
  /// provenance already. Errc::not_found when no such row, conflict when the row holds other
  /// bytes or other provenance.
  [[nodiscard]] virtual Result<bool> set_provenance(std::string_view filename,
                                                    std::string_view sha256,
                                                    std::string_view provenance_sha256,
                                                    std::uint64_t provenance_size,
                                                    const Actor& by) = 0;

  /// Every row of every table that holds the index (tokens, projects, files, deleted_files,
  /// damaged_blobs, upstream_blobs, audit, builds, jobs, in that order: a row's references come
  /// before it), read in one transaction. Token rows hold hashes only, as stored. The
  /// generation is not part of it (the importing catalog moves its own).
  [[nodiscard]] virtual Result<std::vector<TableRows>> export_rows() = 0;

  /// Copies rows that export_rows() read from a catalog of either backend into this one, in
  /// one write transaction, ids kept (later rows get ids after them). A row whose key (`id`;
  /// `filename` for deleted_files; `sha256` for damaged_blobs and upstream_blobs) is absent is
  /// inserted as it is; one present with the same values is skipped, so that an interrupted
  /// copy can be run again. Errc::conflict naming the table, the key and the column when a row
  /// present holds other values, or when an insert breaks a uniqueness rule (another row holds
  /// the name); Errc::invalid for a table or columns this catalog does not know. On any error
  /// nothing of the table is written.
  [[nodiscard]] virtual Result<ImportCounts> import_rows(const TableRows& rows) = 0;

  /// Writes a consistent copy of the whole catalog into the new file `dest` while other
  /// processes keep reading and writing (SQLite online backup from one read transaction).
  /// Fails with conflict when dest exists, io (storage_full on ENOSPC) otherwise.
  [[nodiscard]] virtual Status backup_to(const std::filesystem::path& dest) = 0;
};

/// What a catalog call does to the database, as the metrics count it: reads (loads, lookups,
/// listings) or writes (anything that may change a row).
enum class CallKind : std::uint8_t { read, write };

/// Told of every call of an observed Catalog (observe_catalog) once it returns: what the
/// catalog's metrics are made of. `took` leaves out the time the caller's own callbacks
/// (insert_file's publish, ...) ran inside the call; `error` is the call's error, if any
/// (expected answers such as not_found included: the observer decides what it counts).
/// Called on the calling thread: must be thread-safe and not block.
class CallObserver {
 public:
  CallObserver() = default;
  CallObserver(const CallObserver&) = delete;
  CallObserver& operator=(const CallObserver&) = delete;
  virtual ~CallObserver() = default;
  virtual void catalog_call(std::string_view backend, CallKind kind, std::chrono::nanoseconds took,
                            const Error* error) = 0;
};

/// `catalog` with every call reported to `observer` under the label `backend` ("sqlite",
/// "postgresql"); the calls themselves are passed on unchanged.
[[nodiscard]] std::unique_ptr<Catalog> observe_catalog(std::unique_ptr<Catalog> catalog,
                                                       std::string backend,
                                                       std::shared_ptr<CallObserver> observer);

/// "sqlite" or "postgresql": the backend a catalog location names (the metrics' label).
[[nodiscard]] std::string_view catalog_backend(std::string_view location);

/// Opens (creating if needed) DATA_DIR/wheelforge.db and applies pending migrations.
/// Fails with io when the database cannot be opened, internal on a failed migration.
[[nodiscard]] Result<std::unique_ptr<Catalog>> open_sqlite_catalog(
    const std::filesystem::path& db_path);

/// Opens the PostgreSQL catalog at a libpq URI ("postgresql://USER:PASSWORD@HOST:PORT/DBNAME")
/// and applies pending migrations (under an advisory lock: concurrent openers do not both
/// migrate). Errc::unavailable naming the database ("PostgreSQL at HOST:PORT/DBNAME", never the
/// password) when it cannot be reached; every later call that finds the connection lost fails
/// the same way, and the next call connects again.
[[nodiscard]] Result<std::unique_ptr<Catalog>> open_postgres_catalog(std::string_view uri);

/// Ok for a catalog location wheelforge knows: "sqlite" (or empty: the default) or a libpq URI
/// "postgresql://..." / "postgres://..."; Errc::invalid saying what is expected otherwise.
[[nodiscard]] Status validate_catalog_location(std::string_view location);

/// True for a PostgreSQL location (a libpq URI).
[[nodiscard]] bool is_postgres_location(std::string_view location);

/// The password a PostgreSQL URI carries (userinfo or ?password=), empty when none.
[[nodiscard]] std::string uri_password(std::string_view location);
/// A PostgreSQL URI without its password (userinfo or ?password=), to hand to a program
/// (pg_dump) whose password goes elsewhere.
[[nodiscard]] std::string uri_without_password(std::string_view location);

/// The location as it may be shown and logged: a URI's password replaced by "***".
[[nodiscard]] std::string describe_catalog_location(std::string_view location);

/// Opens the catalog a location names: "sqlite" (or empty) opens DATA_DIR/wheelforge.db as
/// open_sqlite_catalog does; a libpq URI opens PostgreSQL (open_postgres_catalog). Errc::invalid
/// for anything else.
[[nodiscard]] Result<std::unique_ptr<Catalog>> open_catalog(std::string_view location,
                                                            const std::filesystem::path& data_dir);

}  // namespace wf::catalog
