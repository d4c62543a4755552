#include "wheelforge/handlers/upstreams.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>

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

std::size_t cost_of(const UpstreamPageEntry& e) {
  std::size_t n = sizeof(UpstreamPageEntry) + e.etag.size() + e.last_modified.size() + 64;
  for (const auto& f : e.page.files) {
    n += sizeof(core::UpstreamFile) + f.filename.size() + f.url.size() + f.sha256.size() +
         f.metadata_sha256.size() + (f.requires_python ? f.requires_python->size() : 0) +
         (f.yanked ? f.yanked->size() : 0);
  }
  return n;
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

}  // namespace

Upstreams::Upstreams(std::vector<core::UpstreamConfig> configs, Fetcher& fetcher,
                     fs::path cache_dir, std::uint64_t memory_bytes)
    : configs_(std::move(configs)),
      fetcher_(fetcher),
      cache_dir_(std::move(cache_dir)),
      memory_limit_(memory_bytes) {
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
  return memory_used_;
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
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    memory_used_ -= it->second->second->cost;
    lru_.erase(it->second);
    by_key_.erase(it);
  }
  // A page larger than the whole bound is used for this request and not kept.
  if (entry->cost > memory_limit_) return;
  memory_used_ += entry->cost;
  lru_.emplace_front(key, std::move(entry));
  by_key_[key] = lru_.begin();
  while (memory_used_ > memory_limit_ && !lru_.empty()) {
    memory_used_ -= lru_.back().second->cost;
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
  if (!text || !text->starts_with(kDiskMagic)) return nullptr;
  std::string_view rest = std::string_view(*text).substr(kDiskMagic.size());
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

void Upstreams::write_disk(const core::UpstreamConfig& u, std::string_view project,
                           const UpstreamPageEntry& entry, std::string_view url,
                           std::string_view content_type, std::string_view body) const {
  std::string out(kDiskMagic);
  put_line(out, "status", entry.found ? "200" : "404");
  put_line(out, "url", url);
  put_line(out, "content-type", content_type);
  put_line(out, "etag", entry.etag);
  put_line(out, "last-modified", entry.last_modified);
  put_line(out, "validated", std::to_string(entry.validated));
  out += '\n';
  out += body;
  if (auto st = write_file_atomic(disk_path(u, project), out); !st) {
    // The memory copy still serves; the next fetch tries again.
    log::warn("upstream {}: cannot write the cached page of {}: {}", u.name, project,
              st.error().message);
  }
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
  listing = fetch_page(index, project, now, std::move(cached));
  {
    std::lock_guard lock(mu_);
    flight->result = listing;
    flight->done = true;
    in_flight_.erase(key);
  }
  flight->cv.notify_all();
  return listing;
}

Upstreams::Listing Upstreams::fetch_page(std::size_t index, std::string_view project, Micros now,
                                         std::shared_ptr<const UpstreamPageEntry> cached) {
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
    listing.error = std::move(e);
    if (cached) {
      listing.stale_age = std::chrono::seconds((now - cached->validated) / 1'000'000);
      listing.entry = std::move(cached);
    }
    return listing;
  };

  auto got = fetcher_.fetch(req);
  if (!got) return fail(got.error());
  counters.bytes.fetch_add(got->body_bytes, std::memory_order_relaxed);
  const int status = got->status;
  if (status == 304 && cached) {
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
  write_disk(u, project, *entry, got->url.empty() ? req.url : got->url, got->header("content-type"),
             entry->found ? got->body : "");
  note_known(index, project, *entry);
  remember(key, entry);
  listing.entry = std::move(entry);
  return listing;
}

std::size_t Upstreams::index_of(const core::UpstreamConfig& upstream) const {
  return static_cast<std::size_t>(&upstream - configs_.data());
}

void Upstreams::add_credentials(const core::UpstreamConfig& u, FetchRequest& req) const {
  if (!u.username.empty()) {
    req.headers.emplace_back("Authorization",
                             "Basic " + base64_encode(u.username + ":" + u.password));
  }
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

Result<FetchResponse> Upstreams::fetch_file(const core::UpstreamConfig& upstream, std::string url,
                                            std::uint64_t max_bytes,
                                            std::function<Status(std::string_view)> sink) {
  UpstreamCounters& counters = *counters_[index_of(upstream)];
  FetchRequest req;
  req.url = std::move(url);
  add_credentials(upstream, req);
  req.max_bytes = max_bytes;
  req.deadline = {};  // a wheel may take minutes; the fetcher's minimum transfer rate applies
  req.sink = std::move(sink);
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
    store::StoredBlob stored{b.sha256, store.blob_path(b.sha256), 0, 0, b.size, 0};
    struct stat st {};
    const bool exists = ::lstat(stored.path.c_str(), &st) == 0;
    stored.dev = st.st_dev;
    stored.ino = st.st_ino;
    auto shared = catalog.forget_upstream_blob(b.sha256);
    if (!shared) return shared.error();
    if (!*shared && exists) {
      auto removed = store.remove_unless_replaced(stored);
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
