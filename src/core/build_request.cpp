#include "wheelforge/core/build.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {

Result<BuildRequest> check_build_request(const BuildRequestFields& fields, Problems problems) {
  BuildRequest r;
  r.recipe = std::string(trim(fields.recipe));
  r.version = std::string(trim(fields.version));
  r.force = fields.force;
  r.yank_superseded = fields.yank_superseded;
  r.compile_cache = fields.compile_cache;
  if (r.recipe.empty()) problems.add("missing recipe");
  if (r.version.empty()) problems.add("missing version");
  const auto quoted = [](std::string_view v) { return "'" + sanitize_for_log(v, 80) + "'"; };
  Matrix subset;
  for (const auto& v : fields.python) {
    if (!is_valid_python_version(v)) problems.add("python " + quoted(v) + " is not X.Y like 3.12");
    subset.python.push_back(v);
  }
  for (const auto& v : fields.torch) {
    if (auto t = parse_torch_series(v)) {
      subset.torch.push_back(*t);
    } else {
      problems.add("torch " + quoted(v) + " is not a series like 2.8");
    }
  }
  for (const auto& v : fields.cuda) {
    if (auto c = parse_cuda_version(v)) {
      subset.cuda.push_back(*c);
    } else {
      problems.add("cuda " + quoted(v) + " is not a version like 12.8");
    }
  }
  if (!problems.empty()) return problems.to_error();
  if (!subset.python.empty() || !subset.torch.empty() || !subset.cuda.empty()) r.subset = subset;
  return r;
}

}  // namespace wf::core
