// The [s3] table of the configuration file: the object store's endpoint, region, addressing
// and credentials (docs/configuration.md "[s3]", docs/storage.md).

#include <toml++/toml.h>

#include <algorithm>

#include "command_support.hpp"
#include "config_readers.hpp"
#include "config_tables.hpp"
#include "setting_values.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/store/object_store.hpp"
#include "wheelforge/util/redact.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {

namespace fs = std::filesystem;
using std::chrono::seconds;

/// Reads the [s3] table into `s3`, adding every problem ("s3.KEY: ...").
void read_s3_table(const toml::table& root, const fs::path& path, S3Settings& s3,
                   std::vector<std::string>& problems) {
  const toml::node* node = root.get("s3");
  if (node == nullptr) return;
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    problems.push_back("s3: expected a table ([s3]) (in " + path.string() + ")");
    return;
  }
  const std::vector<std::string_view> known(kS3Keys.begin(), kS3Keys.end());
  for (const auto& [key, value] : *table) {
    const std::string_view k = key.str();
    const std::string where = "s3." + std::string(k);
    if (std::find(kS3Keys.begin(), kS3Keys.end(), k) == kS3Keys.end()) {
      problems.push_back(detail::unknown_key(k, "[s3]", known));
      continue;
    }
    if (k == "presign_expiry") {
      std::string text;
      if (value.is_integer()) {
        text = std::to_string(*value.value<std::int64_t>());
      } else if (value.is_string()) {
        text = *value.value<std::string>();
      } else {
        problems.push_back(where + ": expected a duration such as 5m (in " + path.string() + ")");
        continue;
      }
      if (auto why = apply_duration(s3.presign_expiry, text, seconds{1}, seconds{604800})) {
        problems.push_back(where + ": " + *why);
      }
      continue;
    }
    if (!value.is_string()) {
      problems.push_back(where + ": expected a string (in " + path.string() + ")");
      continue;
    }
    std::string text(trim(*value.value<std::string>()));
    if (k == "endpoint") {
      while (text.ends_with('/')) text.pop_back();
      if (!text.empty() && !detail::http_url_rest(text)) {
        problems.push_back(where + ": expected an http:// or https:// URL such as " +
                           "https://s3.eu-west-1.amazonaws.com, got " + (quoted)(text));
        continue;
      }
      s3.endpoint = text;
    } else if (k == "region") {
      if (text.empty()) {
        problems.push_back(where + ": must not be empty");
        continue;
      }
      s3.region = text;
    } else if (k == "addressing") {
      if (text != "path" && text != "virtual") {
        problems.push_back(where + ": expected \"path\" or \"virtual\", got " + (quoted)(text));
        continue;
      }
      s3.addressing = text;
    } else if (k == "access_key_id") {
      s3.access_key_id = text;
    } else if (k == "secret_access_key_file") {
      s3.secret_access_key_file = text;
    }
  }
}

/// With an S3 blob store: the credentials, from [s3] or the environment (the client's rule,
/// store::load_s3_credentials); adds a problem when there are none.
void resolve_s3_credentials(S3Settings& s3, std::vector<std::string>& problems) {
  store::S3Config config;
  config.access_key_id = s3.access_key_id;
  if (auto st = store::load_s3_credentials(config, s3.secret_access_key_file); !st) {
    problems.push_back("s3: " + st.error().message);
    return;
  }
  s3.access_key_id = config.access_key_id;
  s3.secret_access_key = config.secret_access_key;
  s3.session_token = config.session_token;
  s3.credentials_from = s3.secret_access_key_file.empty() ? "environment" : "[s3]";
}

Status resolve_s3_credentials_for(Settings& settings) {
  std::vector<std::string> problems;
  resolve_s3_credentials(settings.s3, problems);
  if (!problems.empty()) return make_error(Errc::invalid, problems.front());
  add_secret(settings.s3.secret_access_key);
  add_secret(settings.s3.session_token);
  return ok_status();
}

}  // namespace wf::app::detail
