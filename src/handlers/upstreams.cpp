#include "wheelforge/handlers/upstreams.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "wheelforge/core/name.hpp"
#include "wheelforge/render/upstream.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kDiskMagic = "wheelforge-upstream-page 1\n";

bool is_json(std::string_view content_type) {
  const std::string t = to_lower(content_type);
  return t.find("application/vnd.pypi.simple.v1+json") != std::string::npos ||
         t.starts_with("application/json");
}

Result<core::UpstreamPage> parse_page(std::string_view content_type, std::string_view body,
                                      std::string_view url) {
  return is_json(content_type) ? render::parse_upstream_json(body, url)
                               : core::parse_upstream_html(body, url);
}

// What the page cache holds, estimated as glibc's malloc hands memory out: each allocation of
// n bytes takes n plus an 8-byte header, rounded up to 16, at least 32. Strings count their
// capacity (+1 for the terminator) when it is beyond the small-string buffer inside the
// object, vectors their capacity (a parser's growth leaves up to twice the size), and each
// cache entry its list and hash-map nodes and key. Counting only the characters of the
// strings, as this did first, came to about two thirds of what the process held.
std::size_t chunk(std::size_t n) {
  if (n == 0) return 0;
  return std::max<std::size_t>(32, (n + 8 + 15) & ~std::size_t{15});
}

std::size_t heap_of(const std::string& s) {
  static const std::size_t sso = std::string().capacity();
  return s.capacity() > sso ? chunk(s.capacity() + 1) : 0;
}

std::size_t heap_of(const std::optional<std::string>& s) {
  return s ? heap_of(*s) : 0;
}

// make_shared's one block: the object and the control block (two counts and a vtable).
template <typename T>
constexpr std::size_t kSharedBlock = sizeof(T) + 16;

std::size_t cost_of(const UpstreamPageEntry& e) {
  std::size_t n = chunk(kSharedBlock<UpstreamPageEntry>) + heap_of(e.etag) +
                  heap_of(e.last_modified) + heap_of(e.page.name) +
                  chunk(e.page.files.capacity() * sizeof(core::UpstreamFile));
  for (const auto& f : e.page.files) {
    n += heap_of(f.filename) + heap_of(f.url) + heap_of(f.sha256) + heap_of(f.metadata_sha256) +
         heap_of(f.requires_python) + heap_of(f.yanked);
  }
  return n;
}

// A cache entry's bookkeeping: a list node holding the key and a pointer, a hash-map node
// holding the key again and an iterator (with the hash and the next pointer), a bucket.
std::size_t node_cost(const std::string& key, std::size_t list_value) {
  return chunk(2 * sizeof(void*) + list_value) + heap_of(key) +
         chunk(sizeof(void*) + sizeof(std::string) + sizeof(void*) + sizeof(std::size_t)) +
         heap_of(key) + sizeof(void*);
}

// A disk copy counts as the file system stores it: in whole 4 KiB blocks (a page of 700 bytes
// takes 4 KiB of the disk, as `du` shows).
std::uint64_t on_disk(std::uint64_t bytes) {
  return (bytes + 4095) & ~std::uint64_t{4095};
}

std::string page_url(const core::UpstreamConfig& u, std::string_view project) {
  return u.url + std::string(project) + "/";
}

/// A header line of the disk copy: "name: value\n" with value free of newlines.
void put_line(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ": ";
  for (const char c : value) {
    if (c != '\n' && c != '\r') out += c;
  }
  out += '\n';
}

// The answer when the upstream could not be asked: `error`, and the copy last seen (if any),
// served stale with its age.
Upstreams::Listing failed_listing(const core::UpstreamConfig& u, Error error,
                                  std::shared_ptr<const UpstreamPageEntry> seen, Micros now) {
  Upstreams::Listing listing;
  listing.upstream = &u;
  listing.error = std::move(error);
  if (seen) {
    listing.stale_age = std::chrono::seconds((now - seen->validated) / 1'000'000);
    listing.entry = std::move(seen);
  }
  return listing;
}

}  // namespace

Upstreams::Upstreams(std::vector<core::UpstreamConfig> configs, Fetcher& fetcher,
                     fs::path cache_dir, std::uint64_t memory_bytes)
    : configs_(std::move(configs)),
      fetcher_(fetcher),
      cache_dir_(std::move(cache_dir)),
      memory_limit_(memory_bytes - memory_bytes / 4),
      render_limit_(memory_bytes / 4) {
  for (std::size_t i = 0; i < configs_.size(); ++i) {
    counters_.push_back(std::make_unique<UpstreamCounters>());
  }
  known_.resize(configs_.size());
  load_known();
}

void Upstreams::load_known() {
  // Run once, at start (serve, project list): not on a network thread.
  for (std::size_t i = 0; i < configs_.size(); ++i) {
    std::error_code ec;
    fs::directory_iterator it(cache_dir_ / configs_[i].name, ec);
    if (ec) continue;
    for (const auto& e : it) {
      if (!e.is_regular_file(ec)) continue;
      const std::string name = e.path().filename().string();
      if (!core::is_normalized_name(name)) continue;
      // Every copy counts towards the disk bound, last used when it was last written.
      struct stat st {};
      if (::stat(e.path().c_str(), &st) == 0) {
        const Micros written = static_cast<Micros>(st.st_mtim.tv_sec) * 1'000'000 +
                               static_cast<Micros>(st.st_mtim.tv_nsec / 1000);
        note_disk_use(configs_[i].name + '\n' + name, written,
                      on_disk(static_cast<std::uint64_t>(st.st_size)));
      }
      if (auto entry = read_disk(configs_[i], name); entry) note_known(i, name, *entry);
    }
  }
}

void Upstreams::note_known(std::size_t index, std::string_view project,
                           const UpstreamPageEntry& entry) {
  std::lock_guard lock(mu_);
  auto& names = known_[index];
  if (entry.found && !entry.page.files.empty()) {
    if (names.find(project) == names.end()) names.emplace(project);
  } else if (const auto it = names.find(project); it != names.end()) {
    names.erase(it);
  }
}

std::vector<std::string> Upstreams::known_upstreams_of(std::string_view project) const {
  std::vector<std::string> out;
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < configs_.size(); ++i) {
    if (known_[i].contains(project)) out.push_back(configs_[i].name);
  }
  return out;
}

std::size_t Upstreams::count_known(std::size_t index,
                                   const std::function<bool(std::string_view)>& pred) const {
  std::lock_guard lock(mu_);
  return static_cast<std::size_t>(std::count_if(known_[index].begin(), known_[index].end(),
                                                [&](const std::string& n) { return pred(n); }));
}

const core::UpstreamConfig* Upstreams::find(std::string_view name) const {
  for (const auto& u : configs_) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

bool Upstreams::any_may_serve(std::string_view project, bool local) const {
  for (const auto& u : configs_) {
    if (core::may_serve(u, project, local)) return true;
  }
  return false;
}

std::uint64_t Upstreams::memory_bytes() const {
  std::lock_guard lock(mu_);
  return memory_used_ + render_used_;
}

std::shared_ptr<const snapshot::Page> Upstreams::rendered_merge(const std::string& key,
                                                                std::string_view project,
                                                                Micros now) {
  std::lock_guard lock(mu_);
  const auto it = rendered_by_key_.find(key);
  if (it == rendered_by_key_.end()) return nullptr;
  const RenderedMerge& merge = it->second->merge;
  if (now >= merge.valid_until) return nullptr;
  std::string listing_key;
  for (const auto& source : merge.sources) {
    listing_key = configs_[source.upstream].name;
    listing_key += '\n';
    listing_key += project;
    const auto at = by_key_.find(listing_key);
    // The listing was renewed, refetched or evicted since: the page is made again.
    if (at == by_key_.end() || at->second->second != source.entry.lock()) return nullptr;
  }
  // The listings are used: first out of neither cache. Their disk copies are marked when the
  // disk index is free (a network thread never waits for an eviction batch).
  std::unique_lock disk(disk_mu_, std::try_to_lock);
  for (const auto& source : merge.sources) {
    listing_key = configs_[source.upstream].name;
    listing_key += '\n';
    listing_key += project;
    lru_.splice(lru_.begin(), lru_, by_key_.find(listing_key)->second);
    counters_[source.upstream]->hits.fetch_add(1, std::memory_order_relaxed);
    if (disk.owns_lock()) {
      if (const auto at = disk_use_.find(listing_key); at != disk_use_.end()) {
        at->second.used = std::max(at->second.used, now);
      }
    }
  }
  rendered_.splice(rendered_.begin(), rendered_, it->second);
  return merge.page;
}

void Upstreams::keep_rendered_merge(const std::string& key, RenderedMerge merge) {
  const snapshot::Page& page = *merge.page;
  const std::size_t cost =
      chunk(kSharedBlock<snapshot::Page>) + heap_of(page.body) + heap_of(page.gzip) +
      heap_of(page.etag) + chunk(merge.sources.capacity() * sizeof(RenderedMerge::Source)) +
      // A weak_ptr keeps the listing's block (not what the listing holds) until it goes.
      merge.sources.size() * chunk(kSharedBlock<UpstreamPageEntry>) +
      node_cost(key, sizeof(RenderedEntry));
  std::lock_guard lock(mu_);
  if (const auto it = rendered_by_key_.find(key); it != rendered_by_key_.end()) {
    render_used_ -= it->second->cost;
    rendered_.erase(it->second);
    rendered_by_key_.erase(it);
  }
  if (cost > render_limit_) return;
  render_used_ += cost;
  rendered_.push_front(RenderedEntry{key, std::move(merge), cost});
  rendered_by_key_[key] = rendered_.begin();
  while (render_used_ > render_limit_ && !rendered_.empty()) {
    render_used_ -= rendered_.back().cost;
    rendered_by_key_.erase(rendered_.back().key);
    rendered_.pop_back();
  }
}

void Upstreams::set_page_disk_limit(std::uint64_t bytes) {
  disk_limit_ = bytes;
  trim_disk({});
}

std::uint64_t Upstreams::page_disk_bytes() const {
  std::lock_guard lock(disk_mu_);
  return disk_bytes_;
}

void Upstreams::note_disk_use(const std::string& key, Micros now,
                              std::optional<std::uint64_t> bytes) {
  std::lock_guard lock(disk_mu_);
  auto [it, inserted] = disk_use_.try_emplace(key);
  if (!inserted && !bytes) {
    it->second.used = std::max(it->second.used, now);
    return;
  }
  if (inserted && !bytes) {
    // A copy this process has not counted (written by another one since the start).
    disk_use_.erase(it);
    return;
  }
  disk_bytes_ -= it->second.bytes;
  it->second.bytes = *bytes;
  it->second.used = std::max(it->second.used, now);
  disk_bytes_ += *bytes;
}

void Upstreams::trim_disk(const std::string& keep) {
  const std::uint64_t limit = disk_limit_;
  std::vector<std::string> evicted;
  {
    std::lock_guard lock(disk_mu_);
    if (limit == 0 || disk_bytes_ <= limit) return;
    // One sort per batch: down to 7/8 of the bound, so that the next batch is an eighth of
    // the bound of writes away.
    const std::uint64_t target = limit - limit / 8;
    std::vector<std::pair<Micros, const std::string*>> order;
    order.reserve(disk_use_.size());
    for (const auto& [key, use] : disk_use_) {
      if (key != keep) order.emplace_back(use.used, &key);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [used, key] : order) {
      if (disk_bytes_ <= target) break;
      disk_bytes_ -= disk_use_.at(*key).bytes;
      evicted.push_back(*key);
    }
    for (const auto& key : evicted) disk_use_.erase(key);
  }
  // The files go outside the lock (a batch may be thousands of unlinks). A copy written again
  // meanwhile goes too: it is counted until its next write, and its page is fetched again.
  for (const auto& key : evicted) {
    const auto nl = key.find('\n');
    std::error_code ec;
    fs::remove(cache_dir_ / key.substr(0, nl) / key.substr(nl + 1), ec);
    if (ec) log::warn("upstream page cache: cannot remove {}: {}", key, ec.message());
  }
  if (!evicted.empty()) {
    log::info(
        "upstream page cache: evicted {} disk copies beyond upstream_page_disk_cache ({} "
        "bytes)",
        evicted.size(), limit);
  }
}

std::vector<Upstreams::Listing> Upstreams::pages(std::string_view project, bool local, Micros now) {
  std::vector<Listing> out;
  for (std::size_t i = 0; i < configs_.size(); ++i) {
    if (!core::may_serve(configs_[i], project, local)) continue;
    out.push_back(page_of(i, project, now));
  }
  return out;
}

std::shared_ptr<const UpstreamPageEntry> Upstreams::remembered(const std::string& key) {
  std::lock_guard lock(mu_);
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void Upstreams::remember(const std::string& key, std::shared_ptr<const UpstreamPageEntry> entry) {
  std::lock_guard lock(mu_);
  const std::size_t node = node_cost(key, sizeof(decltype(lru_)::value_type));
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    memory_used_ -= it->second->second->cost + node;
    lru_.erase(it->second);
    by_key_.erase(it);
  }
  // A page larger than the whole bound is used for this request and not kept.
  if (entry->cost + node > memory_limit_) return;
  memory_used_ += entry->cost + node;
  lru_.emplace_front(key, std::move(entry));
  by_key_[key] = lru_.begin();
  while (memory_used_ > memory_limit_ && !lru_.empty()) {
    memory_used_ -=
        lru_.back().second->cost + node_cost(lru_.back().first, sizeof(decltype(lru_)::value_type));
    by_key_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

fs::path Upstreams::disk_path(const core::UpstreamConfig& u, std::string_view project) const {
  // Upstream names are [a-z0-9-] and normalized project names [a-z0-9-]: safe as file names.
  return cache_dir_ / u.name / std::string(project);
}

std::shared_ptr<const UpstreamPageEntry> Upstreams::read_disk(const core::UpstreamConfig& u,
                                                              std::string_view project) const {
  auto text = read_small_file(disk_path(u, project), core::kMaxUpstreamPageBytes + 4096);
  if (!text) return nullptr;
  return parse_copy(u, project, *text);
}

std::shared_ptr<UpstreamPageEntry> Upstreams::parse_copy(const core::UpstreamConfig& u,
                                                         std::string_view project,
                                                         std::string_view text) const {
  if (!text.starts_with(kDiskMagic)) return nullptr;
  std::string_view rest = text.substr(kDiskMagic.size());
  const auto end = rest.find("\n\n");
  if (end == std::string_view::npos) return nullptr;
  const std::string_view head = rest.substr(0, end + 1);
  const std::string_view body = rest.substr(end + 2);
  auto entry = std::make_shared<UpstreamPageEntry>();
  std::string content_type;
  std::string url;
  for (const auto line : split(head, '\n')) {
    const auto colon = line.find(": ");
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = line.substr(colon + 2);
    if (name == "status") {
      entry->found = value == "200";
    } else if (name == "content-type") {
      content_type = value;
    } else if (name == "etag") {
      entry->etag = value;
    } else if (name == "last-modified") {
      entry->last_modified = value;
    } else if (name == "url") {
      url = value;
    } else if (name == "validated") {
      Micros v = 0;
      std::from_chars(value.data(), value.data() + value.size(), v);
      entry->validated = v;
    }
  }
  if (entry->found) {
    auto page = parse_page(content_type, body, url.empty() ? page_url(u, project) : url);
    if (!page) return nullptr;
    entry->page = std::move(*page);
  }
  entry->page.name = std::string(project);
  entry->cost = cost_of(*entry);
  return entry;
}

std::string Upstreams::write_disk(const core::UpstreamConfig& u, std::string_view project,
                                  const UpstreamPageEntry& entry, std::string_view url,
                                  std::string_view content_type, std::string_view body) {
  std::string out(kDiskMagic);
  put_line(out, "status", entry.found ? "200" : "404");
  put_line(out, "url", url);
  put_line(out, "content-type", content_type);
  put_line(out, "etag", entry.etag);
  put_line(out, "last-modified", entry.last_modified);
  put_line(out, "validated", std::to_string(entry.validated));
  out += '\n';
  out += body;
  store_copy(u, project, out);
  return out;
}

void Upstreams::store_copy(const core::UpstreamConfig& u, std::string_view project,
                           const std::string& text) {
  if (auto st = write_file_atomic(disk_path(u, project), text); !st) {
    // The memory copy still serves; the next fetch tries again.
    log::warn("upstream {}: cannot write the cached page of {}: {}", u.name, project,
              st.error().message);
    return;
  }
  const std::string key = u.name + '\n' + std::string(project);
  note_disk_use(key, now_micros(), on_disk(text.size()));
  trim_disk(key);
}

Upstreams::Listing Upstreams::page_of(std::size_t index, std::string_view project, Micros now) {
  const core::UpstreamConfig& u = configs_[index];
  UpstreamCounters& counters = *counters_[index];
  Listing listing;
  listing.upstream = &u;
  const std::string key = u.name + '\n' + std::string(project);
  const Micros ttl = static_cast<Micros>(u.metadata_ttl.count()) * 1'000'000;

  auto cached = remembered(key);
  if (!cached) {
    cached = read_disk(u, project);
    if (cached) {
      note_known(index, project, *cached);
      remember(key, cached);
    }
  }
  if (cached) note_disk_use(key, now, std::nullopt);
  if (cached && now - cached->validated < ttl) {
    counters.hits.fetch_add(1, std::memory_order_relaxed);
    listing.entry = std::move(cached);
    return listing;
  }

  // Concurrent misses of one page share one fetch: the first asks, the others wait for its
  // answer (counted as hits: they cost the upstream nothing).
  std::shared_ptr<InFlight> flight;
  {
    std::unique_lock lock(mu_);
    auto [it, first] = in_flight_.try_emplace(key);
    if (!first) {
      flight = it->second;
      ++flight->waiters;
      flight->cv.wait(lock, [&] { return flight->done; });
      counters.hits.fetch_add(1, std::memory_order_relaxed);
      return flight->result;
    }
    it->second = flight = std::make_shared<InFlight>();
  }
  counters.misses.fetch_add(1, std::memory_order_relaxed);
  listing = shared_ ? fetch_shared(index, project, now, std::move(cached))
                    : fetch_page(index, project, now, std::move(cached));
  {
    std::lock_guard lock(mu_);
    flight->result = listing;
    flight->done = true;
    in_flight_.erase(key);
  }
  flight->cv.notify_all();
  return listing;
}

Upstreams::Listing Upstreams::fetch_shared(std::size_t index, std::string_view project, Micros now,
                                           std::shared_ptr<const UpstreamPageEntry> cached) {
  const core::UpstreamConfig& u = configs_[index];
  const std::string key = u.name + '\n' + std::string(project);
  const Micros ttl = static_cast<Micros>(u.metadata_ttl.count()) * 1'000'000;
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(u.page_timeout);
  // Another server's fetch is waited for as long as a fetch may take, then this one fetches.
  const Micros give_up = now_micros() + timeout.count() + 1'000'000;
  bool from_shared = false;
  bool waited = false;
  for (;;) {
    const Micros at = now_micros();
    auto look = shared_->look(key, now - ttl, at + timeout.count() + 5'000'000, at);
    if (!look) {
      // The catalog does not answer: this server fetches alone (its pages stay its own).
      log::warn("upstream {}: shared page of {} not looked up: {}", u.name, project,
                look.error().message);
      return fetch_page(index, project, now, std::move(cached));
    }
    // The copy's validation time is the catalog's: a server that had the upstream confirm
    // the page (304) moves it without rewriting the text. A copy is read only when it is
    // newer than this server's, so waiting on another server's fetch parses nothing.
    if (look->copy && (!cached || look->copy->validated > cached->validated)) {
      if (auto theirs = parse_copy(u, project, look->copy->text)) {
        theirs->validated = std::max(theirs->validated, look->copy->validated);
        store_copy(u, project, look->copy->text);
        note_known(index, project, *theirs);
        remember(key, theirs);
        cached = std::move(theirs);
        from_shared = true;
      }
    } else if (look->copy && cached && look->copy->validated == cached->validated) {
      from_shared = true;
    }
    if (cached && now - cached->validated < ttl) {
      Listing listing;
      listing.upstream = &u;
      listing.entry = std::move(cached);
      return listing;
    }
    if (look->fetch && waited) {
      // The fetch this server waited for ended without a fresh copy: the upstream failed that
      // server just now. The stale copy (if any) is served as a failed fetch serves it,
      // rather than each server trying in turn.
      if (auto st = shared_->release(key); !st) {
        log::warn("upstream {}: shared page of {} not released: {}", u.name, project,
                  st.error().message);
      }
      return failed_listing(
          u,
          make_error(Errc::upstream, u.name + " did not answer another server for " +
                                         std::string(project) + " just now"),
          std::move(cached), now);
    }
    if (look->fetch) {
      std::string copy;
      bool confirmed = false;
      Listing listing = fetch_page(index, project, now, cached, &copy, &confirmed);
      Status shared = ok_status();
      if (!copy.empty()) {
        shared = shared_->put(key, catalog::SharedPages::Copy{std::move(copy), now});
      } else if (confirmed && from_shared) {
        shared = shared_->renew(key, now);
      } else {
        shared = shared_->release(key);
      }
      if (!shared) {
        log::warn("upstream {}: shared page of {} not updated: {}", u.name, project,
                  shared.error().message);
      }
      return listing;
    }
    if (now_micros() >= give_up) {
      log::warn("upstream {}: the page of {} another server fetches did not come; fetching it",
                u.name, project);
      return fetch_page(index, project, now, std::move(cached));
    }
    waited = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Upstreams::Listing Upstreams::fetch_page(std::size_t index, std::string_view project, Micros now,
                                         std::shared_ptr<const UpstreamPageEntry> cached,
                                         std::string* copy, bool* confirmed) {
  const core::UpstreamConfig& u = configs_[index];
  UpstreamCounters& counters = *counters_[index];
  Listing listing;
  listing.upstream = &u;
  const std::string key = u.name + '\n' + std::string(project);

  FetchRequest req;
  req.url = page_url(u, project);
  req.headers.emplace_back("Accept", std::string(kUpstreamAccept));
  add_credentials(u, req);
  if (cached && !cached->etag.empty()) req.headers.emplace_back("If-None-Match", cached->etag);
  if (cached && !cached->last_modified.empty()) {
    req.headers.emplace_back("If-Modified-Since", cached->last_modified);
  }
  req.max_bytes = core::kMaxUpstreamPageBytes;
  req.deadline = u.page_timeout;

  const auto fail = [&](Error e) {
    counters.errors.fetch_add(1, std::memory_order_relaxed);
    log::warn("upstream {}: {}", u.name, e.message);
    return failed_listing(u, std::move(e), std::move(cached), now);
  };

  auto got = fetcher_.fetch(req);
  if (!got) return fail(got.error());
  counters.bytes.fetch_add(got->body_bytes, std::memory_order_relaxed);
  const int status = got->status;
  if (status == 304 && cached) {
    if (confirmed != nullptr) *confirmed = true;
    auto renewed = std::make_shared<UpstreamPageEntry>(*cached);
    renewed->validated = now;
    remember(key, renewed);
    listing.entry = std::move(renewed);
    return listing;
  }
  auto entry = std::make_shared<UpstreamPageEntry>();
  entry->validated = now;
  entry->etag = std::string(got->header("etag"));
  entry->last_modified = std::string(got->header("last-modified"));
  if (status == 404 || status == 410) {
    entry->found = false;
  } else if (status == 200) {
    auto page =
        parse_page(got->header("content-type"), got->body, got->url.empty() ? req.url : got->url);
    if (!page) {
      return fail(make_error(Errc::upstream, "the page of " + std::string(project) + " from " +
                                                 u.name +
                                                 " cannot be read: " + page.error().message));
    }
    entry->page = std::move(*page);
  } else {
    return fail(make_error(Errc::upstream, u.name + " answered " + std::to_string(status) +
                                               " for " + std::string(project)));
  }
  entry->page.name = std::string(project);
  entry->cost = cost_of(*entry);
  std::string text = write_disk(u, project, *entry, got->url.empty() ? req.url : got->url,
                                got->header("content-type"), entry->found ? got->body : "");
  if (copy != nullptr) *copy = std::move(text);
  note_known(index, project, *entry);
  remember(key, entry);
  listing.entry = std::move(entry);
  return listing;
}

std::size_t Upstreams::index_of(const core::UpstreamConfig& upstream) const {
  return static_cast<std::size_t>(&upstream - configs_.data());
}

// The fetcher sends them only to the upstream's own scheme, host and port: a file its page
// links on another host, or a redirect there, never receives them.
void Upstreams::add_credentials(const core::UpstreamConfig& u, FetchRequest& req) const {
  if (!u.username.empty()) req.credentials = FetchCredentials{u.url, u.username, u.password};
}

Result<std::optional<core::UpstreamFile>> Upstreams::listed_file(
    const core::UpstreamConfig& upstream, std::string_view project, std::string_view filename,
    std::string_view sha256, bool local, Micros now) {
  if (!core::may_serve(upstream, project, local)) return std::optional<core::UpstreamFile>{};
  Listing listing = page_of(index_of(upstream), project, now);
  if (!listing.entry) {
    return listing.error ? *listing.error : make_error(Errc::upstream, "no page");
  }
  for (const auto& f : listing.entry->page.files) {
    if (f.filename == filename && f.sha256 == sha256 &&
        !core::in_cooldown(f, upstream.cooldown_days, now)) {
      return std::optional<core::UpstreamFile>{f};
    }
  }
  return std::optional<core::UpstreamFile>{};
}

Result<FetchResponse> Upstreams::fetch_file(
    const core::UpstreamConfig& upstream, std::string url, std::uint64_t max_bytes,
    std::function<Status(std::string_view)> sink,
    std::function<Status(int, const std::vector<std::pair<std::string, std::string>>&)> on_head) {
  UpstreamCounters& counters = *counters_[index_of(upstream)];
  FetchRequest req;
  req.url = std::move(url);
  add_credentials(upstream, req);
  req.max_bytes = max_bytes;
  req.deadline = {};  // a wheel may take minutes; the fetcher's minimum transfer rate applies
  req.sink = std::move(sink);
  req.on_head = std::move(on_head);
  auto got = fetcher_.fetch(req);
  if (!got) {
    counters.errors.fetch_add(1, std::memory_order_relaxed);
    return got;
  }
  counters.bytes.fetch_add(got->body_bytes, std::memory_order_relaxed);
  return got;
}

std::size_t Upstreams::waiting_for_fetches() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, flight] : in_flight_) n += flight->waiters;
  return n;
}

bool Upstreams::use_to_record(std::string_view sha256, Micros now) {
  constexpr Micros kOncePer = 60'000'000;
  constexpr std::size_t kMaxRemembered = 100'000;
  std::lock_guard lock(mu_);
  if (uses_recorded_.size() >= kMaxRemembered) uses_recorded_.clear();
  auto [it, inserted] = uses_recorded_.try_emplace(std::string(sha256), now);
  if (inserted) return true;
  if (now - it->second < kOncePer) return false;
  it->second = now;
  return true;
}

UpstreamPageTrim trim_upstream_page_copies(const fs::path& cache_dir, std::uint64_t limit) {
  struct Copy {
    Micros written = 0;
    std::uint64_t bytes = 0;
    fs::path path;
  };
  std::vector<Copy> copies;
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator up(cache_dir, ec), end; !ec && up != end; up.increment(ec)) {
    std::error_code inner;
    for (fs::directory_iterator it(up->path(), inner); !inner && it != end; it.increment(inner)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      const std::uint64_t bytes = on_disk(static_cast<std::uint64_t>(st.st_size));
      copies.push_back(Copy{static_cast<Micros>(st.st_mtim.tv_sec) * 1'000'000 +
                                static_cast<Micros>(st.st_mtim.tv_nsec / 1000),
                            bytes, it->path()});
      total += bytes;
    }
  }
  UpstreamPageTrim out;
  if (limit == 0 || total <= limit) return out;
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.written < b.written; });
  const std::uint64_t target = limit - limit / 8;
  for (const auto& c : copies) {
    if (total <= target) break;
    if (!fs::remove(c.path, ec)) continue;
    total -= c.bytes;
    ++out.removed;
    out.removed_bytes += c.bytes;
  }
  return out;
}

// ---- file downloads ----------------------------------------------------------------------

FileDownload::FileDownload(std::string sha256, std::string shown, std::shared_ptr<UniqueFd> reader,
                           std::optional<std::uint64_t> listed_size)
    : sha256_(std::move(sha256)), shown_(std::move(shown)), reader_(std::move(reader)) {
  progress_.length = listed_size;
}

FileDownload::Progress FileDownload::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

Error FileDownload::error() const {
  std::lock_guard lock(mu_);
  return error_ ? *error_ : make_error(Errc::internal, "the download has not failed");
}

std::uint64_t FileDownload::wait(std::uint64_t seen, std::function<void()> wake) {
  std::lock_guard lock(mu_);
  if (progress_.version != seen) return 0;
  const std::uint64_t ticket = next_ticket_++;
  waiters_.emplace_back(ticket, std::move(wake));
  return ticket;
}

void FileDownload::cancel(std::uint64_t ticket) {
  std::lock_guard lock(mu_);
  std::erase_if(waiters_, [ticket](const auto& w) { return w.first == ticket; });
}

void FileDownload::changed(std::unique_lock<std::mutex>& lock) {
  ++progress_.version;
  auto waiters = std::move(waiters_);
  waiters_.clear();
  // Under the lock: once cancel() has returned, its wake is neither running nor called.
  for (auto& [ticket, wake] : waiters) wake();
  lock.unlock();
}

void FileDownload::answered(std::optional<std::uint64_t> length) {
  std::unique_lock lock(mu_);
  progress_.answered = true;
  if (length) progress_.length = length;
  changed(lock);
}

void FileDownload::wrote(std::uint64_t bytes) {
  std::unique_lock lock(mu_);
  progress_.written += bytes;
  changed(lock);
}

void FileDownload::end(State state, std::optional<Error> error) {
  std::unique_lock lock(mu_);
  progress_.state = state;
  error_ = std::move(error);
  changed(lock);
}

Result<StartedDownload> Upstreams::download_file(FileFetch fetch, const store::BlobStore& store,
                                                 catalog::Catalog* catalog) {
  std::lock_guard lock(downloads_mu_);
  if (auto it = downloads_.find(fetch.sha256); it != downloads_.end()) {
    return StartedDownload{it->second, {}};
  }
  // Looked at under the lock: a download leaves the table only once its file is stored, so
  // a file neither downloading nor stored here is fetched once.
  if (store.contains(fetch.sha256)) return StartedDownload{};
  auto temp = store.create_temp();
  if (!temp) return temp.error();
  auto reader = std::make_shared<UniqueFd>(::open(temp->path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!reader->valid()) return errno_error(errno, "open " + temp->path().string());
  auto download =
      std::make_shared<FileDownload>(fetch.sha256, fetch.shown, reader, fetch.listed_size);
  downloads_.emplace(fetch.sha256, download);
  auto owned = std::make_shared<store::TempFile>(std::move(*temp));
  StartedDownload out;
  out.download = download;
  out.run = [this, fetch = std::move(fetch), download, owned, &store, catalog] {
    run_download(fetch, download, *owned, store, catalog);
  };
  return out;
}

std::size_t Upstreams::downloads_running() const {
  std::lock_guard lock(downloads_mu_);
  return downloads_.size();
}

void Upstreams::run_download(const FileFetch& fetch, const std::shared_ptr<FileDownload>& download,
                             store::TempFile& temp, const store::BlobStore& store,
                             catalog::Catalog* catalog) {
  const core::UpstreamConfig& upstream = *fetch.upstream;
  const std::string& shown = fetch.shown;
  const std::string& want = fetch.sha256;
  const auto leave = [&] {
    std::lock_guard lock(downloads_mu_);
    downloads_.erase(want);
  };
  const auto fail = [&](Error e) {
    // Nothing stored: the temp file goes (its readers keep their descriptor).
    log::warn("req={} upstream {}: {}", fetch.request_id, upstream.name, e.message);
    { auto drop = std::move(temp); }
    leave();
    download->end(FileDownload::State::failed, std::move(e));
  };
  bool head_seen = false;
  auto got = fetch_file(
      upstream, fetch.url, fetch.max_bytes,
      [&](std::string_view chunk) -> Status {
        if (auto st = temp.write(chunk.data(), chunk.size()); !st) return st;
        download->wrote(chunk.size());
        return ok_status();
      },
      [&](int status, const std::vector<std::pair<std::string, std::string>>& headers) -> Status {
        head_seen = true;
        if (status != 200) {
          return make_error(Errc::upstream, "upstream " + upstream.name + " answered " +
                                                std::to_string(status) + " for " + shown);
        }
        std::optional<std::uint64_t> length;
        for (const auto& [name, value] : headers) {
          if (name == "content-length") length = parse_u64(value);
        }
        download->answered(length);
        return ok_status();
      });
  if (!got) {
    if (got.error().code == Errc::upstream && head_seen) return fail(got.error());
    // A storage failure keeps its own code (507, 500); the upstream's are 502.
    const Errc code = got.error().code == Errc::storage_full || got.error().code == Errc::io
                          ? got.error().code
                          : Errc::upstream;
    return fail(
        make_error(code, "upstream " + upstream.name + ": " + shown + ": " + got.error().message));
  }
  // A fetch that succeeded had a 200 answer: on_head above refuses any other.
  if (auto st = temp.finish(); !st) return fail(st.error());
  if (temp.sha256() != want) {
    return fail(make_error(Errc::upstream, "upstream " + upstream.name + " sent " + shown +
                                               " with sha256 " + temp.sha256() +
                                               ", but its page lists sha256 " + want +
                                               ": refused, nothing stored"));
  }
  const std::uint64_t size = temp.size();
  auto committed = store.commit(std::move(temp));
  if (!committed) return fail(committed.error());
  // Recorded so that gc keeps it and backup and fsck cover it. The blob is published either
  // way: a failure here costs a fetch after the next gc, not this download.
  std::string note =
      "upstream " + upstream.name + ": stored " + shown + " (" + std::to_string(size) + " bytes)";
  if (catalog != nullptr) {
    const Micros stored_at = now_micros();
    if (auto st = catalog->record_upstream_blob(
            catalog::UpstreamBlob{want, upstream.name, shown, size, stored_at, stored_at});
        !st) {
      note = "upstream " + upstream.name + ": stored " + shown +
             " but could not record it: " + st.error().message;
    } else if (const std::uint64_t limit = file_cache_limit(); limit != 0) {
      // The file cache's bound: the least recently used others go (this one stays, it is
      // being answered). A failure costs only the bound, not this download.
      if (auto evicted = evict_upstream_files(*catalog, store, limit, want); !evicted) {
        log::warn("req={} upstream {}: evicting from the file cache failed: {}", fetch.request_id,
                  upstream.name, evicted.error().message);
      }
    }
  }
  log::info("req={} {}", fetch.request_id, note);
  leave();
  download->end(FileDownload::State::committed);
}

Result<UpstreamEviction> evict_upstream_files(catalog::Catalog& catalog,
                                              const store::BlobStore& store, std::uint64_t limit,
                                              std::string_view keep) {
  auto blobs = catalog.upstream_blobs();
  if (!blobs) return blobs.error();
  UpstreamEviction out;
  for (const auto& b : *blobs) out.kept_bytes += b.size;
  if (out.kept_bytes <= limit) return out;
  const auto used = [](const catalog::UpstreamBlob& b) {
    return std::max(b.last_used_at, b.stored_at);
  };
  std::stable_sort(blobs->begin(), blobs->end(),
                   [&](const auto& a, const auto& b) { return used(a) < used(b); });
  for (const auto& b : *blobs) {
    if (out.kept_bytes <= limit) break;
    if (b.sha256 == keep) continue;
    // The file as it is now, before the row goes: a blob published again after this (a local
    // upload of the same bytes) is a new file, which remove_unless_replaced() leaves alone.
    auto stored = store.stat(b.sha256);
    if (!stored) return stored.error();
    const bool exists = stored->has_value();
    auto shared = catalog.forget_upstream_blob(b.sha256);
    if (!shared) return shared.error();
    if (!*shared && exists) {
      auto removed = store.remove_unless_replaced(**stored);
      if (!removed) return removed.error();
    }
    out.kept_bytes -= b.size;
    out.evicted_bytes += b.size;
    out.evicted.push_back(b);
    log::info("upstream {}: evicted {} ({} bytes) from the file cache{}", b.upstream, b.filename,
              b.size, *shared ? "; its blob stays, a local file has it" : "");
  }
  return out;
}

}  // namespace wf::handlers
