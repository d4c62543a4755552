// wheelforge: a private Python package index for CUDA/PyTorch extension wheels.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "wheelforge/app/app.hpp"
#include "wheelforge/app/maintenance.hpp"
#include "wheelforge/app/upstream_check.hpp"

namespace {

struct Common {
  std::optional<std::string> config;
  wf::app::Overrides overrides;

  void add_to(CLI::App* cmd, bool with_server_flags) {
    cmd->add_option("--config", config,
                    "TOML configuration file (default /etc/wheelforge/wheelforge.toml if it "
                    "exists)");
    cmd->add_option("--data-dir", overrides.data_dir, "data directory (default ./data)");
    cmd->add_option("--catalog", overrides.catalog,
                    "where the catalog lives: sqlite (DATA_DIR/wheelforge.db) or a PostgreSQL "
                    "URI postgresql://USER:PASSWORD@HOST:PORT/DBNAME (default sqlite)");
    cmd->add_option("--blob-store", overrides.blob_store,
                    "where the files live: file (DATA_DIR/blobs, the default) or "
                    "s3://BUCKET/PREFIX (the [s3] table's object store)");
    cmd->add_option("--blob-cache", overrides.blob_cache,
                    "bound on the local read cache of an S3 blob store, e.g. 2G (default 2G)");
    if (with_server_flags) {
      cmd->add_option("--listen", overrides.listen,
                      "HOST:PORT to listen on (default 127.0.0.1:8080; port 0 picks one)");
      cmd->add_option("--worker-threads", overrides.worker_threads,
                      "threads for blocking work, 1 to 64 (default 2)");
      cmd->add_option("--network-threads", overrides.network_threads,
                      "threads that serve connections, 0 to 64 (default 0: one per CPU core)");
      cmd->add_option("--read-timeout", overrides.read_timeout,
                      "deadline for request headers and each upload chunk (default 30s)");
      cmd->add_option("--first-byte-timeout", overrides.first_byte_timeout,
                      "a new connection that sends nothing this long is closed (default 10s)");
      cmd->add_option("--min-upload-rate", overrides.min_upload_rate,
                      "slowest accepted upload in bytes/s over each read timeout, e.g. 4K; "
                      "0 turns it off (default 1K)");
      cmd->add_option("--idle-timeout", overrides.idle_timeout,
                      "how long an idle keep-alive connection is kept (default 1m)");
      cmd->add_option("--max-connections", overrides.max_connections,
                      "connections served at once (default 1024)");
      cmd->add_option("--max-connections-per-client", overrides.max_connections_per_client,
                      "connections served at once from one client address, an IPv6 /64 "
                      "(default 256)");
      cmd->add_option("--trusted-proxies", overrides.trusted_proxies,
                      "load balancers whose forwarding header names the client: addresses or "
                      "CIDR ranges separated by commas, e.g. 10.0.0.0/8,::1 (default: none)");
      cmd->add_option("--forwarded-header", overrides.forwarded_header,
                      "the header trusted proxies write: x-forwarded-for or forwarded "
                      "(default x-forwarded-for)");
      cmd->add_option("--shutdown-grace", overrides.shutdown_grace,
                      "how long a stop waits for in-flight requests (default 10s)");
      cmd->add_option("--access-log", overrides.access_log,
                      "log one line per request: true or false (default true)");
      cmd->add_option("--private", overrides.private_reads,
                      "every read needs a read token: true or false (default false)");
      cmd->add_option("--file-serving", overrides.file_serving,
                      "with an S3 blob store: redirect (302 to a presigned URL, the default) "
                      "or proxy (the server sends the bytes)");
      cmd->add_option("--tls-cert", overrides.tls_cert, "PEM certificate chain: serve HTTPS");
      cmd->add_option("--tls-key", overrides.tls_key, "PEM private key for --tls-cert");
      cmd->add_option("--base-url", overrides.base_url,
                      "the URL this server is reached at, for the build runner's {server} "
                      "(default: from --listen)");
      cmd->add_option("--upstream-page-cache", overrides.upstream_page_cache,
                      "memory for upstream project pages, e.g. 64M (default 64M)");
    }
    cmd->add_option("--upstream-page-disk-cache", overrides.upstream_page_disk_cache,
                    "disk for copies of upstream project pages, least recently used "
                    "evicted first, e.g. 1G; 0: no bound (default 1G)");
    cmd->add_option("--upstream-file-cache", overrides.upstream_file_cache,
                    "bytes of files kept from upstream indexes, least recently used evicted "
                    "first, e.g. 20G; 0: no bound (default 0)");
    cmd->add_option("--max-upload-size", overrides.max_upload_size,
                    "largest accepted file, e.g. 8G (default 8G)");
    cmd->add_option("--max-inflated-size", overrides.max_inflated_size,
                    "largest total of the member sizes an archive declares, e.g. 16G "
                    "(default 16G)");
    cmd->add_option("--max-compression-ratio", overrides.max_compression_ratio,
                    "largest ratio of an archive's inflated size to its size, judged above "
                    "16 MiB inflated (default 100)");
    cmd->add_option("--max-archive-members", overrides.max_archive_members,
                    "most members in an archive (default 200000)");
  }

  [[nodiscard]] std::optional<std::filesystem::path> config_file() const {
    return wf::app::resolve_config_file(config);
  }

  /// The whole configuration, or nullopt after printing every problem (one per line).
  [[nodiscard]] std::optional<wf::app::Configuration> configuration() const {
    auto checked = wf::app::check_configuration(config_file(), overrides);
    for (const auto& p : checked.problems) std::cerr << "error: " << p << "\n";
    return std::move(checked.config);
  }

  [[nodiscard]] std::optional<wf::app::Settings> settings() const {
    auto c = configuration();
    if (!c) return std::nullopt;
    return std::move(c->settings);
  }
};

/// Parses a --min-age value; prints the problem and returns nullopt when invalid.
std::optional<std::chrono::seconds> min_age_option(const std::string& text) {
  auto d = wf::app::parse_duration(text);
  if (!d)
    std::cerr << "error: --min-age: expected a duration such as 0, 30m or 1h, got '" << text
              << "'\n";
  return d;
}

int run(int argc, char** argv) {
  CLI::App app{"wheelforge: a private Python package index for CUDA/PyTorch extension wheels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "wheelforge 0.1.0");

  Common serve_opts;
  auto* serve = app.add_subcommand("serve", "run the index server");
  serve_opts.add_to(serve, true);

  Common runner_opts;
  auto* runner_cmd = app.add_subcommand(
      "runner",
      "run build jobs from the catalog's job queue without serving (runners on many hosts)");
  runner_opts.add_to(runner_cmd, false);

  Common ingest_opts;
  std::vector<std::string> ingest_paths;
  auto* ingest = app.add_subcommand("ingest", "import wheel and sdist files or directory trees");
  ingest_opts.add_to(ingest, false);
  ingest->add_option("paths", ingest_paths, "files or directories")->required();

  auto* token = app.add_subcommand("token", "manage API tokens");
  token->require_subcommand(1);
  Common token_opts;
  std::string scope;
  std::optional<std::string> project;
  std::string description;
  auto* token_create =
      token->add_subcommand("create", "create a token; prints it on the last line");
  token_opts.add_to(token_create, false);
  token_create->add_option("--scope", scope, "read, upload or admin")->required();
  token_create->add_option("--project", project, "limit an upload token to one project");
  token_create->add_option("--description", description, "a note shown in token listings");
  std::optional<std::string> expires;
  token_create->add_option("--expires", expires,
                           "the token stops working after a duration (90d, 12h, 30m, 2w) or "
                           "at a UTC date or time (2027-01-31, 2027-01-31T12:00:00Z)");

  Common audit_opts;
  std::optional<std::string> audit_project;
  std::optional<std::string> audit_since;
  std::size_t audit_limit = 1000;
  auto* audit = app.add_subcommand(
      "audit", "who uploaded, yanked, deleted, claimed, made tokens and builds; newest first");
  audit_opts.add_to(audit, false);
  audit->add_option("--project", audit_project, "only this project's entries");
  audit->add_option("--since", audit_since,
                    "only entries since a time: a duration back (7d, 12h) or a UTC date or time");
  audit->add_option("--limit", audit_limit, "at most this many entries (default 1000)")
      ->check(CLI::Range(static_cast<std::size_t>(1), static_cast<std::size_t>(1000000)));

  Common yank_opts;
  std::string yank_project;
  std::optional<std::string> yank_version;
  std::optional<std::string> yank_file;
  std::string yank_reason;
  bool unyank_flag = false;
  auto* yank = app.add_subcommand(
      "yank", "yank (PEP 592) a version or one file; pip then skips it unless pinned");
  yank_opts.add_to(yank, false);
  yank->add_option("project", yank_project, "project name")->required();
  yank->add_option("version", yank_version, "version to yank (every file of it)");
  yank->add_option("--file", yank_file, "yank only this file name");
  yank->add_option("--reason", yank_reason, "shown to users by pip");
  yank->add_flag("--undo", unyank_flag, "unyank instead");

  Common delete_opts;
  std::string delete_name;
  auto* del = app.add_subcommand("delete", "remove a file from the index; its name stays reserved");
  delete_opts.add_to(del, false);
  del->add_option("filename", delete_name, "file name")->required();

  // --- Operations: configuration check, backup, garbage collection, integrity check,
  // inspection of wheels stored before ingest read their binaries. ---
  auto* config = app.add_subcommand("config", "inspect the configuration");
  config->require_subcommand(1);
  Common config_opts;
  auto* config_check = config->add_subcommand(
      "check", "print the effective configuration as TOML, or every problem (exit status 2)");
  config_opts.add_to(config_check, true);

  Common backup_opts;
  std::string backup_dest;
  bool backup_copy = false;
  bool backup_link = false;
  auto* backup = app.add_subcommand(
      "backup",
      "consistent online backup of the catalog and its files into DEST (a new or "
      "empty directory); files are copied (as reflinks where the filesystem can), each "
      "checked against its sha256 (objects of an S3 store streamed and checked); a "
      "PostgreSQL catalog is written with pg_dump into DEST/catalog.pgdump; restore with "
      "serve --data-dir DEST (docs/operations.md)");
  backup_opts.add_to(backup, false);
  backup->add_option("dest", backup_dest, "backup directory")->required();
  auto* copy_flag = backup->add_flag(
      "--copy", backup_copy,
      "independent copies of the files (the default; reflinks where the filesystem can)");
  backup
      ->add_flag("--link", backup_link,
                 "hard-link the files instead of copying them (same filesystem only): fast and "
                 "small, but a link is the live file itself, so corruption of one is "
                 "corruption of both")
      ->excludes(copy_flag);

  Common gc_opts;
  bool gc_dry_run = false;
  std::string gc_min_age = "1h";
  auto* gc = app.add_subcommand("gc", "remove blobs that no file references");
  gc_opts.add_to(gc, false);
  gc->add_flag("--dry-run", gc_dry_run, "only print what would be removed");
  gc->add_option("--min-age", gc_min_age,
                 "keep unreferenced blobs younger than this, e.g. 30m (default 1h): the "
                 "protection window of uploads in progress, which publish their blob (on S3: "
                 "upload it) before their catalog row");

  Common fsck_opts;
  bool fsck_repair = false;
  std::string fsck_min_age = "1h";
  auto* fsck = app.add_subcommand(
      "fsck", "verify every referenced blob (exists, sha256 matches); exit status 1 on problems");
  fsck_opts.add_to(fsck, false);
  fsck->add_flag("--repair", fsck_repair,
                 "remove orphan blobs and move corrupt ones to DATA_DIR/quarantine/");
  fsck->add_option("--min-age", fsck_min_age,
                   "orphans younger than this are ignored, e.g. 30m (default 1h)");
  bool fsck_verify = false;
  fsck->add_flag("--verify", fsck_verify,
                 "with an S3 blob store, read every object back and check its sha256 (without: "
                 "a HEAD checks its presence and size); local files are always hashed");

  Common reinspect_opts;
  auto* reinspect = app.add_subcommand(
      "reinspect",
      "read the binaries of stored wheels that have no findings (stored before ingest read "
      "them) and record what they say; refuses nothing; exit status 1 when some could not be "
      "read");
  reinspect_opts.add_to(reinspect, false);
  Common migrate_opts;
  wf::app::MigrateOptions migrate_options;
  std::optional<std::string> migrate_to_data_dir;
  auto* migrate = app.add_subcommand(
      "migrate",
      "copy the index (every catalog row and the files they reference, each checked against "
      "its sha256) into another catalog and/or blob store: SQLite + files to PostgreSQL + S3 "
      "and back; run it again after an interruption to finish; stop the server first");
  migrate_opts.add_to(migrate, false);
  migrate->add_option("--to-catalog", migrate_options.to_catalog,
                      "the target catalog: sqlite (TARGET_DATA_DIR/wheelforge.db) or a "
                      "PostgreSQL URI (default: the catalog stays)");
  migrate->add_option("--to-blob-store", migrate_options.to_blob_store,
                      "the target blob store: file (TARGET_DATA_DIR/blobs) or s3://BUCKET/PREFIX "
                      "(the [s3] table's object store) (default: the blob store stays)");
  migrate->add_option("--to-data-dir", migrate_to_data_dir,
                      "the target's data directory (SQLite catalog, file blobs, temp files and "
                      "read cache; default: --data-dir)");
  // --- End of operations. ---

  // --- Build runner. ---
  Common build_opts;
  std::string build_recipe;
  std::string build_version;
  std::vector<std::string> build_python;
  std::vector<std::string> build_torch;
  std::vector<std::string> build_cuda;
  bool build_force = false;
  bool build_no_cache = false;
  bool build_yank_superseded = false;
  std::optional<std::string> build_server;
  auto* build_cmd = app.add_subcommand(
      "build",
      "build a recipe's wheels over its matrix (or a subset) here, with progress; Ctrl-C "
      "cancels its jobs");
  build_opts.add_to(build_cmd, false);
  build_cmd->add_option("recipe", build_recipe, "recipe name from the configuration")->required();
  build_cmd->add_option("version", build_version, "version to build")->required();
  build_cmd->add_option("--python", build_python, "only these Python versions");
  build_cmd->add_option("--torch", build_torch, "only these torch series");
  build_cmd->add_option("--cuda", build_cuda, "only these CUDA versions");
  build_cmd->add_flag("--force", build_force,
                      "rebuild cells that were built already (a rebuild is published under the "
                      "next build number)");
  build_cmd->add_flag("--no-cache", build_no_cache,
                      "compile without the recipe's compile cache, as a request's \"cache\": "
                      "false (a clean build)");
  build_cmd->add_flag("--yank-superseded", build_yank_superseded,
                      "yank the builds a rebuild supersedes (default: the recipe's "
                      "yank_superseded)");
  build_cmd->add_option("--server-url", build_server,
                        "the wheelforge serving this data directory, where torch is installed "
                        "from (default: base_url, else from listen, in the configuration)");
  // --- End of build runner. ---

  Common token_list_opts;
  auto* token_list = token->add_subcommand("list", "list tokens (never shows the token itself)");
  token_list_opts.add_to(token_list, false);
  Common token_revoke_opts;
  std::int64_t token_revoke_id = 0;
  auto* token_revoke = token->add_subcommand("revoke", "revoke a token by its id");
  token_revoke_opts.add_to(token_revoke, false);
  token_revoke->add_option("id", token_revoke_id, "token id (see token list)")->required();

  // Trusted publishers: CI identities that exchange OIDC tokens for upload tokens.
  auto* publisher = app.add_subcommand(
      "publisher", "manage trusted publishers (CI jobs that upload without stored tokens)");
  publisher->require_subcommand(1);
  Common publisher_add_opts;
  std::string publisher_project;
  std::string publisher_issuer;
  std::vector<std::string> publisher_claims;
  std::string publisher_description;
  auto* publisher_add = publisher->add_subcommand(
      "add", "let a CI identity of a configured [[oidc_issuer]] upload to one project");
  publisher_add_opts.add_to(publisher_add, false);
  publisher_add->add_option("project", publisher_project, "project name")->required();
  publisher_add->add_option("--issuer", publisher_issuer, "an [[oidc_issuer]] name")->required();
  publisher_add
      ->add_option("--claim", publisher_claims,
                   "NAME=VALUE a token must carry, e.g. repository=org/repo (repeatable)")
      ->required();
  publisher_add->add_option("--description", publisher_description,
                            "a note shown in publisher listings");
  Common publisher_list_opts;
  std::optional<std::string> publisher_list_project;
  auto* publisher_list = publisher->add_subcommand("list", "list trusted publishers");
  publisher_list_opts.add_to(publisher_list, false);
  publisher_list->add_option("--project", publisher_list_project, "only this project's");
  Common publisher_remove_opts;
  std::int64_t publisher_remove_id = 0;
  auto* publisher_remove =
      publisher->add_subcommand("remove", "remove a trusted publisher by its id");
  publisher_remove_opts.add_to(publisher_remove, false);
  publisher_remove->add_option("id", publisher_remove_id, "publisher id (see publisher list)")
      ->required();

  // Project claims: who may upload to a project besides admins.
  auto* project_cmd = app.add_subcommand("project", "list projects and manage their claims");
  project_cmd->require_subcommand(1);
  Common project_list_opts;
  auto* project_list = project_cmd->add_subcommand("list", "projects, files and who claimed them");
  project_list_opts.add_to(project_list, false);
  Common project_claim_opts;
  std::string claim_name;
  std::optional<std::int64_t> claim_token;
  auto* project_claim = project_cmd->add_subcommand(
      "claim", "give a project to one upload token (--token ID) or to admins only");
  project_claim_opts.add_to(project_claim, false);
  project_claim->add_option("name", claim_name, "project name")->required();
  project_claim->add_option("--token", claim_token, "token id (see token list)");
  Common project_release_opts;
  std::string release_name;
  auto* project_release = project_cmd->add_subcommand(
      "release", "unclaim a project: the next token that uploads to it claims it");
  project_release_opts.add_to(project_release, false);
  project_release->add_option("name", release_name, "project name")->required();

  // Upstream indexes.
  auto* upstream_cmd = app.add_subcommand("upstream", "upstream indexes");
  upstream_cmd->require_subcommand(1);
  wf::app::UpstreamCheckOptions check_opts;
  std::string check_timeout = "10s";
  auto* upstream_check = upstream_cmd->add_subcommand(
      "check",
      "fetch an index's simple page (or a project's) as the proxy would: status, answering URL, "
      "TLS, bytes and time; exit status 1 when it fails");
  upstream_check->add_option("url", check_opts.url, "the index's simple URL")->required();
  upstream_check->add_option("project", check_opts.project, "check this project's page");
  upstream_check->add_option("--ca-file", check_opts.ca_file,
                             "PEM certificate authorities trusted besides the system's");
  upstream_check->add_option("--timeout", check_timeout,
                             "connect and read timeout, e.g. 30s (default 10s)");

  CLI11_PARSE(app, argc, argv);

  if (upstream_check->parsed()) {
    const auto timeout = wf::app::parse_duration(check_timeout);
    if (!timeout || timeout->count() <= 0) {
      std::cerr << "error: --timeout: expected a duration such as 10s or 1m, got '" << check_timeout
                << "'\n";
      return 2;
    }
    check_opts.timeout = *timeout;
    return wf::app::upstream_check(check_opts);
  }

  if (project_list->parsed()) {
    const auto configuration = project_list_opts.configuration();
    if (!configuration) return 2;
    return wf::app::project_list(configuration->settings, configuration->upstreams);
  }
  if (project_claim->parsed() || project_release->parsed()) {
    const bool release = project_release->parsed();
    const auto settings = (release ? project_release_opts : project_claim_opts).settings();
    if (!settings) return 2;
    wf::core::ProjectClaim claim;
    if (!release) {
      claim = claim_token ? wf::core::ProjectClaim{wf::core::ClaimKind::token, *claim_token}
                          : wf::core::ProjectClaim{wf::core::ClaimKind::admin, 0};
    }
    return wf::app::project_claim(*settings, release ? release_name : claim_name, claim);
  }

  if (publisher_add->parsed()) {
    const auto configuration = publisher_add_opts.configuration();
    if (!configuration) return 2;
    return wf::app::publisher_add(*configuration, publisher_project, publisher_issuer,
                                  publisher_claims, publisher_description);
  }
  if (publisher_list->parsed()) {
    const auto settings = publisher_list_opts.settings();
    if (!settings) return 2;
    return wf::app::publisher_list(*settings, publisher_list_project);
  }
  if (publisher_remove->parsed()) {
    const auto settings = publisher_remove_opts.settings();
    if (!settings) return 2;
    return wf::app::publisher_remove(*settings, publisher_remove_id);
  }

  if (token_list->parsed()) {
    const auto settings = token_list_opts.settings();
    if (!settings) return 2;
    return wf::app::token_list(*settings);
  }
  if (token_revoke->parsed()) {
    const auto settings = token_revoke_opts.settings();
    if (!settings) return 2;
    return wf::app::token_revoke(*settings, token_revoke_id);
  }

  if (build_cmd->parsed()) {
    const auto configuration = build_opts.configuration();
    if (!configuration) return 2;
    wf::core::BuildRequest request;
    request.recipe = build_recipe;
    request.version = build_version;
    request.force = build_force;
    if (build_no_cache) request.compile_cache = false;
    if (build_yank_superseded) request.yank_superseded = true;
    if (!build_python.empty() || !build_torch.empty() || !build_cuda.empty()) {
      wf::core::Matrix subset;
      subset.python = build_python;
      for (const auto& t : build_torch) {
        const auto series = wf::core::parse_torch_series(t);
        if (!series) {
          std::cerr << "error: --torch " << t << ": expected a series such as 2.8\n";
          return 2;
        }
        subset.torch.push_back(*series);
      }
      for (const auto& c : build_cuda) {
        const auto cuda = wf::core::parse_cuda_version(c);
        if (!cuda) {
          std::cerr << "error: --cuda " << c << ": expected a version such as 12.8\n";
          return 2;
        }
        subset.cuda.push_back(*cuda);
      }
      request.subset = subset;
    }
    return wf::app::build(*configuration, request, build_server);
  }

  // --- Operations. ---
  if (config_check->parsed()) {
    return wf::app::config_check(config_opts.config_file(), config_opts.overrides);
  }
  if (backup->parsed()) {
    const auto settings = backup_opts.settings();
    if (!settings) return 2;
    return wf::app::backup(
        *settings, wf::app::BackupOptions{backup_dest, backup_link ? wf::app::BlobCopy::link
                                                                   : wf::app::BlobCopy::copy});
  }
  if (gc->parsed()) {
    const auto configuration = gc_opts.configuration();
    const auto min_age = min_age_option(gc_min_age);
    if (!configuration || !min_age) return 2;
    const auto& settings = configuration->settings;
    return wf::app::gc(settings,
                       wf::app::GcOptions{gc_dry_run, *min_age, settings.upstream_file_cache,
                                          settings.upstream_page_disk_cache,
                                          configuration->build.host.pip_cache_bytes});
  }
  if (fsck->parsed()) {
    const auto settings = fsck_opts.settings();
    const auto min_age = min_age_option(fsck_min_age);
    if (!settings || !min_age) return 2;
    return wf::app::fsck(*settings, wf::app::FsckOptions{fsck_repair, *min_age,
                                                         fsck_verify ? wf::app::FsckDepth::content
                                                                     : wf::app::FsckDepth::size});
  }
  if (migrate->parsed()) {
    const auto settings = migrate_opts.settings();
    if (!settings) return 2;
    if (migrate_to_data_dir) migrate_options.to_data_dir = *migrate_to_data_dir;
    return wf::app::migrate(*settings, migrate_options);
  }
  if (reinspect->parsed()) {
    const auto settings = reinspect_opts.settings();
    if (!settings) return 2;
    return wf::app::reinspect(*settings);
  }
  // --- End of operations. ---

  if (yank->parsed()) {
    const auto settings = yank_opts.settings();
    if (!settings) return 2;
    return wf::app::yank(*settings, yank_project, yank_version, yank_file,
                         unyank_flag ? std::nullopt : std::optional<std::string>(yank_reason));
  }
  if (del->parsed()) {
    const auto settings = delete_opts.settings();
    if (!settings) return 2;
    return wf::app::delete_file(*settings, delete_name);
  }

  if (serve->parsed()) {
    const auto configuration = serve_opts.configuration();
    if (!configuration) return 2;
    wf::app::init_logging();
    // SIGHUP reads the same sources again: the file, the environment and these flags.
    const auto reload = [&serve_opts] {
      return wf::app::check_configuration(serve_opts.config_file(), serve_opts.overrides);
    };
    return wf::app::serve(*configuration, reload);
  }
  if (runner_cmd->parsed()) {
    const auto configuration = runner_opts.configuration();
    if (!configuration) return 2;
    wf::app::init_logging();
    return wf::app::runner(*configuration);
  }
  if (ingest->parsed()) {
    const auto settings = ingest_opts.settings();
    if (!settings) return 2;
    std::vector<std::filesystem::path> paths(ingest_paths.begin(), ingest_paths.end());
    return wf::app::ingest(*settings, paths);
  }
  if (token_create->parsed()) {
    const auto settings = token_opts.settings();
    if (!settings) return 2;
    return wf::app::token_create(*settings, scope, project, description, expires);
  }
  if (audit->parsed()) {
    const auto settings = audit_opts.settings();
    if (!settings) return 2;
    return wf::app::audit(*settings, audit_project, audit_since, audit_limit);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Errors are values everywhere; what still throws (allocation, the standard library) ends
  // the command with a message instead of std::terminate.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fputs("error: ", stderr);
    std::fputs(e.what(), stderr);
    std::fputs("\n", stderr);
  } catch (...) {
    std::fputs("error: unexpected exception\n", stderr);
  }
  return 1;
}
