#include "handlers/handler_bed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers::testing {

std::string basic(std::string_view token) {
  return "Basic " + base64_encode("__token__:" + std::string(token));
}

std::string body_of(const Response& r) {
  if (const auto* s = std::get_if<std::string>(&r.body)) return *s;
  if (const auto* p = std::get_if<std::shared_ptr<const std::string>>(&r.body)) return **p;
  return "<file>";
}

std::string wheel_name(std::string_view project, std::string_view version) {
  std::string dist = core::normalize_name(project);
  std::replace(dist.begin(), dist.end(), '-', '_');
  return dist + "-" + std::string(version) + "-py3-none-any.whl";
}

Request make_request(Method method, std::string target, Headers headers, std::string body) {
  Request r;
  r.method = method;
  auto parsed = parse_target(target);
  EXPECT_TRUE(parsed) << target;
  if (parsed) {
    r.segments = std::move(parsed->first);
    r.query = std::move(parsed->second);
  }
  r.target = std::move(target);
  for (auto& [name, value] : headers) r.headers.emplace_back(to_lower(name), std::move(value));
  r.body = std::move(body);
  return r;
}

HandlerBed::HandlerBed(std::string_view name, bool with_runner) : bed(name) {
  if (with_runner) runner_ = bed.make_runner();
  env.services = Services{bed.catalog.get(), bed.store.get(), bed.ingestor.get(), runner_.get()};
  env.status = &status;
  env.ui_sessions = &sessions;
  admin = token(catalog::Scope::admin);
  upload = token(catalog::Scope::upload);
  read = token(catalog::Scope::read);
  limited = token(catalog::Scope::upload, "demo-pkg");
}

std::string HandlerBed::token(catalog::Scope scope, std::optional<std::string> project) {
  const std::string value = auth::generate_token();
  catalog::TokenRecord t;
  t.hash = auth::hash_token(value);
  t.scope = scope;
  t.project = std::move(project);
  EXPECT_TRUE(bed.catalog->insert_token(t, wf::catalog::Actor{}));
  return value;
}

std::shared_ptr<const snapshot::Snapshot> HandlerBed::snapshot() const {
  auto contents = bed.catalog->load();
  EXPECT_TRUE(contents) << contents.error().message;
  return snapshot::Snapshot::build(std::move(*contents));
}

Response HandlerBed::respond(const Request& req, UploadedBody* upload_body) {
  const auto snap = snapshot();
  Context ctx(*snap, env);
  ctx.upload = upload_body;
  Response r = handlers::respond(req, ctx);
  last = Outputs{ctx.changed,
                 ctx.changed_project,
                 ctx.follow,
                 ctx.unknown_token,
                 std::string(ctx.upload_outcome),
                 ctx.note};
  return r;
}

Response HandlerBed::ui_post(const std::string& target, std::string form, const std::string& token,
                             bool with_form_token) {
  Headers headers = {
      {"host", "idx.example"}, {"origin", "http://idx.example"}, {"authorization", basic(token)}};
  if (with_form_token) form += "&csrf=" + sessions.form_token("token:" + token);
  return respond(Method::post, target, std::move(headers), std::move(form));
}

Response HandlerBed::ui_get(const std::string& target, const std::string& token) {
  Headers headers;
  if (!token.empty()) headers.emplace_back("authorization", basic(token));
  return respond(Method::get, target, std::move(headers));
}

Response HandlerBed::put(const std::string& filename, std::string_view bytes,
                         std::string_view token) {
  auto temp = bed.store->create_temp();
  EXPECT_TRUE(temp) << temp.error().message;
  EXPECT_TRUE(temp->write(bytes.data(), bytes.size()));
  UploadedBody body;
  body.file.emplace(std::move(*temp));
  return respond(make_request(Method::put, "/upload/" + percent_encode_path(filename),
                              {{"authorization", basic(token)}}),
                 &body);
}

Response HandlerBed::post_form(const Headers& fields, const std::string& filename,
                               std::string_view bytes, std::string_view token) {
  const std::string boundary = "wfTestBoundary42";
  std::string form;
  for (const auto& [name, value] : fields) {
    form += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" +
            value + "\r\n";
  }
  form += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"content\"; filename=\"" +
          filename + "\"\r\nContent-Type: application/octet-stream\r\n\r\n";
  form += std::string(bytes) + "\r\n--" + boundary + "--\r\n";
  auto temp = bed.store->create_temp();
  EXPECT_TRUE(temp) << temp.error().message;
  UploadedBody body;
  body.form = std::make_unique<LegacyUpload>(boundary, std::move(*temp));
  EXPECT_TRUE(body.form->feed(form));
  return respond(make_request(Method::post, "/legacy/",
                              {{"authorization", basic(token)},
                               {"content-type", "multipart/form-data; boundary=" + boundary}}),
                 &body);
}

std::string HandlerBed::wheel(std::string_view project, std::string_view version) const {
  const auto path = build::testing::write_wheel(bed.data_dir / "wheels", project, version);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace wf::handlers::testing
