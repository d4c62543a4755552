#include <toml++/toml.h>

#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {

std::optional<std::uint64_t> parse_size(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::uint64_t multiplier = 1;
  switch (text.back()) {
    case 'K':
    case 'k':
      multiplier = 1ULL << 10U;
      break;
    case 'M':
    case 'm':
      multiplier = 1ULL << 20U;
      break;
    case 'G':
    case 'g':
      multiplier = 1ULL << 30U;
      break;
    case 'T':
    case 't':
      multiplier = 1ULL << 40U;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  const auto n = parse_u64(text);
  if (!n || *n > UINT64_MAX / multiplier) return std::nullopt;
  return *n * multiplier;
}

Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return make_error(Errc::invalid,
                      "listen: expected HOST:PORT, got '" + sanitize_for_log(text) + "'");
  }
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto port = parse_u64(text.substr(colon + 1));
  if (!port || *port > 65535) {
    return make_error(Errc::invalid, "listen: invalid port in '" + sanitize_for_log(text) + "'");
  }
  return std::pair{host, static_cast<std::uint16_t>(*port)};
}

Result<Settings> load_settings(const std::optional<std::filesystem::path>& config_file,
                               const Overrides& overrides) {
  Settings s;
  Problems problems;
  std::optional<std::string> data_dir;
  std::optional<std::string> listen;
  std::optional<std::string> max_upload;
  if (config_file) {
    toml::table table;
    try {
      table = toml::parse_file(config_file->string());
    } catch (const toml::parse_error& e) {
      return make_error(Errc::invalid, config_file->string() + ": " + std::string(e.description()));
    }
    for (const auto& [key, value] : table) {
      const std::string k(key.str());
      if (k == "data_dir" && value.is_string()) {
        data_dir = value.value<std::string>();
      } else if (k == "listen" && value.is_string()) {
        listen = value.value<std::string>();
      } else if (k == "max_upload_size" && (value.is_string() || value.is_integer())) {
        max_upload = value.is_string() ? *value.value<std::string>()
                                       : std::to_string(*value.value<std::int64_t>());
      } else if (k == "data_dir" || k == "listen" || k == "max_upload_size") {
        problems.add(k + ": wrong type");
      } else {
        problems.add("unknown setting '" + k + "'");
      }
    }
  }
  if (overrides.data_dir) data_dir = overrides.data_dir;
  if (overrides.listen) listen = overrides.listen;
  if (overrides.max_upload_size) max_upload = overrides.max_upload_size;

  if (data_dir) {
    if (data_dir->empty()) problems.add("data_dir: must not be empty");
    s.data_dir = *data_dir;
  }
  if (listen) {
    if (auto l = parse_listen(*listen); !l) problems.add(l.error().message);
    s.listen = *listen;
  }
  if (max_upload) {
    const auto size = parse_size(*max_upload);
    if (!size || *size == 0) {
      problems.add("max_upload_size: expected a size such as 1048576, 512M or 8G, got '" +
                   sanitize_for_log(*max_upload) + "'");
    } else {
      s.max_upload_size = *size;
    }
  }
  if (!problems.empty()) return problems.to_error();
  return s;
}

}  // namespace wf::app
