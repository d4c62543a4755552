#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "command_support.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/auth/oidc.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/handlers/upstreams.hpp"
#include "wheelforge/http/fetcher.hpp"
#include "wheelforge/ingest/ingestor.hpp"
#include "wheelforge/render/admin.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace detail {

int report(const Error& error, int exit_status) {
  std::cerr << "error: " << error.message << "\n";
  return exit_status;
}

Result<store::BlobStoreOptions> blob_store_options(
    const Settings& settings, std::shared_ptr<store::RequestObserver> observer) {
  store::BlobStoreOptions options;
  options.cache_bytes = settings.blob_cache;
  if (settings.blob_store == "file") return options;
  const auto url = parse_blob_store_url(settings.blob_store);
  if (!url) {
    return make_error(Errc::invalid, "blob_store: expected \"file\" or s3://BUCKET/PREFIX, got '" +
                                         sanitize_for_log(settings.blob_store) + "'");
  }
  const S3Settings& s3 = settings.s3;
  store::S3Config config;
  config.endpoint =
      s3.endpoint.empty() ? "https://s3." + s3.region + ".amazonaws.com" : s3.endpoint;
  config.region = s3.region;
  config.addressing =
      s3.addressing == "virtual" ? store::Addressing::virtual_host : store::Addressing::path;
  config.bucket = url->bucket;
  config.prefix = url->prefix;
  config.access_key_id = s3.access_key_id;
  config.secret_access_key = s3.secret_access_key;
  config.session_token = s3.session_token;
  config.observer = std::move(observer);
  auto objects = store::open_s3_store(std::move(config));
  if (!objects) return objects.error();
  options.objects = std::shared_ptr<store::ObjectStore>(std::move(*objects));
  return options;
}

Result<DataDir> open_data_dir(const Settings& settings, const StoreObservers& observers) {
  std::error_code ec;
  std::filesystem::create_directories(settings.data_dir, ec);
  if (ec) return make_error(Errc::io, "create " + settings.data_dir.string() + ": " + ec.message());
  auto options = blob_store_options(settings, observers.objects);
  if (!options) return options.error();
  auto store = store::BlobStore::open(settings.data_dir, std::move(*options));
  if (!store) return store.error();
  auto catalog = catalog::open_catalog(settings.catalog, settings.data_dir);
  if (!catalog) return catalog.error();
  return DataDir{catalog::observe_catalog(std::move(*catalog),
                                          std::string(catalog::catalog_backend(settings.catalog)),
                                          observers.catalog),
                 std::move(*store)};
}

catalog::Actor local_actor() {
  catalog::Actor a;
  a.origin = "cli";
  const passwd* pw = ::getpwuid(::geteuid());
  a.address = std::string("local:") + (pw != nullptr ? pw->pw_name : std::to_string(::geteuid()));
  return a;
}

bool is_distribution(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(".whl") || name.ends_with(".tar.gz");
}

ingest::Limits ingest_limits(const Settings& settings) {
  ingest::Limits limits;
  limits.max_file_size = settings.max_upload_size;
  limits.max_inflated_size = settings.max_inflated_size;
  limits.max_compression_ratio = settings.max_compression_ratio;
  limits.max_archive_members = settings.max_archive_members;
  return limits;
}

}  // namespace detail

using detail::ingest_limits;
using detail::is_distribution;
using detail::local_actor;
using detail::open_data_dir;
using detail::report;

int ingest(const Settings& settings, const std::vector<std::filesystem::path>& paths) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  ingest::Ingestor ingestor(*dir->store, *dir->catalog, ingest_limits(settings));

  std::vector<std::filesystem::path> files;
  int rejected = 0;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> found;
      for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file() && is_distribution(it->path())) found.push_back(it->path());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::exists(p, ec)) {
      files.push_back(p);
    } else {
      std::cerr << "rejected " << p.string() << ": no such file or directory\n";
      ++rejected;
    }
  }
  int stored = 0;
  int identical = 0;
  int restored = 0;
  // Batches share their syncs and their catalog transaction (see Ingestor::ingest_paths);
  // bounded in files (open temp files) and bytes (data written but not yet flushed).
  constexpr std::size_t kBatchFiles = 128;
  constexpr std::uintmax_t kBatchBytes = 512ULL << 20U;
  std::vector<std::filesystem::path> batch;
  std::uintmax_t batch_bytes = 0;
  const auto run_batch = [&] {
    const auto results = ingestor.ingest_paths(batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& f = batch[i];
      const auto& result = results[i];
      if (!result) {
        std::cerr << "rejected " << f.string() << ": " << result.error().message << "\n";
        ++rejected;
      } else if (result->outcome == ingest::Outcome::stored) {
        std::cout << "added " << f.string() << "\n";
        ++stored;
      } else if (result->outcome == ingest::Outcome::restored) {
        std::cout << "restored " << f.string() << " (it was damaged; served again)\n";
        ++restored;
      } else {
        std::cout << "skipped " << f.string() << " (identical file already stored)\n";
        ++identical;
      }
    }
    std::cout.flush();
    batch.clear();
    batch_bytes = 0;
  };
  for (const auto& f : files) {
    std::error_code ec;
    std::uintmax_t size = std::filesystem::file_size(f, ec);
    if (ec) size = 0;  // the ingest reports why the file cannot be read
    if (!batch.empty() && (batch.size() == kBatchFiles || batch_bytes + size > kBatchBytes)) {
      run_batch();
    }
    batch.push_back(f);
    batch_bytes += size;
  }
  if (!batch.empty()) run_batch();
  std::cout << stored << " added, " << identical << " skipped, " << rejected << " rejected";
  if (restored > 0) std::cout << ", " << restored << " restored";
  std::cout << "\n";
  return rejected == 0 ? 0 : 1;
}

int token_list(const Settings& settings) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto tokens = dir->catalog->tokens();
  if (!tokens) return report(tokens.error(), 1);
  const Micros now = now_micros();
  const auto when = [](const std::optional<Micros>& t) {
    return t ? iso8601_micros(*t).substr(0, 19) + "Z" : std::string("-");
  };
  std::printf("%-5s %-7s %-20s %-8s %-21s %-14s %-21s %-21s %s\n", "ID", "SCOPE", "PROJECT",
              "STATE", "CREATED", "CREATED-BY", "EXPIRES", "LAST-USED", "DESCRIPTION");
  for (const auto& t : *tokens) {
    std::printf("%-5lld %-7s %-20s %-8s %-21s %-14s %-21s %-21s %s\n", static_cast<long long>(t.id),
                std::string(catalog::scope_name(t.scope)).c_str(), t.project.value_or("*").c_str(),
                std::string(render::token_state(t, now)).c_str(), when(t.created_at).c_str(),
                t.created_by.empty() ? "-" : t.created_by.c_str(), when(t.expires_at).c_str(),
                when(t.last_used_at).c_str(), escape_control(t.description).c_str());
  }
  return 0;
}

int token_revoke(const Settings& settings, std::int64_t id) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto revoked = dir->catalog->revoke_token(id, local_actor());
  if (!revoked) return report(revoked.error(), 1);
  std::cout << "revoked token #" << id << " (" << catalog::scope_name(revoked->scope) << ")\n";
  return 0;
}

int publisher_add(const Configuration& configuration, const std::string& project,
                  const std::string& issuer, const std::vector<std::string>& claims,
                  const std::string& description) {
  std::vector<std::pair<std::string, std::string>> fields{
      {"project", project}, {"issuer", issuer}, {"description", description}};
  for (const auto& c : claims) fields.emplace_back("claim", c);
  std::vector<std::string> issuers;
  for (const auto& i : configuration.oidc_issuers) issuers.push_back(i.name);
  auto record = auth::oidc::decode_publisher_request(fields, issuers, now_micros());
  if (!record) {
    std::cerr << "error: " << record.error().message << "\n";
    return 2;
  }
  auto dir = open_data_dir(configuration.settings);
  if (!dir) return report(dir.error(), 1);
  auto stored = dir->catalog->insert_publisher(*record, local_actor());
  if (!stored) return report(stored.error(), 1);
  std::cout << "added publisher #" << stored->id << " for project " << stored->project
            << " (issuer " << stored->issuer << ")\n";
  return 0;
}

int publisher_list(const Settings& settings, const std::optional<std::string>& project) {
  if (project && !core::is_valid_project_name(*project)) {
    std::cerr << "error: --project: '" << escape_control(*project)
              << "' is not a valid project name\n";
    return 2;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto all = dir->catalog->publishers();
  if (!all) return report(all.error(), 1);
  std::printf("%-5s %-20s %-12s %-21s %-14s %s\n", "ID", "PROJECT", "ISSUER", "CREATED",
              "CREATED-BY", "CLAIMS / DESCRIPTION");
  for (const auto& p : *all) {
    if (project && p.project != core::normalize_name(*project)) continue;
    std::string claims;
    for (const auto& [k, v] : p.claims) claims += (claims.empty() ? "" : " ") + k + "=" + v;
    if (!p.description.empty()) claims += " # " + p.description;
    std::printf("%-5lld %-20s %-12s %-21s %-14s %s\n", static_cast<long long>(p.id),
                p.project.c_str(), p.issuer.c_str(),
                (iso8601_micros(p.created_at).substr(0, 19) + "Z").c_str(),
                p.created_by.empty() ? "-" : p.created_by.c_str(), escape_control(claims).c_str());
  }
  return 0;
}

int publisher_remove(const Settings& settings, std::int64_t id) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto removed = dir->catalog->remove_publisher(id, local_actor());
  if (!removed) return report(removed.error(), 1);
  std::cout << "removed publisher #" << id << " of project " << removed->project << "\n";
  return 0;
}

int token_create(const Settings& settings, const std::string& scope,
                 const std::optional<std::string>& project, const std::string& description,
                 const std::optional<std::string>& expires) {
  const auto parsed = catalog::parse_scope(scope);
  if (!parsed) {
    std::cerr << "error: --scope must be read, upload or admin\n";
    return 2;
  }
  if (auto st = check_free_text("--description", description); !st) {
    std::cerr << "error: " << st.error().message << "\n";
    return 2;
  }
  const Micros now = now_micros();
  std::optional<Micros> expires_at;
  if (expires) {
    auto at = auth::parse_expiry(*expires, now);
    if (!at) {
      std::cerr << "error: --expires: " << at.error().message << "\n";
      return 2;
    }
    expires_at = *at;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  const std::string token = auth::generate_token();
  catalog::TokenRecord record;
  record.hash = auth::hash_token(token);
  record.scope = *parsed;
  if (project && !core::is_valid_project_name(*project)) {
    std::cerr << "error: --project: '" << *project << "' is not a valid project name\n";
    return 2;
  }
  record.project =
      project ? std::optional<std::string>(core::normalize_name(*project)) : std::nullopt;
  record.description = description;
  record.created_at = now;
  record.expires_at = expires_at;
  auto stored = dir->catalog->insert_token(record, local_actor());
  if (!stored) return report(stored.error(), 1);
  std::cerr << "created " << scope << " token #" << stored->id
            << (project ? " for project " + *project : std::string())
            << (expires_at ? ", expires " + iso8601_micros(*expires_at) : std::string()) << "\n";
  std::cout << token << std::endl;
  return 0;
}

int project_list(const Settings& settings, const std::vector<core::UpstreamConfig>& upstreams) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto contents = dir->catalog->load();
  if (!contents) return report(contents.error(), 1);
  std::map<std::string, std::size_t, std::less<>> files;
  for (const auto& f : contents->files) ++files[f.project];
  // With upstreams, a column naming those that also have each local name: the names the
  // ownership guard protects.
  std::unique_ptr<handlers::Fetcher> fetcher;
  std::unique_ptr<handlers::Upstreams> cache;
  if (!upstreams.empty()) {
    auto made = http::make_fetcher(http::FetcherConfig{});
    if (!made) return report(made.error(), 1);
    fetcher = std::move(*made);
    cache = std::make_unique<handlers::Upstreams>(
        upstreams, *fetcher, settings.data_dir / "upstream" / "pages", 16ULL << 20U);
    cache->set_page_disk_limit(settings.upstream_page_disk_cache);
  }
  if (cache) {
    std::printf("%-40s %7s %-12s %-27s %s\n", "PROJECT", "FILES", "CLAIM", "LAST UPLOAD",
                "ALSO UPSTREAM");
  } else {
    std::printf("%-40s %7s %-12s %s\n", "PROJECT", "FILES", "CLAIM", "LAST UPLOAD");
  }
  for (const auto& p : contents->projects) {
    const auto it = files.find(p.name);
    std::string also;
    if (cache) {
      // Asked as for a name that is not local, so that every upstream that could list it does.
      for (const auto& listing : cache->pages(p.name, /*local=*/false, now_micros())) {
        std::string name = listing.upstream->name;
        if (listing.entry && listing.entry->found && !listing.entry->page.files.empty()) {
          also += (also.empty() ? "" : ",") + name;
        } else if (!listing.entry && listing.error) {
          also += (also.empty() ? "" : ",") + name + "(unreachable)";
        }
      }
      if (also.empty()) also = "-";
    }
    const std::size_t count = it == files.end() ? 0 : it->second;
    if (cache) {
      std::printf("%-40s %7zu %-12s %-27s %s\n", p.name.c_str(), count,
                  core::claim_text(p.claim).c_str(), iso8601_micros(p.last_upload).c_str(),
                  also.c_str());
    } else {
      std::printf("%-40s %7zu %-12s %s\n", p.name.c_str(), count, core::claim_text(p.claim).c_str(),
                  iso8601_micros(p.last_upload).c_str());
    }
  }
  return 0;
}

int project_claim(const Settings& settings, const std::string& project,
                  const core::ProjectClaim& claim) {
  if (!core::is_valid_project_name(project)) {
    std::cerr << "error: '" << project << "' is not a valid project name\n";
    return 2;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto updated = dir->catalog->set_claim(core::normalize_name(project), claim, local_actor());
  if (!updated) return report(updated.error(), 1);
  std::cout << updated->name << ": " << core::claim_text(updated->claim) << "\n";
  return 0;
}

int yank(const Settings& settings, const std::string& project,
         const std::optional<std::string>& version, const std::optional<std::string>& filename,
         const std::optional<std::string>& reason) {
  if (version.has_value() == filename.has_value()) {
    std::cerr << "error: give a VERSION or --file FILENAME (not both)\n";
    return 2;
  }
  if (reason) {
    if (auto st = check_free_text("--reason", *reason); !st) {
      std::cerr << "error: " << st.error().message << "\n";
      return 2;
    }
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto changed = dir->catalog->set_yanked(core::normalize_name(project), version, filename, reason,
                                          local_actor());
  if (!changed) return report(changed.error(), 1);
  for (const auto& name : *changed) std::cout << (reason ? "yanked " : "unyanked ") << name << "\n";
  return 0;
}

int delete_file(const Settings& settings, const std::string& filename) {
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto deleted = dir->catalog->delete_file(filename, local_actor());
  if (!deleted) return report(deleted.error(), 1);
  std::cout << "deleted " << deleted->filename << " (the name stays reserved)\n";
  return 0;
}

int audit(const Settings& settings, const std::optional<std::string>& project,
          const std::optional<std::string>& since, std::size_t limit) {
  catalog::AuditQuery query;
  query.limit = limit;
  if (project) {
    if (!core::is_valid_project_name(*project)) {
      std::cerr << "error: --project: '" << *project << "' is not a valid project name\n";
      return 2;
    }
    query.project = core::normalize_name(*project);
  }
  if (since) {
    auto at = auth::parse_since(*since, now_micros());
    if (!at) {
      std::cerr << "error: --since: " << at.error().message << "\n";
      return 2;
    }
    query.since = *at;
  }
  auto dir = open_data_dir(settings);
  if (!dir) return report(dir.error(), 1);
  auto entries = dir->catalog->audit(query);
  if (!entries) return report(entries.error(), 1);
  std::printf("%-21s %-13s %-12s %-20s %-20s %-40s %s\n", "TIME", "ACTION", "ACTOR", "ADDRESS",
              "PROJECT", "TARGET", "DETAIL");
  for (const auto& e : *entries) {
    // Every stored value escaped: rows written before free text was checked may hold line
    // breaks or escape sequences, and each entry is one line.
    std::string actor = e.actor.label();
    if (!e.actor.token_description.empty()) actor += " (" + e.actor.token_description + ")";
    std::printf("%-21s %-13s %-12s %-20s %-20s %-40s %s\n",
                (iso8601_micros(e.at).substr(0, 19) + "Z").c_str(),
                escape_control(e.action).c_str(), escape_control(actor).c_str(),
                e.actor.address.empty() ? "-" : escape_control(e.actor.address).c_str(),
                e.project.empty() ? "-" : escape_control(e.project).c_str(),
                escape_control(e.target).c_str(), escape_control(e.detail).c_str());
  }
  return 0;
}

}  // namespace wf::app
