// The wheel inspector's page (/inspect/<sha256>).

#include <string>

#include "ui/frame.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/ui/pages.hpp"

namespace wf::ui {
namespace {

std::string cuda_text(const core::BinaryFindings& b) {
  if (b.cuda_library.empty()) return {};
  std::string out = "links " + b.cuda_library;
  if (b.cuda_major) out += " (CUDA " + std::to_string(*b.cuda_major) + ")";
  return out;
}

// Every key a section reads is set, false when empty: mustache would otherwise take the page's
// value of the same name.
void set_or_false(mus::data& d, const std::string& name, const std::string& value) {
  if (value.empty()) {
    d.set(name, false);
  } else {
    d.set(name, value);
  }
}

void set_findings(mus::data& d, const core::BinaryFindings& b) {
  d.set("binding", std::string(core::binding_name(b.binding)));
  set_or_false(d, "binding_symbol", b.binding_symbol);
  set_or_false(d, "cuda", cuda_text(b));
  set_or_false(d, "glibc", b.glibc);
  set_or_false(d, "glibcxx", b.glibcxx);
  set_or_false(d, "problem", b.problem);
}

}  // namespace

std::string render_file_page(const Site& site, const core::FileRecord& file,
                             const core::WheelInspection& inspection) {
  mus::data d;
  d.set("filename", file.filename);
  d.set("project", file.project);
  d.set("version", file.version);
  d.set("sha256", file.sha256);
  d.set("url", render::file_url(file));
  d.set("size", human_size(file.size));
  d.set("members_total", std::to_string(inspection.members_total));
  d.set("members_shown", std::to_string(inspection.members.size()));
  d.set("members_truncated", inspection.members.size() < inspection.members_total);
  d.set("inflated", human_size(inspection.inflated_total));

  d.set("has_summary", file.binaries.has_value() && !file.binaries->binaries.empty());
  if (file.binaries) {
    const core::WheelFindings& w = *file.binaries;
    d.set("binding", std::string(core::binding_name(w.binding())));
    if (const auto* e = w.binding_evidence()) set_text(d, "binding_symbol", e->binding_symbol);
    if (const auto* c = w.cuda_evidence()) set_text(d, "cuda", c->path + " " + cuda_text(*c));
    set_text(d, "glibc", w.glibc());
    set_text(d, "glibcxx", w.glibcxx());
    if (w.torch_from) d.set("torch_from", w.torch_from->str());
  }

  mus::data binaries{mus::data::type::list};
  std::size_t index = 0;
  for (const auto& b : inspection.binaries) {
    mus::data db;
    db.set("anchor", "binary-" + std::to_string(++index));
    db.set("path", b.findings.path);
    db.set("extension_module", b.findings.extension_module);
    db.set("arch", b.findings.arch);
    db.set("needed", list_of(b.findings.needed));
    set_findings(db, b.findings);
    db.set("exported_total", std::to_string(b.exported_total));
    db.set("exported_shown", std::to_string(b.exported.size()));
    db.set("exported_truncated", b.exported.size() < b.exported_total);
    db.set("has_exported", !b.exported.empty());
    mus::data exported{mus::data::type::list};
    for (const auto& e : b.exported) {
      mus::data de;
      de.set("name", e.name);
      de.set("kind", e.kind);
      de.set("version", e.version);
      exported.push_back(de);
    }
    db.set("exported", exported);
    binaries.push_back(db);
  }
  d.set("binaries", binaries);

  mus::data members{mus::data::type::list};
  for (const auto& m : inspection.members) {
    mus::data dm;
    dm.set("name", m.name);
    dm.set("size", human_size(m.size));
    dm.set("bytes", std::to_string(m.size));
    dm.set("compressed", human_size(m.compressed_size));
    members.push_back(dm);
  }
  d.set("members", members);
  return layout(site,
                Layout{file.filename + " — wheelforge", render_template("file", d), {}, false});
}

}  // namespace wf::ui
