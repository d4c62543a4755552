// PEP 740 attestations verified offline, with certificates and signatures made by OpenSSL at
// test time.

#include "wheelforge/auth/attestation.hpp"

#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "crypto/test_certificates.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::auth {
namespace {

using wf::testing::CertSpec;
using wf::testing::Key;
using wf::testing::TestPki;

constexpr std::string_view kFile = "demo-1.0-cp312-cp312-linux_x86_64.whl";
const std::string kSha(64, 'a');
constexpr std::string_view kGitHub = "https://token.actions.githubusercontent.com";

CertSpec github_job(const std::string& repository = "org/repo") {
  const std::string workflow =
      "https://github.com/" + repository + "/.github/workflows/release.yml@refs/tags/v1";
  CertSpec spec;
  spec.san_uris = {workflow};
  spec.utf8_extensions = {{"1.3.6.1.4.1.57264.1.8", std::string(kGitHub)},
                          {"1.3.6.1.4.1.57264.1.9", workflow},
                          {"1.3.6.1.4.1.57264.1.12", "https://github.com/" + repository},
                          {"1.3.6.1.4.1.57264.1.14", "refs/tags/v1"},
                          {"1.3.6.1.4.1.57264.1.18", workflow}};
  return spec;
}

// A signing certificate's spec: these extensions, this SAN URI or e-mail.
CertSpec job(std::vector<std::pair<std::string, std::string>> extensions, std::string uri,
             std::string email = "") {
  CertSpec spec;
  if (!uri.empty()) spec.san_uris = {std::move(uri)};
  if (!email.empty()) spec.san_emails = {std::move(email)};
  spec.utf8_extensions = std::move(extensions);
  return spec;
}

std::string statement(std::string_view name = kFile, std::string_view sha = kSha,
                      std::string_view predicate = kPublishPredicate) {
  return R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"name":")" + std::string(name) +
         R"(","digest":{"sha256":")" + std::string(sha) + R"("}}],"predicateType":")" +
         std::string(predicate) + R"(","predicate":null})";
}

std::string attestation(const wf::testing::Cert& cert, const Key& key, const std::string& stmt,
                        const std::string& signed_stmt = "") {
  const std::string sig =
      wf::testing::sign(key, dsse_pae(signed_stmt.empty() ? stmt : signed_stmt));
  return R"({"version":1,"verification_material":{"certificate":")" +
         base64_encode(wf::testing::der_of(cert)) +
         R"(","transparency_entries":[{"logIndex":"1"}]},"envelope":{"statement":")" +
         base64_encode(stmt) + R"(","signature":")" + base64_encode(sig) + R"("}})";
}

struct Fixture {
  TestPki pki;
  crypto::TrustStore roots = *crypto::TrustStore::from_pem(pki.trust_pem());
  Key key = wf::testing::make_p256_key();
  wf::testing::Cert cert = pki.leaf(github_job(), key);
  AttestationCheck check{std::string(kFile), kSha, std::time(nullptr), nullptr, ""};

  [[nodiscard]] Result<VerifiedAttestations> verify(const std::string& json) const {
    return verify_attestations(json, roots, check);
  }
  [[nodiscard]] std::string refusal(const std::string& json) const {
    const auto r = verify(json);
    if (r) return "(verified)";
    EXPECT_EQ(r.error().code, Errc::invalid);
    return r.error().message;
  }
};

TEST(Attestation, TheDssePreAuthenticationEncoding) {
  EXPECT_EQ(dsse_pae("{}"), "DSSEv1 28 application/vnd.in-toto+json 2 {}");
}

TEST(Attestation, AGitHubPublishAttestationVerifies) {
  const Fixture f;
  const std::string one = attestation(f.cert, f.key, statement());
  const auto r = f.verify("[" + one + "]");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->attestations.size(), 1U);
  EXPECT_NE(r->attestations[0].find(R"("version":1)"), std::string::npos);
  EXPECT_EQ(r->identity, "https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1");
  EXPECT_EQ(r->publisher.kind, "GitHub");
  EXPECT_EQ(r->publisher.fields, (std::vector<std::pair<std::string, std::string>>{
                                     {"repository", "org/repo"}, {"workflow", "release.yml"}}));
  // Two attestations (publish and SLSA) by the same job.
  const auto two = f.verify(
      "[" + one + "," + attestation(f.cert, f.key, statement(kFile, kSha, kSlsaPredicate)) + "]");
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(two->attestations.size(), 2U);
}

TEST(Attestation, AGitLabJobAndAnEmailIdentityAreNamedSo) {
  const Fixture f;
  const std::string config =
      "https://gitlab.example.org/group/proj//ci/release.yml@refs/heads/main";
  const auto gitlab =
      f.pki.leaf(job({{"1.3.6.1.4.1.57264.1.8", "https://gitlab.example.org"},
                      {"1.3.6.1.4.1.57264.1.12", "https://gitlab.example.org/group/proj"},
                      {"1.3.6.1.4.1.57264.1.18", config}},
                     config),
                 f.key);
  const auto r = f.verify("[" + attestation(gitlab, f.key, statement()) + "]");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->publisher.kind, "GitLab");
  EXPECT_EQ(r->publisher.fields,
            (std::vector<std::pair<std::string, std::string>>{
                {"repository", "group/proj"}, {"workflow_filepath", "ci/release.yml"}}));

  const auto person = f.pki.leaf(
      job({{"1.3.6.1.4.1.57264.1.8", "https://accounts.example.org"}}, "", "dev@example.org"),
      f.key);
  const auto p = f.verify("[" + attestation(person, f.key, statement()) + "]");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->publisher.kind, "https://accounts.example.org");
  EXPECT_EQ(p->publisher.fields,
            (std::vector<std::pair<std::string, std::string>>{{"identity", "dev@example.org"}}));
}

TEST(Attestation, MalformedObjectsAreRefusedByName) {
  const Fixture f;
  EXPECT_EQ(f.refusal("{}"), "attestations: not a JSON array of attestation objects");
  EXPECT_EQ(f.refusal("[]"), "attestations: the array is empty");
  EXPECT_EQ(f.refusal("[1]"), "attestation 1: not a JSON object");
  EXPECT_EQ(f.refusal(R"([{"version":2}])"), "attestation 1: version is not 1");
  EXPECT_EQ(f.refusal(R"([{"version":1,"envelope":{}}])"),
            "attestation 1: no verification_material object");
  EXPECT_EQ(f.refusal(R"([{"version":1,"verification_material":{"certificate":"AAAA"},)"
                      R"("envelope":{}}])"),
            "attestation 1: verification_material.transparency_entries is not a list");
  EXPECT_EQ(f.refusal(R"([{"version":1,"verification_material":{"certificate":"!!",)"
                      R"("transparency_entries":[]},"envelope":{"statement":"e30=",)"
                      R"("signature":"AAAA"}}])"),
            "attestation 1: verification_material.certificate is not base64");
  EXPECT_EQ(f.refusal(R"([{"version":1,"verification_material":{"certificate":"AAAA",)"
                      R"("transparency_entries":[]},"envelope":{"statement":"e30=",)"
                      R"("signature":"AAAA"}}])"),
            "attestation 1: verification_material.certificate: not a DER X.509 certificate");
}

TEST(Attestation, ATamperedStatementOrSignatureIsRefused) {
  const Fixture f;
  // The statement was changed after signing (another digest).
  const std::string tampered =
      attestation(f.cert, f.key, statement(kFile, kSha), statement(kFile, std::string(64, 'b')));
  EXPECT_EQ(f.refusal("[" + tampered + "]"),
            "attestation 1: the signature does not verify with its certificate's key");
  // Signed by another key than the certificate's.
  const std::string other_key = attestation(f.cert, wf::testing::make_p256_key(), statement());
  EXPECT_EQ(f.refusal("[" + other_key + "]"),
            "attestation 1: the signature does not verify with its certificate's key");
  // A good one first does not carry a bad second one.
  EXPECT_EQ(f.refusal("[" + attestation(f.cert, f.key, statement()) + "," + tampered + "]"),
            "attestation 2: the signature does not verify with its certificate's key");
}

TEST(Attestation, TheStatementMustNameThisFileAndItsDigest) {
  const Fixture f;
  EXPECT_EQ(f.refusal("[" + attestation(f.cert, f.key, statement("demo-1.1.tar.gz")) + "]"),
            "attestation 1: the statement is about demo-1.1.tar.gz, not " + std::string(kFile));
  EXPECT_EQ(
      f.refusal("[" + attestation(f.cert, f.key, statement(kFile, std::string(64, 'c'))) + "]"),
      "attestation 1: the statement's sha256 (" + std::string(64, 'c') + ") is not the file's (" +
          kSha + ")");
  EXPECT_EQ(
      f.refusal("[" + attestation(f.cert, f.key, statement(kFile, kSha, "https://x/y")) + "]"),
      "attestation 1: predicate type https://x/y is not one of " + std::string(kPublishPredicate) +
          ", " + std::string(kSlsaPredicate));
  // Another spelling of the same name (upper case, a normalized project) is the same file.
  EXPECT_TRUE(f.verify(
      "[" + attestation(f.cert, f.key, statement("Demo-1.0-cp312-cp312-linux_x86_64.whl")) + "]"));
  const std::string two_subjects =
      R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a"},{"name":"b"}],)"
      R"("predicateType":"https://slsa.dev/provenance/v1"})";
  EXPECT_EQ(f.refusal("[" + attestation(f.cert, f.key, two_subjects) + "]"),
            "attestation 1: the statement has 2 subjects, not one");
  EXPECT_EQ(f.refusal("[" + attestation(f.cert, f.key, R"({"_type":"x"})") + "]"),
            "attestation 1: the statement is not an in-toto v1 statement (_type)");
}

TEST(Attestation, TheCertificateMustChainBeValidAndSignCode) {
  const Fixture f;
  const TestPki other;
  const auto foreign = other.leaf(github_job(), f.key);
  EXPECT_NE(f.refusal("[" + attestation(foreign, f.key, statement()) + "]")
                .find("does not chain to a trusted root"),
            std::string::npos);
  Fixture later;
  later.check.now += 3600;
  EXPECT_NE(later.refusal("[" + attestation(later.cert, later.key, statement()) + "]")
                .find("certificate has expired"),
            std::string::npos);
  CertSpec no_code = github_job();
  no_code.code_signing = false;
  const auto tls = f.pki.leaf(no_code, f.key);
  EXPECT_EQ(f.refusal("[" + attestation(tls, f.key, statement()) + "]"),
            "attestation 1: its certificate is not for code signing (extended key usage)");
}

TEST(Attestation, OneUploadHasOneSigner) {
  const Fixture f;
  const auto other_job = f.pki.leaf(github_job("org/other"), f.key);
  EXPECT_EQ(f.refusal("[" + attestation(f.cert, f.key, statement()) + "," +
                      attestation(other_job, f.key, statement()) + "]"),
            "attestation 2: signed by "
            "https://github.com/org/other/.github/workflows/release.yml@refs/tags/v1, "
            "attestation 1 by https://github.com/org/repo/.github/workflows/release.yml@refs/"
            "tags/v1: one upload's attestations have one signer");
}

TEST(Attestation, TheTrustedPublisherThatUploadsMustBeTheSigner) {
  Fixture f;
  catalog::PublisherRecord publisher;
  publisher.id = 7;
  publisher.project = "demo";
  publisher.issuer = "github";
  publisher.claims = {{"environment", "release"},
                      {"job_workflow_ref", "org/repo/.github/workflows/release.yml@refs/tags/v1"},
                      {"repository", "org/repo"}};
  f.check.publisher = &publisher;
  f.check.publisher_issuer_url = std::string(kGitHub);
  const std::string one = "[" + attestation(f.cert, f.key, statement()) + "]";
  EXPECT_TRUE(f.verify(one)) << f.refusal(one);

  publisher.claims = {{"repository", "org/another"}};
  EXPECT_EQ(f.refusal(one),
            "attestation 1: its certificate does not match trusted publisher #7: the publisher "
            "requires repository=org/another, the certificate says https://github.com/org/repo "
            "(extension 1.3.6.1.4.1.57264.1.12)");
  publisher.claims = {{"ref", "refs/heads/main"}};
  EXPECT_EQ(f.refusal(one),
            "attestation 1: its certificate does not match trusted publisher #7: the publisher "
            "requires ref=refs/heads/main, the certificate says refs/tags/v1 (extension "
            "1.3.6.1.4.1.57264.1.14)");
  publisher.claims = {{"sha", "0123"}};
  EXPECT_NE(f.refusal(one).find("requires sha=0123, the certificate says nothing"),
            std::string::npos);
  publisher.claims = {{"environment", "release"}};
  EXPECT_EQ(f.refusal(one),
            "attestation 1: trusted publisher #7 requires no claim that a signing certificate "
            "carries (such as repository or project_path), so no certificate can be matched to "
            "it");
  publisher.claims = {{"repository", "org/repo"}};
  f.check.publisher_issuer_url = "https://gitlab.com";
  EXPECT_EQ(f.refusal(one),
            "attestation 1: its certificate was issued for a job of "
            "https://token.actions.githubusercontent.com, not of trusted publisher #7's issuer "
            "https://gitlab.com");
}

render::BuildFacts build_facts() {
  render::BuildFacts f;
  f.builder = "http://127.0.0.1:8080";
  f.recipe = "demo";
  f.project = "demo";
  f.version = "1.0";
  f.python = "3.12";
  f.torch = "2.8";
  f.cuda = "12.8";
  f.arch_list = "8.0;9.0";
  f.source_kind = "git";
  f.source_uri = "git+https://git.example/demo.git@v1.0";
  f.source_digest = {"gitCommit", std::string(40, 'c')};
  f.toolchain.nvcc_version = "12.8.93";
  f.toolchain.torch_version = "2.8.0+cu128";
  f.toolchain.python_version = "3.12.4";
  f.container.image = "registry.example/cuda:12.8";
  f.container.image_digest = "sha256:" + std::string(64, 'd');
  f.build_id = 4;
  f.job_id = 9;
  f.runner = "host:1:/var/lib/wheelforge/builds";
  f.started_at = "2026-01-02T03:04:05Z";
  return f;
}

struct Signer {
  crypto::SigningKey key = *crypto::SigningKey::generate();
  crypto::Certificate certificate = *crypto::Certificate::from_der(*key.self_signed_certificate(
      "wheelforge build provenance", "http://127.0.0.1:8080", std::time(nullptr), 30));
  BuildSigner signer = *BuildSigner::make(key, certificate);
};

TEST(BuildSigner, TheRunnersProvenanceVerifiesAgainstTheServersCertificate) {
  const Signer s;
  auto provenance = s.signer.provenance(build_facts(), kFile, kSha);
  ASSERT_TRUE(provenance) << provenance.error().message;
  const auto object = nlohmann::json::parse(*provenance);
  ASSERT_EQ(object["version"], 1);
  const auto& bundle = object["attestation_bundles"][0];
  EXPECT_EQ(bundle["publisher"],
            nlohmann::json::parse(R"({"kind":"wheelforge","builder":"http://127.0.0.1:8080",
                "recipe":"demo","build":"4","job":"9"})"));
  ASSERT_EQ(bundle["attestations"].size(), 1U);
  const std::string attestations = "[" + bundle["attestations"][0].dump() + "]";

  // Our own verifier accepts it, with the certificate as the only trust root.
  const auto roots = *crypto::TrustStore::from_pem(s.certificate.pem());
  const AttestationCheck check{std::string(kFile), kSha, std::time(nullptr), nullptr, ""};
  auto verified = verify_attestations(attestations, roots, check);
  ASSERT_TRUE(verified) << verified.error().message;
  EXPECT_EQ(verified->identity, "http://127.0.0.1:8080");

  // The statement says how the wheel was made.
  const auto parsed = render::parse_attestations(attestations);
  ASSERT_TRUE(parsed);
  const auto statement = nlohmann::json::parse((*parsed)[0].statement);
  EXPECT_EQ(statement["subject"][0]["name"], kFile);
  EXPECT_EQ(statement["subject"][0]["digest"]["sha256"], kSha);
  EXPECT_EQ(statement["predicateType"], kSlsaPredicate);
  const auto& definition = statement["predicate"]["buildDefinition"];
  EXPECT_EQ(definition["buildType"], render::kRunnerBuildType);
  EXPECT_EQ(definition["externalParameters"]["cell"],
            nlohmann::json::parse(R"({"python":"3.12","torch":"2.8","cuda":"12.8"})"));
  EXPECT_EQ(definition["resolvedDependencies"][0],
            nlohmann::json::parse(R"({"uri":"git+https://git.example/demo.git@v1.0",
                "digest":{"gitCommit":")" +
                                  std::string(40, 'c') + R"("}})"));
  EXPECT_EQ(definition["resolvedDependencies"][1]["digest"]["sha256"], std::string(64, 'd'));
  const auto& run = statement["predicate"]["runDetails"];
  EXPECT_EQ(run["builder"]["version"]["nvcc"], "12.8.93");
  EXPECT_EQ(run["metadata"]["invocationId"], "build 4 job 9");

  // Against other roots, or for other bytes, it does not verify.
  const auto other = wf::testing::TestPki();
  const auto other_roots = *crypto::TrustStore::from_pem(other.trust_pem());
  EXPECT_FALSE(verify_attestations(attestations, other_roots, check));
  AttestationCheck other_file = check;
  other_file.sha256 = std::string(64, 'b');
  EXPECT_FALSE(verify_attestations(attestations, roots, other_file));
}

TEST(BuildSigner, TheCertificateMustBeTheKeysAndSignCode) {
  const Signer s;
  const auto other = *crypto::SigningKey::generate();
  auto mismatched = BuildSigner::make(other, s.certificate);
  ASSERT_FALSE(mismatched);
  EXPECT_EQ(mismatched.error().message,
            "the certificate http://127.0.0.1:8080 is not for this private key");
  TestPki pki;
  const Key key = wf::testing::make_p256_key();
  CertSpec spec = github_job();
  spec.code_signing = false;
  const auto not_for_code =
      *crypto::Certificate::from_der(wf::testing::der_of(pki.leaf(spec, key)));
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  const auto signing_key =
      *crypto::SigningKey::from_pem(std::string(data, static_cast<std::size_t>(len)));
  BIO_free(bio);
  auto refused = BuildSigner::make(signing_key, not_for_code);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("is not for code signing"), std::string::npos);
}

}  // namespace
}  // namespace wf::auth
