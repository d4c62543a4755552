// What signs the provenance of the build runner's wheels (docs/runner.md, "Provenance"): the key
// and certificate of [attestations], else the data directory's own, made on first use.

#include <ctime>

#include "command_support.hpp"
#include "wheelforge/util/atomic_file.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::app::detail {

namespace fs = std::filesystem;

namespace {

constexpr int kCertificateDays = 3650;

Status write_file(const fs::path& path, std::string_view text, mode_t mode) {
  auto file = AtomicFile::create_for(path);
  if (!file) return file.error();
  if (auto st = file->write(text); !st) return st;
  if (auto st = file->set_mode(mode); !st) return st;
  return file->commit(path);
}

Error cannot(const fs::path& path, const Error& e) {
  return make_error(e.code, "the build provenance key " + path.string() + ": " + e.message +
                                " (a file of this server's; remove it to make a new one, or set "
                                "[attestations] signing_key and signing_certificate)");
}

}  // namespace

Result<std::shared_ptr<const auth::BuildSigner>> open_build_signer(
    const Configuration& configuration, std::string_view url) {
  if (configuration.build_signer) return configuration.build_signer;
  const fs::path dir = configuration.settings.data_dir / "keys";
  const fs::path key_path = dir / "build-provenance-key.pem";
  const fs::path certificate_path = dir / "build-provenance-certificate.pem";
  std::error_code ec;
  std::optional<crypto::SigningKey> key;
  if (fs::exists(key_path, ec)) {
    auto pem = read_small_file(key_path, 1U << 20U);
    if (!pem) return cannot(key_path, pem.error());
    auto read = crypto::SigningKey::from_pem(*pem);
    if (!read) return cannot(key_path, read.error());
    key = std::move(*read);
  } else {
    auto made = crypto::SigningKey::generate();
    if (!made) return made.error();
    // Only the server's user reads it (its directory is made with it); written before the
    // certificate that names it.
    if (auto st = write_file(key_path, made->private_pem(), 0600); !st) {
      return cannot(key_path, st.error());
    }
    fs::remove(certificate_path, ec);
    log::info("build provenance: made a new signing key {}", key_path.string());
    key = std::move(*made);
  }
  if (auto pem = read_small_file(certificate_path, 1U << 20U); pem) {
    auto certificates = crypto::Certificate::from_pem(*pem);
    if (!certificates) return cannot(certificate_path, certificates.error());
    auto signer = auth::BuildSigner::make(*key, certificates->front());
    if (!signer) return cannot(certificate_path, signer.error());
    return std::make_shared<const auth::BuildSigner>(std::move(*signer));
  }
  // The certificate is missing (first start, or a crash between the two files): made again
  // for the key, naming this server.
  auto der = key->self_signed_certificate("wheelforge build provenance", url, std::time(nullptr),
                                          kCertificateDays);
  if (!der) return der.error();
  auto certificate = crypto::Certificate::from_der(*der);
  if (!certificate) return certificate.error();
  if (auto st = write_file(certificate_path, certificate->pem(), 0644); !st) {
    return cannot(certificate_path, st.error());
  }
  auto signer = auth::BuildSigner::make(std::move(*key), std::move(*certificate));
  if (!signer) return signer.error();
  log::info("build provenance: made the self-signed certificate {}", certificate_path.string());
  return std::make_shared<const auth::BuildSigner>(std::move(*signer));
}

}  // namespace wf::app::detail
