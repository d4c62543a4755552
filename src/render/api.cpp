#include "wheelforge/render/api.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "render/json_text.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/manylinux.hpp"
#include "wheelforge/render/simple.hpp"

namespace wf::render {
namespace {

using detail::dump;
using detail::Json;

Json optional_version(const std::optional<int>& major, const std::optional<int>& minor) {
  if (!major) return nullptr;
  return std::to_string(*major) + (minor ? "." + std::to_string(*minor) : std::string());
}

Json text_or_null(const std::string& s) {
  return s.empty() ? Json(nullptr) : Json(s);
}

Json binary_json(const core::BinaryFindings& b) {
  Json j;
  j["path"] = b.path;
  j["size"] = b.size;
  j["extension_module"] = b.extension_module;
  j["arch"] = text_or_null(b.arch);
  j["needed"] = b.needed;
  j["glibc"] = text_or_null(b.glibc);
  j["glibcxx"] = text_or_null(b.glibcxx);
  j["cuda_runtime"] = b.cuda_major ? Json(*b.cuda_major) : Json(nullptr);
  j["cuda_library"] = text_or_null(b.cuda_library);
  j["torch_binding"] = core::binding_name(b.binding);
  j["torch_symbol"] = text_or_null(b.binding_symbol);
  j["problem"] = text_or_null(b.problem);
  return j;
}

Json findings_json(const core::WheelFindings& w) {
  Json j;
  j["torch_binding"] = core::binding_name(w.binding());
  const auto* evidence = w.binding_evidence();
  j["torch_symbol"] = evidence != nullptr ? Json(evidence->binding_symbol) : Json(nullptr);
  j["torch_from"] = w.torch_from ? Json(w.torch_from->str()) : Json(nullptr);
  const auto* cuda = w.cuda_evidence();
  j["cuda_runtime"] = cuda != nullptr && cuda->cuda_major ? Json(*cuda->cuda_major) : Json(nullptr);
  j["cuda_library"] = cuda != nullptr ? Json(cuda->cuda_library) : Json(nullptr);
  j["glibc"] = text_or_null(w.glibc());
  j["glibcxx"] = text_or_null(w.glibcxx());
  j["modules"] = Json::array();
  for (const auto& b : w.binaries) j["modules"].push_back(binary_json(b));
  return j;
}

Json file_json(const core::FileRecord& f) {
  const auto& h = f.hints;
  Json j;
  j["filename"] = f.filename;
  j["url"] = file_url(f);
  j["version"] = f.version;
  j["kind"] = f.kind == core::DistKind::wheel ? "wheel" : "sdist";
  j["python"] = f.tags.python_tags();
  j["abi"] = f.tags.abi_tag;
  j["platform"] = f.tags.platform_tags();
  const char* backend = "none";
  if (h.backend == core::Backend::cuda) backend = "cuda";
  if (h.backend == core::Backend::cpu) backend = "cpu";
  if (h.backend == core::Backend::rocm) backend = "rocm";
  j["backend"] = backend;
  j["cuda"] = optional_version(h.cuda_major, h.cuda_minor);
  j["rocm"] = optional_version(h.rocm_major, h.rocm_minor);
  j["torch"] = h.torch ? Json(h.torch->str()) : Json(nullptr);
  j["cxx11_abi"] = h.cxx11_abi ? Json(*h.cxx11_abi) : Json(nullptr);
  j["variant"] = h.describe();
  j["size"] = f.size;
  j["sha256"] = f.sha256;
  j["yanked"] = f.yanked ? (f.yanked->empty() ? Json(true) : Json(*f.yanked)) : Json(false);
  j["build"] = core::build_number(f.tags);
  j["build_tag"] = f.tags.build_tag ? Json(*f.tags.build_tag) : Json(nullptr);
  const auto glibc = core::glibc_of_platform_tags(f.tags.platform_tags());
  j["glibc"] = glibc ? Json(*glibc) : Json(nullptr);
  const auto effective = core::effective_cxx11_abi(h, f.tags.platform_tag);
  j["effective_cxx11_abi"] = effective ? Json(*effective) : Json(nullptr);
  j["binaries"] = f.binaries ? findings_json(*f.binaries) : Json(nullptr);
  // A PEP 825 variant wheel: its label and the properties its variant.json gives it.
  if (f.variant) {
    Json props = Json::object();
    for (const auto& [ns, features] : f.variant->properties) {
      for (const auto& [feature, values] : features) props[ns][feature] = values;
    }
    j["variant_label"] = f.variant->label;
    j["variant_properties"] = std::move(props);
  } else {
    j["variant_label"] = nullptr;
    j["variant_properties"] = nullptr;
  }
  return j;
}

// Rebuilds of one wheel (core::rebuild_key) compete as in the variant views: not yanked over
// yanked, then the higher build tag, then the later upload.
bool supersedes(const core::FileRecord& a, const core::FileRecord& b) {
  if (a.yanked.has_value() != b.yanked.has_value()) return !a.yanked.has_value();
  const auto an = core::build_number(a.tags);
  const auto bn = core::build_number(b.tags);
  if (an != bn) return an > bn;
  if (a.upload_time != b.upload_time) return a.upload_time > b.upload_time;
  return a.filename > b.filename;
}

std::string rebuild_key_of(const core::FileRecord& f) {
  auto name = core::parse_dist_filename(f.filename);
  return name ? core::rebuild_key(*name) : f.filename;
}

}  // namespace

std::string render_file_contents(const core::FileRecord& file,
                                 const core::WheelInspection& inspection) {
  Json doc;
  doc["filename"] = file.filename;
  doc["project"] = file.project;
  doc["version"] = file.version;
  doc["sha256"] = file.sha256;
  doc["size"] = file.size;
  doc["url"] = file_url(file);
  doc["members_total"] = inspection.members_total;
  doc["members_truncated"] = inspection.members.size() < inspection.members_total;
  doc["inflated_total"] = inspection.inflated_total;
  doc["members"] = Json::array();
  for (const auto& m : inspection.members) {
    doc["members"].push_back(
        {{"name", m.name}, {"size", m.size}, {"compressed_size", m.compressed_size}});
  }
  doc["binaries"] = Json::array();
  for (const auto& b : inspection.binaries) {
    Json jb = binary_json(b.findings);
    jb["exported_total"] = b.exported_total;
    jb["exported_truncated"] = b.exported.size() < b.exported_total;
    jb["exported"] = Json::array();
    for (const auto& e : b.exported) {
      jb["exported"].push_back({{"name", e.name},
                                {"kind", e.kind},
                                {"version", e.version.empty() ? Json(nullptr) : Json(e.version)}});
    }
    doc["binaries"].push_back(std::move(jb));
  }
  if (file.binaries) {
    Json summary = findings_json(*file.binaries);
    summary.erase("modules");
    doc["summary"] = std::move(summary);
  } else {
    doc["summary"] = nullptr;
  }
  return dump(doc);
}

std::string render_variants(std::string_view project, std::span<const VersionFiles> versions) {
  Json doc;
  doc["project"] = std::string(project);
  doc["versions"] = Json::array();
  std::set<core::TorchSeries> torch_axis;
  std::set<std::tuple<int, int, int>> backend_axis;  // (kind, major, minor) for sorting
  std::map<std::tuple<int, int, int>, std::string> backend_names;
  std::set<std::string> python_axis;
  using CellKey = std::tuple<std::string, std::string, std::string>;  // version, torch, backend
  std::map<CellKey, std::set<std::string>> cells;                     // -> python tags
  // Per cell, the build each wheel's rebuilds are represented by.
  std::map<CellKey, std::map<std::string, const core::FileRecord*>> chosen;
  std::map<std::string, const core::FileRecord*> best;  // rebuild key -> its current build
  for (const auto& v : versions) {
    for (const core::FileRecord* f : v.files) {
      if (f->kind != core::DistKind::wheel) continue;
      auto& b = best[rebuild_key_of(*f)];
      if (b == nullptr || supersedes(*f, *b)) b = f;
    }
  }
  // A stable-ABI build spans every series of the axis from its minimum on.
  const auto span_of = [](const core::FileRecord& f) -> std::optional<core::TorchSeries> {
    if (f.hints.torch || !f.binaries) return std::nullopt;
    return f.binaries->torch_from;
  };
  for (const auto& v : versions) {
    for (const core::FileRecord* f : v.files) {
      if (f->hints.torch) torch_axis.insert(*f->hints.torch);
      if (const auto from = span_of(*f)) torch_axis.insert(*from);
    }
  }
  // The torch series of a file's cells: its own, those its span covers, or none ("").
  const auto series_of = [&](const core::FileRecord& f) {
    std::vector<std::string> out;
    if (f.hints.torch) {
      out.push_back(f.hints.torch->str());
    } else if (const auto from = span_of(f)) {
      for (const auto& t : torch_axis) {
        if (!(t < *from)) out.push_back(t.str());
      }
    } else {
      out.emplace_back();
    }
    return out;
  };
  for (const auto& v : versions) {
    Json jv;
    jv["version"] = v.version;
    jv["files"] = Json::array();
    for (const core::FileRecord* f : v.files) {
      Json jf = file_json(*f);
      if (f->kind == core::DistKind::wheel) {
        const std::string key = rebuild_key_of(*f);
        const core::FileRecord* current = best[key];
        jf["superseded_by"] = current == f ? Json(nullptr) : Json(current->filename);
        for (const auto& series : series_of(*f)) {
          chosen[{v.version, series, f->hints.backend_label()}][key] = current;
        }
      } else {
        jf["superseded_by"] = nullptr;
      }
      jv["files"].push_back(std::move(jf));
      const auto& h = f->hints;
      const std::string b = h.backend_label();
      if (!b.empty()) {
        const auto key = std::make_tuple(static_cast<int>(h.backend),
                                         h.cuda_major.value_or(h.rocm_major.value_or(0)),
                                         h.cuda_minor.value_or(h.rocm_minor.value_or(-1)));
        backend_axis.insert(key);
        backend_names[key] = b;
      }
      if (f->kind != core::DistKind::wheel) continue;
      for (const auto& py : f->tags.python_tags()) {
        python_axis.insert(py);
        for (const auto& series : series_of(*f)) cells[{v.version, series, b}].insert(py);
      }
    }
    doc["versions"].push_back(std::move(jv));
  }
  Json axes;
  axes["torch"] = Json::array();
  for (const auto& t : torch_axis) axes["torch"].push_back(t.str());
  axes["backend"] = Json::array();
  for (const auto& k : backend_axis) axes["backend"].push_back(backend_names[k]);
  axes["python"] = Json::array();
  for (const auto& p : python_axis) axes["python"].push_back(p);
  doc["axes"] = std::move(axes);
  Json matrix = Json::array();
  for (const auto& [key, pythons] : cells) {
    const auto& [version, torch, backend] = key;
    Json builds = Json::array();
    for (const auto& [family, f] : chosen[key]) {
      const auto glibc = core::glibc_of_platform_tags(f->tags.platform_tags());
      const auto from = span_of(*f);
      builds.push_back({{"filename", f->filename},
                        {"python", f->tags.python_tags()},
                        {"build", core::build_number(f->tags)},
                        {"glibc", glibc ? Json(*glibc) : Json(nullptr)},
                        {"torch_from", from ? Json(from->str()) : Json(nullptr)}});
    }
    matrix.push_back({{"version", version},
                      {"torch", torch.empty() ? Json(nullptr) : Json(torch)},
                      {"backend", backend.empty() ? Json(nullptr) : Json(backend)},
                      {"python", std::vector<std::string>(pythons.begin(), pythons.end())},
                      {"builds", std::move(builds)}});
  }
  doc["matrix"] = std::move(matrix);
  return dump(doc);
}

namespace {

std::string view_path(const core::ViewSelector& selector) {
  const std::string path = selector.path();
  return "/" + (path.empty() ? std::string() : path + "/") + "simple/";
}

// "cu128", "cpu", "rocm6.4"; null when the selector names no backend.
Json backend_json(const core::ViewSelector& s) {
  core::VariantHints h;
  h.backend = s.backend;
  h.cuda_major = s.cuda_major;
  h.cuda_minor = s.cuda_minor;
  h.rocm_major = s.rocm_major;
  h.rocm_minor = s.rocm_minor;
  const std::string backend = h.backend_label();
  return backend.empty() ? Json(nullptr) : Json(backend);
}

// The fields an answer and a no-build answer share.
Json resolution_json(const Resolution& r) {
  const auto& s = r.selector;
  const std::string view = view_path(s);
  Json j;
  j["torch"] = r.torch;
  j["series"] = s.torch ? Json(s.torch->str()) : Json(nullptr);
  j["backend"] = backend_json(s);
  j["backend_source"] = r.backend_source;
  j["cuda"] = optional_version(s.cuda_major, s.cuda_minor);
  j["rocm"] = optional_version(s.rocm_major, s.rocm_minor);
  j["cxx11_abi"] = s.cxx11_abi ? Json(*s.cxx11_abi) : Json(nullptr);
  j["view"] = view;
  j["index_url"] = r.base_url + view;
  j["project"] = r.project ? Json(*r.project) : Json(nullptr);
  return j;
}

}  // namespace

std::string_view index_option(bool sole_index) {
  return sole_index ? "--index-url " : "--extra-index-url ";
}

std::string pip_install_args(std::string_view index_url, std::string_view project,
                             std::string_view version, bool sole_index) {
  std::string out(index_option(sole_index));
  out += index_url;
  out += " --only-binary ";
  out += project;
  out += ' ';
  out += project;
  out += "==";
  out += version;
  return out;
}

std::string render_resolution(const Resolution& r) {
  Json j = resolution_json(r);
  const std::string index_url = j["index_url"].get<std::string>();
  const std::string project = r.project.value_or("PROJECT");
  const std::string version = r.version.value_or("VERSION");
  j["version"] = r.version ? Json(*r.version) : Json(nullptr);
  j["requirement"] = project + "==" + version;
  const std::string args = pip_install_args(index_url, project, version, r.sole_index);
  j["pip"] = "pip install " + args;
  j["uv"] = "uv pip install " + args;
  j["notes"] = r.notes;
  return dump(j);
}

std::string render_no_build(const Resolution& r, std::string_view message,
                            std::span<const NearbyBuilds> nearest) {
  Json j;
  j["error"] = std::string(message);
  j.update(resolution_json(r));
  j["notes"] = r.notes;
  Json cells = Json::array();
  for (const auto& n : nearest) {
    const std::string view = view_path(n.view);
    Json c;
    c["view"] = view;
    c["index_url"] = r.base_url + view;
    c["torch"] = n.view.torch ? Json(n.view.torch->str()) : Json(nullptr);
    c["backend"] = backend_json(n.view);
    c["cxx11_abi"] = n.view.cxx11_abi ? Json(*n.view.cxx11_abi) : Json(nullptr);
    c["versions"] = n.versions;
    c["python"] = n.python;
    cells.push_back(std::move(c));
  }
  j["nearest"] = std::move(cells);
  return dump(j);
}

std::string render_api_error(std::string_view message) {
  Json j;
  j["error"] = std::string(message);
  return dump(j);
}

std::string render_stored_file(const core::FileRecord& file) {
  nlohmann::ordered_json j;
  j["filename"] = file.filename;
  j["project"] = file.project;
  j["version"] = file.version;
  j["sha256"] = file.sha256;
  j["size"] = file.size;
  j["url"] = file_url(file);
  return wf::render::detail::dump(j);
}

std::string render_file_names(std::string_view key, std::span<const std::string> filenames) {
  nlohmann::ordered_json j;
  j[std::string(key)] = std::vector<std::string>(filenames.begin(), filenames.end());
  return wf::render::detail::dump(j);
}

std::string render_claim(std::string_view project, std::string_view claim) {
  nlohmann::ordered_json j;
  j["project"] = std::string(project);
  j["claim"] = std::string(claim);
  return wf::render::detail::dump(j);
}

}  // namespace wf::render
