#pragma once
// The configured upstream indexes (docs/upstreams.md) and their page cache: project pages are
// fetched through the Fetcher, kept in a memory LRU bounded in bytes and in a disk copy under
// the data directory (written atomically), used for the upstream's metadata_ttl, then
// revalidated with If-None-Match / If-Modified-Since (a 304 renews them). When an upstream
// cannot be reached or answers a server error, the last page it gave is used (stale) with its
// age. Upstream pages never enter the catalog or its snapshot. Thread-safe; pages() blocks
// (network, disk): call it from a worker.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/shared_pages.hpp"
#include "wheelforge/core/upstream.hpp"
#include "wheelforge/handlers/fetcher.hpp"
#include "wheelforge/snapshot/snapshot.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/result.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::handlers {

/// One upstream's answer for one project, as cached.
struct UpstreamPageEntry {
  core::UpstreamPage page;  ///< empty when the upstream does not have the project (404)
  bool found = true;        ///< false: the upstream answered 404 (or 410)
  std::string etag;
  std::string last_modified;
  Micros validated = 0;  ///< when the upstream last confirmed it (200 or 304)
  std::size_t cost = 0;  ///< approximate bytes held in memory
};

/// Counters of one upstream, for /metrics.
struct UpstreamCounters {
  std::atomic<std::uint64_t> hits{0};    ///< pages answered from the cache within their TTL
  std::atomic<std::uint64_t> misses{0};  ///< pages fetched or revalidated
  std::atomic<std::uint64_t> errors{0};  ///< fetches that failed (unreachable, 5xx, bad page)
  std::atomic<std::uint64_t> bytes{0};   ///< bytes received from the upstream
};

/// One upstream file being fetched into the blob store's temp file (Upstreams::download_file),
/// shared by every request for it while it runs: they read what has been written so far through
/// reader() and wait for more with wait(). It ends committed (stored, verified) or failed
/// (nothing stored). Thread-safe.
class FileDownload {
 public:
  enum class State : std::uint8_t { running, committed, failed };
  struct Progress {
    State state = State::running;
    /// The upstream answered 200: the bytes written are the file's (until then none are).
    bool answered = false;
    std::uint64_t written = 0;  ///< bytes in the file so far
    /// The whole file's size once known: the upstream answer's Content-Length, else the
    /// size its page lists. A committed file of another size was not this one.
    std::optional<std::uint64_t> length;
    std::uint64_t version = 0;  ///< changes whenever anything above does
  };

  FileDownload(std::string sha256, std::string shown, std::shared_ptr<UniqueFd> reader,
               std::optional<std::uint64_t> listed_size);

  [[nodiscard]] const std::string& sha256() const { return sha256_; }
  /// The file's name as logs and errors show it (`numpy-1.0.tar.gz`, `x.whl.metadata`).
  [[nodiscard]] const std::string& shown() const { return shown_; }
  /// A read-only descriptor of the file being written (pread, sendfile): valid for the whole
  /// download, also once the file has been published or removed.
  [[nodiscard]] const std::shared_ptr<UniqueFd>& reader() const { return reader_; }
  [[nodiscard]] Progress progress() const;
  /// Why it failed (State::failed), as the answer names it.
  [[nodiscard]] Error error() const;

  /// Calls `wake` once when the progress's version is no longer `seen`, from the download's
  /// thread with its lock held: `wake` must only hand the news on (post it to an executor),
  /// never block, never call back into this download. Returns a ticket for cancel(), or 0
  /// (and drops `wake`) when the version is not `seen` now: look again.
  std::uint64_t wait(std::uint64_t seen, std::function<void()> wake);
  /// Drops a waiting `wake` (a reader that went away); after it returns, that `wake` is
  /// neither running nor ever called.
  void cancel(std::uint64_t ticket);

  // The download's side (Upstreams).
  void answered(std::optional<std::uint64_t> length);
  void wrote(std::uint64_t bytes);
  void end(State state, std::optional<Error> error = std::nullopt);

 private:
  void changed(std::unique_lock<std::mutex>& lock);

  const std::string sha256_;
  const std::string shown_;
  const std::shared_ptr<UniqueFd> reader_;
  mutable std::mutex mu_;
  Progress progress_;
  std::optional<Error> error_;
  std::uint64_t next_ticket_ = 1;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> waiters_;
};

/// What the first download of an upstream file needs (Upstreams::download_file).
struct FileFetch {
  const core::UpstreamConfig* upstream = nullptr;
  std::string url;                           ///< where the upstream has it
  std::string sha256;                        ///< the hash its page lists: the bytes must have it
  std::string shown;                         ///< its name in logs and errors
  std::optional<std::uint64_t> listed_size;  ///< the size its page lists, if any
  std::uint64_t max_bytes = 0;
  std::uint64_t request_id = 0;  ///< the request that started it, for the log
};

/// A download to answer from (Upstreams::download_file).
struct StartedDownload {
  std::shared_ptr<FileDownload> download;  ///< null: the file is stored already
  /// Set for a new download: the caller runs it once, on a worker (it blocks until the file is
  /// stored or refused); empty when the request joined a download that runs already.
  std::function<void()> run;
};

class Upstreams {
 public:
  /// `cache_dir`: where the disk copies live (DATA_DIR/upstream/pages); created when needed.
  /// `memory_bytes`: the memory bound: the listings' LRU and the rendered merged pages' (at
  /// most a quarter of it) together.
  Upstreams(std::vector<core::UpstreamConfig> configs, Fetcher& fetcher,
            std::filesystem::path cache_dir, std::uint64_t memory_bytes);

  [[nodiscard]] const std::vector<core::UpstreamConfig>& configs() const { return configs_; }
  [[nodiscard]] const core::UpstreamConfig* find(std::string_view name) const;

  /// True when some upstream may serve `project` (core::may_serve). No I/O.
  [[nodiscard]] bool any_may_serve(std::string_view project, bool local) const;

  /// One upstream's page for a project as a listing uses it.
  struct Listing {
    const core::UpstreamConfig* upstream = nullptr;
    std::shared_ptr<const UpstreamPageEntry> entry;  ///< null when nothing could be had
    /// Set when the page is older than its TTL because the upstream failed: its age.
    std::optional<std::chrono::seconds> stale_age;
    std::optional<Error> error;  ///< why the upstream could not be asked (entry may be stale)
  };

  /// The pages of every upstream that may serve `project` (normalized), in configuration
  /// order: from memory within the TTL, else from the disk copy within the TTL, else fetched
  /// (revalidated when a copy exists). Blocks.
  [[nodiscard]] std::vector<Listing> pages(std::string_view project, bool local, Micros now);

  /// The file `filename` with `sha256` as the page of `upstream` for its project lists it now
  /// (from the cache, or fetched), when the upstream may serve the project and the cooldown
  /// does not hide the file; nullopt otherwise. Errc::upstream when the page could not be had.
  /// Blocks.
  [[nodiscard]] Result<std::optional<core::UpstreamFile>> listed_file(
      const core::UpstreamConfig& upstream, std::string_view project, std::string_view filename,
      std::string_view sha256, bool local, Micros now);

  /// Fetches `url` of `upstream` (with its credentials, which the fetcher sends only when
  /// `url` is on the upstream's own scheme, host and port), handing the body to `sink` (and the
  /// answer's head to `on_head` first, when set: FetchRequest::on_head); counts its bytes.
  /// Blocks.
  [[nodiscard]] Result<FetchResponse> fetch_file(
      const core::UpstreamConfig& upstream, std::string url, std::uint64_t max_bytes,
      std::function<Status(std::string_view)> sink,
      std::function<Status(int, const std::vector<std::pair<std::string, std::string>>&)> on_head =
          {});

  /// The download of `fetch.sha256` into `store`: the one running now (a concurrent request
  /// shares it: one fetch), or a new one, its temp file created here, whose `run` fetches the
  /// file, verifies it against the sha256, publishes it and records it in `catalog` (the
  /// file cache's bound applied), or removes it. A download runs to its end whether or not
  /// anyone still reads it. Null download when the file is stored already. Blocks (disk).
  [[nodiscard]] Result<StartedDownload> download_file(FileFetch fetch,
                                                      const store::BlobStore& store,
                                                      catalog::Catalog* catalog);
  /// Downloads running now.
  [[nodiscard]] std::size_t downloads_running() const;

  [[nodiscard]] const UpstreamCounters& counters(std::size_t index) const {
    return *counters_[index];
  }
  /// Bytes the memory cache holds now (listings and rendered merged pages).
  [[nodiscard]] std::uint64_t memory_bytes() const;
  /// Connections the outbound client has opened (to every upstream): kept connections are
  /// used again, so this grows slower than the fetches.
  [[nodiscard]] std::uint64_t connections_opened() const { return fetcher_.connections_opened(); }

  /// A merged page (upstream_pages.cpp) as rendered, and the upstream listings it was made
  /// from: it stays the answer while each of them is still the one the cache holds for its
  /// upstream and project, and `now` is before `valid_until`.
  struct RenderedMerge {
    std::shared_ptr<const snapshot::Page> page;
    struct Source {
      std::size_t upstream = 0;  ///< index in configs()
      std::weak_ptr<const UpstreamPageEntry> entry;
    };
    std::vector<Source> sources;
    /// The earliest end of a listing's TTL or of a hidden file's cooldown.
    Micros valid_until = 0;
  };
  /// The rendered merged page under `key` when it is still current (see RenderedMerge); null
  /// otherwise. Short lookups under the cache's lock, no I/O: fit for a network thread.
  [[nodiscard]] std::shared_ptr<const snapshot::Page> rendered_merge(const std::string& key,
                                                                     std::string_view project,
                                                                     Micros now);
  /// Keeps a rendered merged page under `key` (least recently used first out, within a quarter
  /// of the memory bound).
  void keep_rendered_merge(const std::string& key, RenderedMerge merge);

  /// The bound on the bytes of the disk copies of upstream pages
  /// (Settings::upstream_page_disk_cache; 0: none). Lowering it below what is kept evicts the
  /// least recently used copies at once (disk I/O: call it at start, or from a worker).
  void set_page_disk_limit(std::uint64_t bytes);
  /// Bytes of the disk copies as this process counts them (its own writes, and the copies
  /// present at start), each in whole 4 KiB blocks.
  [[nodiscard]] std::uint64_t page_disk_bytes() const;
  /// Requests waiting now for a page another one is fetching (a concurrent miss of the same
  /// page shares that fetch).
  [[nodiscard]] std::size_t waiting_for_fetches() const;

  /// The upstreams known to have a project of this (normalized) name: their page of it, as
  /// fetched or read from its disk copy by this process (the copies present at start
  /// included, such as those `project list` writes), listed files. No I/O: never fetches.
  [[nodiscard]] std::vector<std::string> known_upstreams_of(std::string_view project) const;
  /// How many of the names upstream `index` is known to have (see known_upstreams_of()) pass
  /// `pred` (called with the lock held: keep it cheap, no I/O).
  [[nodiscard]] std::size_t count_known(std::size_t index,
                                        const std::function<bool(std::string_view)>& pred) const;

  /// Pages shared with the other servers of a PostgreSQL catalog (catalog/shared_pages.hpp):
  /// a page this process misses is looked up there, and fetched by one server at a time.
  /// Null (the default): this process fetches alone. Call at start, before any request.
  void share_pages(std::unique_ptr<catalog::SharedPages> shared) { shared_ = std::move(shared); }

  /// The bound on the bytes of upstream files kept (Settings::upstream_file_cache; 0: none).
  void set_file_cache_limit(std::uint64_t bytes) { file_cache_limit_ = bytes; }
  [[nodiscard]] std::uint64_t file_cache_limit() const { return file_cache_limit_; }
  /// True when the use of the stored upstream blob `sha256` at `now` should be recorded in the
  /// catalog: at most once a minute per blob (remembered here, so a busy file costs no write).
  [[nodiscard]] bool use_to_record(std::string_view sha256, Micros now);

 private:
  Listing page_of(std::size_t index, std::string_view project, Micros now);
  /// Asks the upstream for the page (conditionally, when `cached`). `copy`, when given, is
  /// set to the text of the disk copy written for a new answer; `confirmed` to true when the
  /// upstream answered 304 for `cached`.
  Listing fetch_page(std::size_t index, std::string_view project, Micros now,
                     std::shared_ptr<const UpstreamPageEntry> cached, std::string* copy = nullptr,
                     bool* confirmed = nullptr);
  /// page_of()'s miss with shared pages: the shared copy when it is fresh, else one fetch
  /// among the servers (this one's when it claims the page, another's that it waits for).
  Listing fetch_shared(std::size_t index, std::string_view project, Micros now,
                       std::shared_ptr<const UpstreamPageEntry> cached);
  /// A page being fetched: the others that miss it wait for this answer.
  struct InFlight {
    std::condition_variable cv;
    bool done = false;
    std::size_t waiters = 0;
    Listing result;
  };
  void note_known(std::size_t index, std::string_view project, const UpstreamPageEntry& entry);
  void load_known();
  /// Records the disk copy under `key` as used at `now`, of `bytes` when given (written).
  void note_disk_use(const std::string& key, Micros now, std::optional<std::uint64_t> bytes);
  /// Evicts the least recently used disk copies, other than `keep`, while they exceed the
  /// bound: down to 7/8 of it, so that evictions come in batches.
  void trim_disk(const std::string& keep);
  [[nodiscard]] std::size_t index_of(const core::UpstreamConfig& upstream) const;
  void add_credentials(const core::UpstreamConfig& upstream, FetchRequest& req) const;
  std::shared_ptr<const UpstreamPageEntry> remembered(const std::string& key);
  void remember(const std::string& key, std::shared_ptr<const UpstreamPageEntry> entry);
  [[nodiscard]] std::filesystem::path disk_path(const core::UpstreamConfig& u,
                                                std::string_view project) const;
  std::shared_ptr<const UpstreamPageEntry> read_disk(const core::UpstreamConfig& u,
                                                     std::string_view project) const;
  /// A page from the text of its disk copy; null when the text is not one.
  std::shared_ptr<UpstreamPageEntry> parse_copy(const core::UpstreamConfig& u,
                                                std::string_view project,
                                                std::string_view text) const;
  /// Writes the disk copy (its text) and returns that text.
  std::string write_disk(const core::UpstreamConfig& u, std::string_view project,
                         const UpstreamPageEntry& entry, std::string_view url,
                         std::string_view content_type, std::string_view body);
  /// Writes `text` as the disk copy of the page, within the disk bound.
  void store_copy(const core::UpstreamConfig& u, std::string_view project, const std::string& text);

  std::vector<core::UpstreamConfig> configs_;
  Fetcher& fetcher_;
  std::unique_ptr<catalog::SharedPages> shared_;
  std::filesystem::path cache_dir_;
  std::uint64_t memory_limit_;
  std::vector<std::unique_ptr<UpstreamCounters>> counters_;

  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const UpstreamPageEntry>>> lru_;  // newest first
  std::unordered_map<std::string, decltype(lru_)::iterator> by_key_;
  std::uint64_t memory_used_ = 0;
  // Rendered merged pages: their own LRU, within render_limit_ (a quarter of memory_limit_).
  struct RenderedEntry {
    std::string key;
    RenderedMerge merge;
    std::size_t cost = 0;
  };
  std::list<RenderedEntry> rendered_;  // newest first; guarded by mu_
  std::unordered_map<std::string, decltype(rendered_)::iterator> rendered_by_key_;
  std::uint64_t render_limit_ = 0;
  std::uint64_t render_used_ = 0;
  // The disk copies: bytes and last use per "upstream\nproject" (an approximate LRU: a use
  // on a network thread is not marked while an eviction batch holds disk_mu_), evicted in
  // batches by trim_disk() (one sort per eighth of the bound written). Lock order: mu_, then
  // disk_mu_.
  struct DiskUse {
    std::uint64_t bytes = 0;
    Micros used = 0;
  };
  mutable std::mutex disk_mu_;
  std::unordered_map<std::string, DiskUse> disk_use_;  // guarded by disk_mu_
  std::uint64_t disk_bytes_ = 0;                       // guarded by disk_mu_
  std::atomic<std::uint64_t> disk_limit_{0};
  std::atomic<std::uint64_t> file_cache_limit_{0};
  std::unordered_map<std::string, Micros> uses_recorded_;                 // guarded by mu_
  std::unordered_map<std::string, std::shared_ptr<InFlight>> in_flight_;  // guarded by mu_
  std::vector<std::set<std::string, std::less<>>> known_;  // per upstream; guarded by mu_

  void run_download(const FileFetch& fetch, const std::shared_ptr<FileDownload>& download,
                    store::TempFile& temp, const store::BlobStore& store,
                    catalog::Catalog* catalog);
  mutable std::mutex downloads_mu_;
  std::unordered_map<std::string, std::shared_ptr<FileDownload>> downloads_;  // by sha256
};

/// What evict_upstream_files() did.
struct UpstreamEviction {
  std::vector<catalog::UpstreamBlob> evicted;  ///< least recently used first
  std::uint64_t evicted_bytes = 0;
  std::uint64_t kept_bytes = 0;  ///< the upstream files kept after it
};

/// Evicts the least recently used upstream files (catalog::UpstreamBlob, by the later of
/// last_used_at and stored_at) until their sizes add up to at most `limit` bytes: each row is
/// removed, and its blob too unless a local file has the same sha256 (or it was published
/// again meanwhile). `keep` (a sha256, e.g. the file just stored) is never evicted. Blocks
/// (catalog, disk): call it from a worker or a command.
[[nodiscard]] Result<UpstreamEviction> evict_upstream_files(catalog::Catalog& catalog,
                                                            const store::BlobStore& store,
                                                            std::uint64_t limit,
                                                            std::string_view keep = {});

/// What trim_upstream_page_copies() removed.
struct UpstreamPageTrim {
  std::size_t removed = 0;
  std::uint64_t removed_bytes = 0;  ///< in whole 4 KiB blocks, as the bound counts
};

/// Removes the disk copies of upstream pages under `cache_dir` (DATA_DIR/upstream/pages),
/// least recently written first, while they take more than `limit` bytes (each in whole 4 KiB
/// blocks), down to 7/8 of it, as a server does when it writes one (`wheelforge gc`). Blocks
/// (disk): call it from a command.
[[nodiscard]] UpstreamPageTrim trim_upstream_page_copies(const std::filesystem::path& cache_dir,
                                                         std::uint64_t limit);

/// The Accept header sent to upstreams: JSON first, HTML as the fallback (docs/packaging.md,
/// "Content negotiation").
inline constexpr std::string_view kUpstreamAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01";

}  // namespace wf::handlers
