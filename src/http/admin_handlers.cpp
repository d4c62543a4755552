#include "admin_handlers.hpp"

#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

std::string json_string_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (const char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
    out += '"';
  }
  return out + "]";
}

Response json(int status, std::string body) {
  Response r;
  r.status = status;
  r.set("Content-Type", "application/json");
  r.body = std::move(body) + "\n";
  return r;
}

Response yank(const Request& req, std::string_view body, catalog::Catalog& catalog, bool undo) {
  auto params = parse_form(req.query);
  for (auto& p : parse_form(body)) params.push_back(std::move(p));
  std::optional<std::string> project;
  std::optional<std::string> version;
  std::optional<std::string> filename;
  std::optional<std::string> reason;
  Problems problems;
  for (auto& [k, v] : params) {
    if (k == "project") {
      project = std::move(v);
    } else if (k == "version") {
      version = std::move(v);
    } else if (k == "filename") {
      filename = std::move(v);
    } else if (k == "reason" && !undo) {
      reason = std::move(v);
    } else {
      problems.add("unknown parameter '" + sanitize_for_log(k) + "'");
    }
  }
  if (!project || !core::is_valid_project_name(*project)) {
    problems.add("project=NAME is required");
  }
  if (version.has_value() == filename.has_value()) {
    problems.add("give exactly one of version=V or filename=F");
  }
  if (!problems.empty()) return error_response(problems.to_error());
  if (!undo && !reason) reason = std::string();
  auto changed = catalog.set_yanked(core::normalize_name(*project), version, filename,
                                    undo ? std::nullopt : reason);
  if (!changed) return error_response(changed.error());
  return json(200, std::string("{\"") + (undo ? "unyanked" : "yanked") +
                       "\":" + json_string_list(*changed) + "}");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto part : split(s, '&')) {
    if (part.empty()) continue;
    const auto eq = part.find('=');
    auto decode = [](std::string_view raw) {
      std::string plus(raw);
      for (auto& c : plus) {
        if (c == '+') c = ' ';
      }
      return percent_decode(plus).value_or("");
    };
    out.emplace_back(decode(part.substr(0, eq)),
                     eq == std::string_view::npos ? std::string() : decode(part.substr(eq + 1)));
  }
  return out;
}

bool is_admin_route(const Request& req) {
  return !req.segments.empty() && req.segments[0] == "admin";
}

Response handle_admin(const Request& req, std::string_view body, catalog::Catalog& catalog) {
  const auto& seg = req.segments;
  if (seg.size() == 2 && (seg[1] == "yank" || seg[1] == "unyank")) {
    if (req.method != Method::post) {
      Response r = error_response(make_error(Errc::invalid, "method not allowed"));
      r.status = 405;
      r.set("Allow", "POST");
      return r;
    }
    return yank(req, body, catalog, seg[1] == "unyank");
  }
  if (seg.size() == 3 && seg[1] == "files" && !seg[2].empty()) {
    if (req.method != Method::del) {
      Response r = error_response(make_error(Errc::invalid, "method not allowed"));
      r.status = 405;
      r.set("Allow", "DELETE");
      return r;
    }
    auto deleted = catalog.delete_file(seg[2]);
    if (!deleted) return error_response(deleted.error());
    return json(200, "{\"deleted\":" + json_string_list({deleted->filename}) + "}");
  }
  return error_response(make_error(Errc::not_found, "no such admin endpoint"));
}

}  // namespace wf::http
