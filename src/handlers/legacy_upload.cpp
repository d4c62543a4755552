#include "wheelforge/handlers/legacy_upload.hpp"

#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {

LegacyUpload::LegacyUpload(const std::string& boundary, store::TempFile temp)
    : parser_(boundary), temp_(std::move(temp)) {}

Status LegacyUpload::feed(std::string_view chunk) {
  return parser_.feed(chunk, *this);
}

Status LegacyUpload::on_file_start(std::string_view field_name, std::string_view filename) {
  if (field_name != "content") {
    return make_error(Errc::invalid, "unexpected file part '" + sanitize_for_log(field_name) +
                                         "': the distribution goes in the 'content' part");
  }
  if (filename_) return make_error(Errc::invalid, "more than one 'content' part");
  filename_ = std::string(filename);
  return ok_status();
}

Status LegacyUpload::on_file_data(std::string_view bytes) {
  md5_.update(bytes);
  blake2_.update(bytes);
  return temp_.write(bytes.data(), bytes.size());
}

Status LegacyUpload::on_file_end() {
  file_done_ = true;
  return ok_status();
}

std::optional<std::string> LegacyUpload::attestations() const {
  const auto v = parser_.field("attestations");
  if (!v || trim(*v).empty()) return std::nullopt;
  return std::string(*v);
}

Result<std::string> LegacyUpload::finish() {
  if (auto st = parser_.finish(); !st) return st.error();
  // Empty parts mean "absent": twine sends every metadata field, most of them empty
  // (docs/clients.md, "twine, poetry, pdm").
  const auto field = [&](std::string_view name) -> std::string {
    const auto v = parser_.field(name);
    return v ? std::string(trim(*v)) : std::string();
  };

  const std::string action = field(":action");
  if (action == "submit") {
    return make_error(Errc::gone,
                      "project registration (:action=submit) is not needed: upload files directly");
  }
  Problems problems;
  if (action.empty()) {
    problems.add("missing :action (expected file_upload)");
  } else if (action != "file_upload") {
    problems.add("unknown :action '" + sanitize_for_log(action) + "' (expected file_upload)");
  }
  if (const auto protocol = field("protocol_version"); !protocol.empty() && protocol != "1") {
    problems.add("unsupported protocol_version '" + sanitize_for_log(protocol) + "' (expected 1)");
  }
  // twine, poetry and pdm always send filetype (docs/clients.md); a form without it was not
  // made by them, and the field must agree with the file so that no tool files a wheel as a
  // source release.
  const std::string filetype = field("filetype");
  const bool filetype_known = filetype == "bdist_wheel" || filetype == "sdist";
  if (filetype.empty()) {
    problems.add("missing filetype (expected bdist_wheel for a wheel or sdist for an sdist)");
  } else if (!filetype_known) {
    problems.add("unknown filetype '" + sanitize_for_log(filetype) +
                 "' (expected bdist_wheel or sdist)");
  }
  if (!filename_ || !file_done_) {
    problems.add("missing 'content' part with the distribution file");
    return problems.to_error();
  }
  // A file that could not be made durable is the server's failure, answered as such: its
  // digests are never compared with what is on disk then.
  if (auto st = temp_.finish(); !st) return st.error();
  if (filename_->empty()) problems.add("the 'content' part has no file name");

  const auto parsed = core::parse_dist_filename(*filename_);
  if (parsed) {
    if (const auto name = field("name");
        !name.empty() && core::normalize_name(name) != parsed->normalized_name) {
      problems.add("form field name '" + sanitize_for_log(name) +
                   "' does not match the file name's project '" + parsed->normalized_name + "'");
    }
    if (const auto version = field("version"); !version.empty()) {
      const auto v = core::Version::parse(version);
      if (!v || v->str() != parsed->version.str()) {
        problems.add("form field version '" + sanitize_for_log(version) +
                     "' does not match the file name's version '" + parsed->version.str() + "'");
      }
    }
  }
  if (parsed && filetype_known &&
      (filetype == "bdist_wheel") != (parsed->kind == core::DistKind::wheel)) {
    problems.add(
        "filetype '" + filetype + "' does not match the file " +
        (parsed->kind == core::DistKind::wheel ? "(a wheel: bdist_wheel)" : "(an sdist: sdist)"));
  }
  // The file name itself is checked (with all its problems) by the ingest path.
  const auto check_digest = [&](const char* field_name, const std::string& actual) {
    const std::string sent = to_lower(field(field_name));
    if (!sent.empty() && sent != actual) {
      problems.add(std::string(field_name) + " " + sanitize_for_log(sent, 130) +
                   " does not match the uploaded file (" + actual + ")");
    }
  };
  check_digest("sha256_digest", temp_.sha256());
  check_digest("md5_digest", md5_.finish_hex());
  check_digest("blake2_256_digest", blake2_.finish_hex());
  if (!problems.empty()) return problems.to_error();
  return *filename_;
}

}  // namespace wf::handlers
