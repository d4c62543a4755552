#pragma once
// What a handler works with besides its request (Context), and what it tells the server besides
// its answer (the Context's outputs). A handler is `Response handle_x(const Request&, Context&)`.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/build/runner.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/crypto/certificate.hpp"
#include "wheelforge/handlers/legacy_upload.hpp"
#include "wheelforge/handlers/metrics.hpp"
#include "wheelforge/handlers/oidc.hpp"
#include "wheelforge/handlers/ui_sessions.hpp"
#include "wheelforge/handlers/upload.hpp"
#include "wheelforge/handlers/upstreams.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/snapshot/snapshot.hpp"
#include "wheelforge/store/blob_store.hpp"

namespace wf::handlers {

/// What the server works with; owned by the caller and outliving the server.
struct Services {
  catalog::Catalog* catalog = nullptr;
  store::BlobStore* store = nullptr;
  ingest::Ingestor* ingestor = nullptr;
  build::Runner* runner = nullptr;  ///< null when no build recipes are configured
  /// The stores' latency and errors for /metrics; null: not counted.
  StoreMetrics* store_metrics = nullptr;
};

/// Whether the catalog and the blob store answered the latest looks at them (/readyz): the
/// server looks from a worker (its catalog poll, every catalog_poll_interval, and a probe of
/// the object store at most every kStoreProbeInterval), /readyz reads what was found. Thread-safe.
class Readiness {
 public:
  enum class Part : std::uint8_t { catalog, blob_store };

  /// Records a look at `part`: ok, or the error saying why it did not answer (its message
  /// names the store). Returns true when this changed the part's state (worth a log line).
  bool record(Part part, const Status& looked);
  /// Why the server is not ready, one line per part that did not answer; empty when both did
  /// (or were not looked at yet).
  [[nodiscard]] std::string problems() const;
  /// True unless the latest look at `part` failed.
  [[nodiscard]] bool reachable(Part part) const;

 private:
  mutable std::mutex mu_;
  std::string catalog_;  ///< the latest failure's message; empty: it answered
  std::string blob_store_;
};

/// The server's state that answers report (/readyz, /metrics). Written by the transport,
/// read by any thread.
struct ServerStatus {
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> open_connections{0};
  std::atomic<std::uint64_t> refused_connections{0};
  /// Closed at the connection cap to make room for a new one (docs/security.md).
  std::atomic<std::uint64_t> evicted_connections{0};
  /// Requests from a trusted proxy (trusted_proxies) whose client its header named, and those
  /// whose header could not be read (the proxy is then taken for the client).
  std::atomic<std::uint64_t> forwarded_requests{0};
  std::atomic<std::uint64_t> forwarded_malformed{0};
  /// Requests through a trusted proxy refused with 503: their client had
  /// max_connections_per_client requests in progress already.
  std::atomic<std::uint64_t> refused_forwarded{0};
  Metrics metrics;
  Readiness readiness;
  /// The change feed (docs/scale.md), with a shared catalog only: whether this replica follows
  /// one, whether it has caught up once since it started (/readyz), the position it has
  /// applied, the entries behind it at its last read, and the age of the newest entry it
  /// applied when it applied it (feed lag, microseconds).
  std::atomic<bool> feed{false};
  std::atomic<bool> feed_caught_up{false};
  std::atomic<std::uint64_t> feed_position{0};
  std::atomic<std::int64_t> feed_lag_micros{0};
  /// When the feed was last read successfully (microseconds since the epoch): how old the
  /// pages may be while the database is unreachable.
  std::atomic<std::int64_t> feed_read_at{0};
};

/// How file URLs are answered when the blobs live in an object store (docs/storage.md,
/// "Serving files from S3"); with the file backend files are always sent from the blob file.
enum class FileServing : std::uint8_t {
  redirect,  ///< 302 to a presigned GET of the object, valid for Environment::presign_expiry
  proxy,     ///< the server sends the bytes, from the read cache (fetched on a worker)
};

/// The part of every context that is the same for all requests of one server.
struct Environment {
  Services services;
  ServerStatus* status = nullptr;
  UiSessions* ui_sessions = nullptr;
  /// Every read (pages, files, APIs; not /healthz and /readyz) needs a read-scope token.
  bool private_reads = false;
  /// The configured upstream indexes and their caches; null when none is configured.
  Upstreams* upstreams = nullptr;
  /// With an object store: how file URLs are answered, and how long a presigned URL lives.
  FileServing file_serving = FileServing::redirect;
  std::chrono::seconds presign_expiry{300};
  /// The issuers of trusted publishing; null when none is configured (docs/publishing.md).
  OidcIssuers* oidc = nullptr;
  /// The certificates attestations must chain to ([attestations] trust_roots); null when none
  /// are configured, and uploads with attestations are refused (docs/publishing.md).
  const crypto::TrustStore* attestation_roots = nullptr;
  /// The certificate (PEM) that signs the build runner's provenance; empty: none.
  std::string build_certificate;
};

/// The body of an upload route once it has arrived in full.
struct UploadedBody {
  std::optional<store::TempFile> file;  ///< BodyPolicy::file: the body is the file
  std::unique_ptr<LegacyUpload> form;   ///< BodyPolicy::form: the form, its file inside
  UploadPlan plan;                      ///< BodyPolicy::file: what the head said (plan_upload)
};

/// Which part of the catalog a handler of a route that changes it (Route::changes_catalog) has
/// changed, so that the server loads a new snapshot before it answers: the change is on the
/// pages once the client hears of it.
enum class Changed : std::uint8_t {
  everything,  ///< anything (yanks, deletions, claims): a full load
  project,     ///< one project (Context::changed_project): that project is read again
  nothing,     ///< nothing after all (an identical upload)
};

/// A build log to stream to the client, growing until the job ends (`?follow=1`).
struct LogFollow {
  std::int64_t job = 0;
  std::uint64_t offset = 0;
};

/// An upstream file on its first download, to stream to the client while it is written
/// (Upstreams::download_file): the answer grows with the download, and a download that fails
/// ends the answer before its end (the client sees an incomplete body, never a whole one).
struct GrowingFile {
  std::shared_ptr<FileDownload> download;
  std::string content_type;
  std::string etag;       ///< "\"<sha256>\""
  std::string blob_path;  ///< where the file is once stored (store::BlobStore::blob_file)
  /// Answer only once the download has ended, from the stored file (file_response): a HEAD,
  /// a range or a conditional request, whose answer needs the whole file.
  bool wait_for_end = false;
};

/// The answer to `req` for a growing file whose download has ended: the stored file (as any
/// blob: ranges, ETag) when it was committed, the download's error when it failed. Also what
/// the server answers when a download fails before any byte of the answer was sent.
[[nodiscard]] Response growing_file_answer(const Request& req, const GrowingFile& growing);

struct Context {
  Context(const snapshot::Snapshot& snap, const Environment& environment)
      : snapshot(snap), env(environment) {}

  // In.
  const snapshot::Snapshot& snapshot;  ///< the catalog as of this request
  const Environment& env;
  UploadedBody* upload = nullptr;  ///< upload routes: the body that arrived
  /// The handler runs on a worker and may block. False on the network thread: a handler of a
  /// Thread::network route that finds it must block (fetch from an upstream index) sets
  /// `needs_worker` and returns; the server then runs the request again on a worker.
  bool on_worker = false;

  // Out: what the server does besides sending the answer.
  /// Run this request again on a worker (with `on_worker` set) and send that answer instead;
  /// only read on the network thread.
  bool needs_worker = false;
  Changed changed = Changed::everything;
  std::string changed_project;
  std::optional<LogFollow> follow;     ///< stream this log instead of the answer
  std::optional<GrowingFile> growing;  ///< stream this file instead of the answer
  /// Work the server runs on a worker once the answer has been handed on (the download a
  /// `growing` answer streams); never on a network thread.
  std::function<void()> after_answer;
  /// The 401 was for a token this snapshot does not know: another process may have just
  /// created it, so the server looks at the catalog once and asks again.
  bool unknown_token = false;
  /// An upload's outcome for the metrics ("stored", "identical", "restored", "rejected",
  /// "failed"); empty for other routes.
  std::string_view upload_outcome;
  /// One line for the server's log about what happened (never a secret); empty: none.
  std::string note;
};

}  // namespace wf::handlers
