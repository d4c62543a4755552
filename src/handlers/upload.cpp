#include "wheelforge/handlers/upload.hpp"

#include "handlers.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/handlers/oidc.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {

Result<UploadPlan> plan_upload(const Request& req, std::optional<std::uint64_t> content_length,
                               std::uint64_t max_size, const snapshot::Snapshot& snap) {
  // Credentials first: an anonymous client learns nothing about names or limits.
  auto token = auth::token_from_authorization(req.header("authorization"));
  if (!token) return token.error();
  const auto& seg = req.segments;  // seg[0] == "upload"
  if (seg.size() < 2 || (seg.size() == 2 && seg[1].empty())) {
    if (auto granted = auth::authorize(snap.tokens(), *token, catalog::Scope::upload); !granted) {
      return granted.error();
    }
    return make_error(Errc::invalid,
                      "missing file name: PUT the file to /upload/<filename> "
                      "(curl -T file.whl URL/upload/ adds it)");
  }
  if (seg.size() > 2) {
    return make_error(Errc::invalid, "invalid file name: it must not contain '/'");
  }
  // The attestations companion: named after the file it is for.
  const bool attestations = std::string_view(seg[1]).ends_with(kAttestationsSuffix) &&
                            seg[1].size() > kAttestationsSuffix.size();
  const std::string filename =
      attestations ? seg[1].substr(0, seg[1].size() - kAttestationsSuffix.size()) : seg[1];
  auto name = core::parse_dist_filename(filename);
  auto granted =
      auth::authorize(snap.tokens(), *token, catalog::Scope::upload,
                      name ? std::optional<std::string_view>(name->normalized_name) : std::nullopt);
  if (!granted) return granted.error();
  if (!name) return make_error(Errc::invalid, "invalid file name: " + name.error().message);
  const core::Uploader uploader = auth::uploader_of(**granted);
  // Refused before the body is read; the catalog decides again when the file is recorded.
  const auto* project = snap.find_project(name->normalized_name);
  if (core::decide_upload(project ? std::optional(project->claim) : std::nullopt, uploader,
                          name->normalized_name) == core::ClaimDecision::forbidden) {
    return make_error(Errc::forbidden, core::not_owner_message(name->normalized_name));
  }
  if (attestations && content_length && *content_length > kMaxAttestationsBody) {
    return body_too_large("attestations", *content_length, kMaxAttestationsBody);
  }
  if (content_length && *content_length > max_size) {
    return body_too_large("upload", *content_length, max_size);
  }
  return UploadPlan{filename, uploader, catalog::Actor::of_token(**granted, req.peer),
                    attestations};
}

Result<std::string> plan_form(const Request& req, std::optional<std::uint64_t> content_length,
                              std::uint64_t max_file_size) {
  auto boundary = boundary_from_content_type(req.header("content-type"));
  if (!boundary) return boundary.error();
  const std::uint64_t limit =
      max_file_size > UINT64_MAX - kFormOverhead ? UINT64_MAX : max_file_size + kFormOverhead;
  if (content_length && *content_length > limit) {
    return body_too_large("upload", *content_length, max_file_size);
  }
  return boundary;
}

namespace {

const char* outcome_name(ingest::Outcome outcome) {
  switch (outcome) {
    case ingest::Outcome::stored:
      return "stored";
    case ingest::Outcome::identical:
      return "identical";
    case ingest::Outcome::restored:
      return "restored";
  }
  return "stored";
}

/// The answer to an ingest, with what the server logs and counts about it.
Response answer(const Result<ingest::Ingested>& result, std::string_view filename, Context& ctx) {
  if (!result) {
    const Error& e = result.error();
    const bool failed = status_for(e.code) >= 500;
    ctx.upload_outcome = failed ? "failed" : "rejected";
    ctx.changed = Changed::nothing;
    ctx.note = "upload of " + sanitize_for_log(filename) + (failed ? " failed: " : " rejected: ") +
               sanitize_for_log(e.message, 500);
    return error_response(e);
  }
  const auto& file = result->file;
  const char* outcome = outcome_name(result->outcome);
  ctx.upload_outcome = outcome;
  // One stored file moves the generation by one (the files insert trigger): only its project
  // is read again.
  ctx.changed = result->outcome == ingest::Outcome::identical ? Changed::nothing : Changed::project;
  ctx.changed_project = file.project;
  ctx.note = std::string("upload ") + outcome + " " + sanitize_for_log(file.filename) +
             " sha256=" + file.sha256 + " size=" + std::to_string(file.size);
  Response r;
  // A damaged file healed by its own bytes is stored again: 201, as for a new one.
  r.status = result->outcome == ingest::Outcome::identical ? 200 : 201;
  r.set("Content-Type", "application/json");
  r.body = render::render_stored_file(file);
  return r;
}

/// What an upload's attestations are checked against: the configured trust roots and, for a
/// token minted for a trusted publisher, that publisher (read from the catalog: it may have been
/// removed since, and then the token's uploads carry no attestations).
Result<ingest::Attestations> attestations_of(const catalog::TokenRecord& token, std::string json,
                                             Context& ctx) {
  ingest::Attestations a;
  a.json = std::move(json);
  a.roots = ctx.env.attestation_roots;
  if (token.publisher_id == 0) return a;
  auto publishers = ctx.env.services.catalog->publishers();
  if (!publishers) return publishers.error();
  for (auto& p : *publishers) {
    if (p.id != token.publisher_id) continue;
    const auth::oidc::IssuerConfig* issuer = nullptr;
    if (ctx.env.oidc != nullptr) {
      for (const auto& i : ctx.env.oidc->issuers()) {
        if (i.name == p.issuer) issuer = &i;
      }
    }
    if (issuer == nullptr) {
      return make_error(Errc::invalid, "attestations: the issuer " + p.issuer +
                                           " of trusted publisher #" + std::to_string(p.id) +
                                           " is no longer configured");
    }
    a.publisher_issuer_url = issuer->url;
    a.publisher = std::move(p);
    return a;
  }
  return make_error(Errc::invalid, "attestations: trusted publisher #" +
                                       std::to_string(token.publisher_id) +
                                       ", which this token was minted for, was removed");
}

/// Finishes a form and ingests its file. Unlike PUT, an identical file is a conflict: twine,
/// poetry and pdm expect a repeated upload to fail (docs/clients.md, "twine, poetry, pdm").
Result<ingest::Ingested> ingest_form(const Request& req, LegacyUpload& form, Context& ctx) {
  ingest::Ingestor& ingestor = *ctx.env.services.ingestor;
  auto filename = form.finish();
  if (!filename) {
    // When the form disagrees with its file, name what is wrong inside the file as well
    // (twine fills name/version from METADATA, so the form often inherits the problem:
    // docs/clients.md, "twine, poetry, pdm").
    Error e = filename.error();
    if (e.code == Errc::invalid) {
      if (const auto name = form.received_filename(); name && !name->empty()) {
        if (auto st = ingestor.check(form.file_path(), *name); !st) {
          e.message += "; " + st.error().message;
        }
      }
    }
    return e;
  }
  // Project-limited tokens can only be checked now that the file name is known.
  const auto name = core::parse_dist_filename(*filename);
  auto token = auth::token_from_authorization(req.header("authorization"));
  if (!token) return token.error();
  auto granted =
      auth::authorize(ctx.snapshot.tokens(), *token, catalog::Scope::upload,
                      name ? std::optional<std::string_view>(name->normalized_name) : std::nullopt);
  if (!granted) return granted.error();
  std::optional<ingest::Attestations> attestations;
  if (auto json = form.attestations()) {
    auto made = attestations_of(**granted, std::move(*json), ctx);
    if (!made) return made.error();
    attestations = std::move(*made);
  }
  auto result = ingestor.ingest(form.take_file(), *filename, auth::uploader_of(**granted),
                                catalog::Actor::of_token(**granted, req.peer),
                                attestations ? &*attestations : nullptr);
  if (result && result->outcome == ingest::Outcome::identical) {
    return make_error(Errc::conflict, "File already exists: " + sanitize_for_log(*filename, 300) +
                                          " was uploaded before (identical content)");
  }
  return result;
}

/// `PUT /upload/<filename>.attestations`: the attestations of a stored file, added to it.
Response put_attestations(const Request& req, Context& ctx) {
  UploadedBody& body = *ctx.upload;
  const std::string& filename = body.plan.filename;
  const auto refused = [&](const Error& e) {
    ctx.changed = Changed::nothing;
    ctx.note = "attestations for " + sanitize_for_log(filename) +
               (status_for(e.code) >= 500 ? " failed: " : " rejected: ") +
               sanitize_for_log(e.message, 500);
    return error_response(e);
  };
  if (auto st = body.file->finish(store::Sync::deferred); !st) return refused(st.error());
  auto json = read_small_file(body.file->path(), kMaxAttestationsBody);
  if (!json) return refused(json.error());
  const auto name = core::parse_dist_filename(filename);
  auto token = auth::token_from_authorization(req.header("authorization"));
  if (!token) return refused(token.error());
  auto granted =
      auth::authorize(ctx.snapshot.tokens(), *token, catalog::Scope::upload,
                      name ? std::optional<std::string_view>(name->normalized_name) : std::nullopt);
  if (!granted) return refused(granted.error());
  auto attestations = attestations_of(**granted, std::move(*json), ctx);
  if (!attestations) return refused(attestations.error());
  auto added =
      ctx.env.services.ingestor->add_attestations(filename, *attestations, body.plan.actor);
  if (!added) return refused(added.error());
  const auto& [file, changed] = *added;
  ctx.changed = changed ? Changed::project : Changed::nothing;
  ctx.changed_project = file.project;
  ctx.note = std::string(changed ? "attestations added to " : "attestations unchanged for ") +
             sanitize_for_log(file.filename) + " provenance=" + file.provenance_sha256;
  Response r;
  r.status = changed ? 201 : 200;
  r.set("Content-Type", "application/json");
  r.body = render::render_stored_file(file);
  return r;
}

}  // namespace

Response handle_put_upload(const Request& req, Context& ctx) {
  UploadedBody& body = *ctx.upload;
  if (body.plan.attestations) return put_attestations(req, ctx);
  auto result = ctx.env.services.ingestor->ingest(std::move(*body.file), body.plan.filename,
                                                  body.plan.uploader, body.plan.actor);
  return answer(result, body.plan.filename, ctx);
}

Response handle_form_upload(const Request& req, Context& ctx) {
  auto result = ingest_form(req, *ctx.upload->form, ctx);
  return answer(result, result ? result->file.filename : "(form upload)", ctx);
}

}  // namespace wf::handlers
