// A request's admission (http/session.hpp): the client it comes from (behind a trusted proxy,
// from its forwarding header), that client's place under the per-client cap, and the access
// check before the request runs.

#include <limits>

#include "session.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {

template <class Stream>
void Session<Stream>::find_client() {
  const std::string_view name = srv_.config.forwarded_header == ForwardedHeader::forwarded
                                    ? std::string_view("forwarded")
                                    : std::string_view("x-forwarded-for");
  thread_local std::vector<std::string_view> values;
  values.clear();
  for (const auto& [field, value] : req_.headers) {
    if (field == name) values.emplace_back(value);
  }
  const ClientAddress client =
      client_address(peer_ip_, srv_.config.trusted_proxies, srv_.config.forwarded_header, values);
  client_ip_ = client.address;
  switch (client.source) {
    case ClientSource::peer:
      req_.peer = peer_text_;
      return;
    case ClientSource::forwarded:
      srv_.status.forwarded_requests.fetch_add(1, std::memory_order_relaxed);
      req_.peer = ip_to_string(client.address);
      return;
    case ClientSource::malformed:
      srv_.status.forwarded_malformed.fetch_add(1, std::memory_order_relaxed);
      log::debug(
          "req={} {} header from trusted proxy {} names no client address ('{}'); the "
          "proxy is taken for the client",
          id_, name, peer_text_, sanitize_for_log(values.empty() ? "" : values.back(), 200));
      req_.peer = peer_text_;
      return;
  }
}

template <class Stream>
void Session<Stream>::count_client() {
  const auto key = ClientCounts::ipv6(client_ip_);
  const auto limit = static_cast<std::uint32_t>(
      std::min<std::size_t>(srv_.config.max_connections_per_client, UINT32_MAX));
  asio::post(srv_.threads.front()->ioc, [self = self(), key, limit] {
    auto slot = self->srv_.clients.acquire(key, limit);
    asio::post(self->home_.ioc, [self, slot] { self->client_counted(slot); });
  });
}

template <class Stream>
void Session<Stream>::client_counted(std::optional<ClientCounts::Slot> slot) {
  if (!slot) {
    srv_.status.refused_forwarded.fetch_add(1, std::memory_order_relaxed);
    log::debug("req={} refused: {} has {} requests in progress through proxies and connections",
               id_, req_.peer, srv_.config.max_connections_per_client);
    Response r = error_response(
        make_error(Errc::unavailable, "too many requests from your address at once: the limit is " +
                                          std::to_string(srv_.config.max_connections_per_client) +
                                          " per client; retry later"));
    r.set("Retry-After", "1");
    return send(std::move(r));
  }
  request_slot_ = *slot;
  admit();
}

template <class Stream>
void Session<Stream>::release_request_slot() {
  srv_.clients.release(request_slot_);
  request_slot_ = ClientCounts::kUncounted;
}

/// The route's credentials, then its body policy; then the body is read and the handler run.
/// Again after a token recheck.
template <class Stream>
void Session<Stream>::admit() {
  const snapshot::Snapshot& snap = *srv_.snapshot();
  if (auto allowed = handlers::check_access(*route_, req_, snap, srv_.env); !allowed) {
    return refuse_request(allowed.error());
  }
  const auto declared = parser_->content_length();
  const std::optional<std::uint64_t> length =
      declared ? std::optional<std::uint64_t>(*declared) : std::nullopt;
  if (auto refused = handlers::check_body_head(*route_, !parser_->is_done(), length)) {
    return send(error_response(*refused));
  }
  switch (route_->body) {
    case handlers::BodyPolicy::none:
      return run(nullptr);
    case handlers::BodyPolicy::small:
      return body_.read_small(req_.body, handlers::kMaxSmallBody);
    case handlers::BodyPolicy::file:
    case handlers::BodyPolicy::form:
      break;
  }
  auto upload = std::make_unique<handlers::UploadedBody>();
  std::uint64_t limit = srv_.max_file_size();
  std::string boundary;
  if (route_->body == handlers::BodyPolicy::file) {
    auto plan = handlers::plan_upload(req_, length, limit, snap);
    if (!plan) return refuse_request(plan.error());
    body_.name_upload(plan->filename);
    if (plan->attestations) limit = handlers::kMaxAttestationsBody;
    upload->plan = std::move(*plan);
  } else {
    body_.name_upload("(form upload)");
    auto form = handlers::plan_form(req_, length, limit);
    if (!form) return body_.upload_refused(form.error());
    boundary = std::move(*form);
    limit =
        limit > UINT64_MAX - handlers::kFormOverhead ? UINT64_MAX : limit + handlers::kFormOverhead;
  }
  srv_.offload([&srv = srv_] { return srv.env.services.store->create_temp(); },
               [self = self(), upload = std::move(upload), limit,
                boundary = std::move(boundary)](Result<store::TempFile> temp) mutable {
                 if (!temp) return self->body_.upload_refused(temp.error());
                 if (self->route_->body == handlers::BodyPolicy::form) {
                   upload->form =
                       std::make_unique<handlers::LegacyUpload>(boundary, std::move(*temp));
                 } else {
                   upload->file.emplace(std::move(*temp));
                 }
                 self->body_.read_upload(std::move(upload), limit);
               });
}

/// Answers a refusal from the head, unless it is a 401 for a token this server does not know:
/// another process may have just created it (`wheelforge token create`), so the catalog is
/// looked at once (Impl::recheck_tokens) and the request admitted again.
template <class Stream>
void Session<Stream>::refuse_request(const Error& e) {
  if (e.code == Errc::unauthorized && !rechecked_ &&
      handlers::has_unknown_token(req_, *srv_.snapshot())) {
    rechecked_ = true;
    return srv_.recheck_tokens([self = self()] { self->admit(); });
  }
  send(error_response(e));
}

// Session<Stream>'s other members are instantiated with the class, in session.cpp.
template void Session<TcpStream>::find_client();
template void Session<TcpStream>::count_client();
template void Session<TcpStream>::client_counted(std::optional<ClientCounts::Slot>);
template void Session<TcpStream>::release_request_slot();
template void Session<TcpStream>::admit();
template void Session<TcpStream>::refuse_request(const Error&);
template void Session<TlsStream>::find_client();
template void Session<TlsStream>::count_client();
template void Session<TlsStream>::client_counted(std::optional<ClientCounts::Slot>);
template void Session<TlsStream>::release_request_slot();
template void Session<TlsStream>::admit();
template void Session<TlsStream>::refuse_request(const Error&);

}  // namespace wf::http
