#include "wheelforge/ui/assets.hpp"

#include <map>

#include "ui/embedded.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/simple.hpp"

namespace wf::ui {
namespace {

constexpr std::string_view kStaticDir = "static/";
constexpr std::string_view kTemplateDir = "templates/";
constexpr std::string_view kTemplateSuffix = ".mustache";

std::string content_type_of(std::string_view name) {
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

struct Tables {
  std::map<std::string, StaticFile, std::less<>> statics;
  std::map<std::string, std::string_view, std::less<>> templates;
};

// Built once, on first use (thread-safe static initialisation), then only read.
const Tables& tables() {
  static const Tables t = [] {
    Tables out;
    for (const auto& f : detail::embedded_files()) {
      if (f.path.starts_with(kStaticDir)) {
        StaticFile s;
        s.name = std::string(f.path.substr(kStaticDir.size()));
        s.bytes = f.bytes;
        s.content_type = content_type_of(s.name);
        s.hash = crypto::sha256_hex(f.bytes).substr(0, 16);
        s.gzip = render::gzip(f.bytes, 9);
        out.statics.emplace(s.name, std::move(s));
      } else if (f.path.starts_with(kTemplateDir) && f.path.ends_with(kTemplateSuffix)) {
        auto name = f.path.substr(kTemplateDir.size());
        name.remove_suffix(kTemplateSuffix.size());
        out.templates.emplace(std::string(name), f.bytes);
      }
    }
    return out;
  }();
  return t;
}

}  // namespace

const StaticFile* find_static(std::string_view name) {
  const auto& statics = tables().statics;
  const auto it = statics.find(name);
  return it == statics.end() ? nullptr : &it->second;
}

std::string static_url(std::string_view name) {
  const StaticFile* f = find_static(name);
  if (f == nullptr) return "/static/" + std::string(name);
  return "/static/" + f->hash + "/" + f->name;
}

std::string_view template_text(std::string_view name) {
  const auto& templates = tables().templates;
  const auto it = templates.find(name);
  return it == templates.end() ? std::string_view() : it->second;
}

}  // namespace wf::ui
