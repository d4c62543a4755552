// wheelforge: a private Python package index for CUDA/PyTorch extension wheels.

#include <CLI/CLI.hpp>
#include <iostream>

#include "wheelforge/app/app.hpp"

namespace {

struct Common {
  std::optional<std::string> config;
  wf::app::Overrides overrides;

  void add_to(CLI::App* cmd, bool with_server_flags) {
    cmd->add_option("--config", config, "TOML configuration file");
    cmd->add_option("--data-dir", overrides.data_dir, "data directory (default ./data)");
    if (with_server_flags) {
      cmd->add_option("--listen", overrides.listen,
                      "HOST:PORT to listen on (default 127.0.0.1:8080; port 0 picks one)");
    }
    cmd->add_option("--max-upload-size", overrides.max_upload_size,
                    "largest accepted file, e.g. 8G (default 8G)");
  }

  std::optional<wf::app::Settings> settings() const {
    auto s = wf::app::load_settings(
        config ? std::optional<std::filesystem::path>(*config) : std::nullopt, overrides);
    if (!s) {
      std::cerr << "error: " << s.error().message << "\n";
      return std::nullopt;
    }
    return *s;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wheelforge: a private Python package index for CUDA/PyTorch extension wheels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "wheelforge 0.1.0");

  Common serve_opts;
  auto* serve = app.add_subcommand("serve", "run the index server");
  serve_opts.add_to(serve, true);

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

  Common yank_opts;
  std::string yank_project;
  std::optional<std::string> yank_version;
  std::optional<std::string> yank_file;
  std::string yank_reason;
  bool unyank_flag = false;
  auto* yank = app.add_subcommand("yank", "yank (PEP 592) a version or one file; pip then skips it unless pinned");
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

  CLI11_PARSE(app, argc, argv);

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
    const auto settings = serve_opts.settings();
    if (!settings) return 2;
    wf::app::init_logging();
    return wf::app::serve(*settings);
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
    return wf::app::token_create(*settings, scope, project, description);
  }
  return 2;
}
