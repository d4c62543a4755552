#include "wheelforge/render/api.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "wheelforge/render/simple.hpp"

namespace wf::render {
namespace {

using Json = nlohmann::json;

Json optional_version(const std::optional<int>& major, const std::optional<int>& minor) {
  if (!major) return nullptr;
  return std::to_string(*major) + (minor ? "." + std::to_string(*minor) : std::string());
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
  return j;
}

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string render_variants(std::string_view project, std::span<const VersionFiles> versions) {
  Json doc;
  doc["project"] = std::string(project);
  doc["versions"] = Json::array();
  std::set<core::TorchSeries> torch_axis;
  std::set<std::tuple<int, int, int>> backend_axis;  // (kind, major, minor) for sorting
  std::map<std::tuple<int, int, int>, std::string> backend_names;
  std::set<std::string> python_axis;
  // (version, torch, backend) -> python tags
  std::map<std::tuple<std::string, std::string, std::string>, std::set<std::string>> cells;
  for (const auto& v : versions) {
    Json jv;
    jv["version"] = v.version;
    jv["files"] = Json::array();
    for (const core::FileRecord* f : v.files) {
      jv["files"].push_back(file_json(*f));
      const auto& h = f->hints;
      if (h.torch) torch_axis.insert(*h.torch);
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
        cells[{v.version, h.torch ? h.torch->str() : "", b}].insert(py);
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
    matrix.push_back({{"version", version},
                      {"torch", torch.empty() ? Json(nullptr) : Json(torch)},
                      {"backend", backend.empty() ? Json(nullptr) : Json(backend)},
                      {"python", std::vector<std::string>(pythons.begin(), pythons.end())}});
  }
  doc["matrix"] = std::move(matrix);
  return dump(doc);
}

std::string render_resolution(const Resolution& r) {
  const std::string path = r.selector.path();
  const std::string view = "/" + (path.empty() ? std::string() : path + "/") + "simple/";
  const std::string index_url = r.base_url + view;
  Json j;
  j["torch"] = r.torch;
  j["series"] = r.selector.torch ? Json(r.selector.torch->str()) : Json(nullptr);
  j["view"] = view;
  j["index_url"] = index_url;
  j["pip"] = "pip install --extra-index-url " + index_url + " " + r.project.value_or("PROJECT");
  j["uv"] = "uv pip install --extra-index-url " + index_url + " " + r.project.value_or("PROJECT");
  j["notes"] = r.notes;
  return dump(j);
}

}  // namespace wf::render
