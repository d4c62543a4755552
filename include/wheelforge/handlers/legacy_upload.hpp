#pragma once
// The upload API that twine, poetry and pdm speak (`POST /legacy/`, multipart/form-data with
// `:action=file_upload`: docs/packaging.md, "Uploads"). The body is fed in chunks; the `content`
// part streams into a temp file while it is hashed (sha256, md5, blake2b-256), the small form
// fields are kept. After the last chunk, validate() checks the form against the file. Pure apart
// from the temp file writes; call from a worker thread.

#include <memory>
#include <optional>
#include <string>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/handlers/multipart.hpp"
#include "wheelforge/store/blob_store.hpp"

namespace wf::handlers {

class LegacyUpload final : public MultipartSink {
 public:
  LegacyUpload(const std::string& boundary, store::TempFile temp);

  /// Parses the next chunk of the body. Errors: invalid (malformed multipart, a second file,
  /// a file part not named `content`), too_large, storage_full / io (temp file writes).
  [[nodiscard]] Status feed(std::string_view chunk);

  /// Ends the body and checks the form: `:action` (`submit` is gone: 410; anything but
  /// `file_upload`: 400), `protocol_version` 1, a `content` file, `name`/`version` consistent
  /// with the file name when sent, `filetype` sent (`bdist_wheel` or `sdist`) and consistent
  /// with the file name, and every digest that was sent equal to the file's.
  /// Returns the file name to ingest under; every problem is reported together. A failure to
  /// make the received file durable (fsync) is returned as the store's error (io,
  /// unavailable, storage_full), before any digest is compared.
  [[nodiscard]] Result<std::string> finish();

  /// The temp file holding `content` (valid after a successful finish()).
  [[nodiscard]] store::TempFile take_file() { return std::move(temp_); }

  /// The file name of a completely received `content` part (also after a failed finish(), so
  /// that the file's own problems can be reported alongside the form's).
  [[nodiscard]] std::optional<std::string> received_filename() const {
    return file_done_ ? filename_ : std::nullopt;
  }
  [[nodiscard]] const std::filesystem::path& file_path() const { return temp_.path(); }
  /// The `attestations` field (PEP 740, as twine sends it: a JSON array of attestation
  /// objects); nullopt when the form has none, or an empty one.
  [[nodiscard]] std::optional<std::string> attestations() const;

  Status on_file_start(std::string_view field_name, std::string_view filename) override;
  Status on_file_data(std::string_view bytes) override;
  Status on_file_end() override;

 private:
  MultipartParser parser_;
  store::TempFile temp_;
  std::optional<std::string> filename_;
  bool file_done_ = false;
  crypto::Hasher md5_{crypto::Algorithm::md5};
  crypto::Hasher blake2_{crypto::Algorithm::blake2b_256};
};

}  // namespace wf::handlers
