#pragma once
// Every handler the route table (routes.cpp) names, by family. Each answers one route (or a
// family's catch-all) from its request and context; what the server must check before it is
// called (method, credentials, body) is in the route's row.

#include "wheelforge/handlers/context.hpp"
#include "wheelforge/handlers/message.hpp"

namespace wf::handlers {

// ---- answers and inputs every family uses ----------------------------------------------------

/// 404 with `message` (in the format the request negotiated).
[[nodiscard]] inline Response not_found(std::string message) {
  return error_response(make_error(Errc::not_found, std::move(message)));
}
/// A JSON answer that no cache keeps (tokens, refusals that concern them).
[[nodiscard]] inline Response json_no_store(int status, std::string body) {
  Response r;
  r.status = status;
  r.set("Content-Type", "application/json");
  r.set("Cache-Control", "no-store");
  r.body = std::move(body);
  return r;
}
/// The query's parameters, then the form body's.
[[nodiscard]] inline std::vector<std::pair<std::string, std::string>> request_parameters(
    const Request& req) {
  auto params = parse_form(req.query);
  for (auto& p : parse_form(req.body)) params.push_back(std::move(p));
  return params;
}

// ---- who asks (admin_tokens.cpp) -------------------------------------------------------------

/// The token of the request's Authorization header, as the snapshot knows it; nullptr when
/// there is none (or it is unknown).
[[nodiscard]] const catalog::TokenRecord* caller_token(const Request& req,
                                                       const snapshot::Snapshot& snap);
/// Who the request acts as, for the audit trail: the token (nullptr: "http") and the address.
[[nodiscard]] catalog::Actor actor_of(const Request& req, const catalog::TokenRecord* token);
using Fields = std::vector<std::pair<std::string, std::string>>;
/// A token request from form fields (scope, project, description, expires): the record to
/// store (no hash yet), or Errc::invalid naming every problem.
[[nodiscard]] Result<catalog::TokenRecord> decode_token_request(const Fields& fields, Micros now);
/// Stores a new token made by `by`: the stored record and its secret (shown once).
[[nodiscard]] Result<std::pair<catalog::TokenRecord, std::string>> create_token(
    Context& ctx, catalog::TokenRecord record, const catalog::Actor& by);
/// Records a build request in the audit trail (a failure is logged through ctx.note only:
/// the build runs anyway).
void record_build(Context& ctx, const catalog::Actor& actor, const catalog::BuildRecord& build,
                  std::size_t jobs);

// ---- reads (read.cpp): from the snapshot, on the network thread, no I/O --------------------

/// /simple/... and the variant views /<selector...>/simple/...: root and project pages,
/// redirects to normalized names, 404 for unknown projects (never a redirect elsewhere).
Response handle_simple(const Request& req, Context& ctx);
/// GET /upstream/<upstream>/<sha256>/<filename>[.metadata]: an upstream's file
/// (docs/upstreams.md), fetched once into the blob store and verified against the sha256 its page
/// lists, then served like a local blob. Worker.
Response handle_upstream_file(const Request& req, Context& ctx);
/// /files/<sha256>/<filename>[.metadata]: the file or its METADATA, ranges, ETags; 503 for a
/// damaged file.
Response handle_file(const Request& req, Context& ctx);
/// /api/projects/<name>/variants: the coverage document.
Response handle_variants(const Request& req, Context& ctx);
/// /api/resolve?torch=...: the view for an installed torch.
Response handle_resolve(const Request& req, Context& ctx);
Response handle_healthz(const Request& req, Context& ctx);
/// 200 "ready", 503 "stopping" while the server drains.
Response handle_readyz(const Request& req, Context& ctx);
/// Prometheus text: requests by route and status, uploads, connections, catalog size.
Response handle_metrics(const Request& req, Context& ctx);
/// 404 "not found": the catch-all.
Response handle_not_found(const Request& req, Context& ctx);

// ---- the Integrity API (integrity.cpp): from the snapshot, on the network thread ------------

/// GET /integrity/<project>/<version>/<filename>/provenance: the file's PEP 740 provenance
/// object (a blob, served like its METADATA); 404 naming what is missing (no such file,
/// another project or version, no provenance), 503 for a damaged file.
Response handle_provenance(const Request& req, Context& ctx);
/// GET /_/build-provenance.pem: the certificate of the build runner's provenance.
Response handle_build_certificate(const Request& req, Context& ctx);

// ---- the wheel inspector (inspect.cpp): reads the stored wheel, on a worker -----------------

/// GET /api/files/<sha256>/contents: members, and per ELF member its findings and exported
/// symbols (render::render_file_contents); 404 for an unknown digest or an sdist.
Response handle_file_contents(const Request& req, Context& ctx);

// ---- uploads (upload.cpp): the body has arrived (ctx.upload); on a worker ------------------

/// PUT /upload/<filename>: ingests the file; 201 stored (or healed), 200 identical.
Response handle_put_upload(const Request& req, Context& ctx);
/// POST /legacy/ (twine, poetry, pdm): finishes the form and ingests its file; an identical
/// file is a 409 here, which `twine upload --skip-existing` recognises (docs/clients.md,
/// "twine, poetry, pdm").
Response handle_form_upload(const Request& req, Context& ctx);

// ---- admin API (admin.cpp): admin token checked; on a worker --------------------------------

Response handle_yank(const Request& req, Context& ctx);
Response handle_unyank(const Request& req, Context& ctx);
Response handle_delete_file(const Request& req, Context& ctx);
Response handle_claim(const Request& req, Context& ctx);
Response handle_release(const Request& req, Context& ctx);
Response handle_list_builds(const Request& req, Context& ctx);
Response handle_submit_build(const Request& req, Context& ctx);
Response handle_show_build(const Request& req, Context& ctx);
Response handle_show_job(const Request& req, Context& ctx);
/// The log from ?offset=N; with ?follow=1 the server streams it (ctx.follow).
Response handle_job_log(const Request& req, Context& ctx);
Response handle_cancel_job(const Request& req, Context& ctx);
Response handle_retry_job(const Request& req, Context& ctx);
Response handle_no_admin_endpoint(const Request& req, Context& ctx);
/// GET /admin/tokens: every token, never a secret.
Response handle_list_tokens(const Request& req, Context& ctx);
/// POST /admin/tokens: scope=, [project=], [description=], [expires=]: 201 with the secret.
Response handle_create_token(const Request& req, Context& ctx);
/// POST /admin/tokens/<id>/revoke.
Response handle_revoke_token(const Request& req, Context& ctx);
/// GET /admin/audit?project=&since=&limit=: the audit trail, newest first.
Response handle_audit(const Request& req, Context& ctx);

// ---- trusted publishing (oidc.cpp) -----------------------------------------------------------
Response handle_pytp_discovery(const Request& req, Context& ctx);
Response handle_oidc_audience(const Request& req, Context& ctx);
Response handle_oidc_mint(const Request& req, Context& ctx);
Response handle_list_publishers(const Request& req, Context& ctx);
Response handle_add_publisher(const Request& req, Context& ctx);
Response handle_remove_publisher(const Request& req, Context& ctx);

// ---- web UI (ui_pages.cpp, ui_builds.cpp): on a worker; each checks its caller --------------

Response handle_home(const Request& req, Context& ctx);
/// /inspect/<sha256>: the wheel inspector's page (inspect.cpp).
Response handle_inspect_page(const Request& req, Context& ctx);
Response handle_project_page(const Request& req, Context& ctx);
Response handle_projects(const Request& req, Context& ctx);
Response handle_projects_redirect(const Request& req, Context& ctx);
Response handle_static(const Request& req, Context& ctx);
Response handle_login_form(const Request& req, Context& ctx);
Response handle_login(const Request& req, Context& ctx);
Response handle_logout(const Request& req, Context& ctx);
/// A 404 page: "There is no such page."
Response handle_no_page(const Request& req, Context& ctx);
/// /builds: the admin's way to /builds/.
Response handle_builds_redirect(const Request& req, Context& ctx);
Response handle_builds_page(const Request& req, Context& ctx);
Response handle_start_build(const Request& req, Context& ctx);
Response handle_job_page(const Request& req, Context& ctx);
/// The log from ?offset=N; with ?follow=1 the server streams it (ctx.follow).
Response handle_job_log_page(const Request& req, Context& ctx);
Response handle_cancel_job_page(const Request& req, Context& ctx);
Response handle_retry_job_page(const Request& req, Context& ctx);
/// A 404 page under /builds/ and /jobs/, after the admin check that every page there makes.
Response handle_no_admin_page(const Request& req, Context& ctx);
/// /tokens (ui_tokens.cpp): the admin's way to /tokens/.
Response handle_tokens_redirect(const Request& req, Context& ctx);
/// GET /tokens/: every token; a form to create one.
Response handle_tokens_page(const Request& req, Context& ctx);
/// POST /tokens/: creates a token and shows its secret once.
Response handle_create_token_page(const Request& req, Context& ctx);
/// POST /tokens/<id>/revoke.
Response handle_revoke_token_page(const Request& req, Context& ctx);
// ui_publishers.cpp: the trusted publishers page (admin).
Response handle_publishers_redirect(const Request& req, Context& ctx);
Response handle_publishers_page(const Request& req, Context& ctx);
Response handle_add_publisher_page(const Request& req, Context& ctx);
Response handle_remove_publisher_page(const Request& req, Context& ctx);

}  // namespace wf::handlers
