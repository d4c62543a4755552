#pragma once
// The catalog's view of the index, shared by the catalog (which produces it), the renderer
// and the HTTP layer (which read it). Plain data.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::core {

struct FileRecord {
  std::int64_t id = 0;
  std::string filename;  ///< exactly as uploaded
  std::string project;   ///< PEP 503 normalized project name
  std::string version;   ///< normalized PEP 440 version, with local label
  DistKind kind = DistKind::wheel;
  std::string sha256;  ///< lower-case hex of the file
  std::uint64_t size = 0;
  Micros upload_time = 0;
  std::optional<std::string> requires_python;
  std::string metadata_sha256;  ///< lower-case hex of the exact METADATA bytes
  std::uint64_t metadata_size = 0;
  /// PEP 592: nullopt when not yanked; a (possibly empty) reason when yanked.
  std::optional<std::string> yanked;
  WheelTags tags;  ///< wheels only
  /// What the local version label and the requirements say about torch/CUDA/ABI.
  VariantHints hints;
};

struct ProjectRecord {
  std::string name;          ///< PEP 503 normalized
  std::string display_name;  ///< as first uploaded (METADATA Name)
  Micros last_upload = 0;
};

}  // namespace wf::core
