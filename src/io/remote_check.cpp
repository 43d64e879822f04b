// check_remote (sluice/remote_check.hpp): the resolved target and one blocking GET of the first
// byte on its own easy handle. It does not go through RemoteReader on purpose: a check wants the
// one answer as it came (no retry, a 200 reported rather than refused) and libcurl's per-phase
// times (connect, TLS, first byte), which the reader's multi loop does not keep.
#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "io/remote_response.hpp"
#include "io/remote_target.hpp"
#include "sluice/error.hpp"
#include "sluice/remote.hpp"
#include "sluice/remote_check.hpp"

namespace sluice {
// Named so that, in a unity batch, these helpers cannot meet another file's of the same name.
namespace remote_check_impl {
namespace {

constexpr std::size_t max_body = 64 * 1024;  // an error document; a 200's body is cut here
constexpr long probe_timeout_ms = 30000;

struct Probe {
  std::string content_range, body;
  char errbuf[CURL_ERROR_SIZE] = {};
};

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* p = static_cast<Probe*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) p->content_range.clear();
  if (const auto h = remote::parse_header_line(line)) {
    if (remote::header_is(h->name, "Content-Range")) p->content_range = h->value;
  }
  return size * n;
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* p = static_cast<Probe*>(user);
  if (p->body.size() >= max_body) return 0;  // enough: stops a 200's whole object
  p->body.append(data, std::min(size * n, max_body - p->body.size()));
  return size * n;
}

std::string hide_query(const std::string& url) {
  const auto q = url.find('?');
  return q == std::string::npos ? url : url.substr(0, q) + "?...";
}

std::string mask(const std::string& key_id) {
  return key_id.size() <= 4
             ? std::string("****")
             : std::string(key_id.size() - 4, '*') + key_id.substr(key_id.size() - 4);
}

double ms(CURL* e, CURLINFO what) {
  curl_off_t us = 0;
  curl_easy_getinfo(e, what, &us);
  return static_cast<double>(us) / 1000.0;
}

void set_request(CURL* e, const remote::RemoteTarget& t, Probe& p, curl_slist*& headers) {
  curl_easy_setopt(e, CURLOPT_URL, t.request_url.c_str());
  if (!t.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, t.ca_bundle.c_str());
  curl_easy_setopt(e, CURLOPT_RANGE, "0-0");
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 8L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, probe_timeout_ms);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p.errbuf);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &p);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &p);
  if (t.sign) headers = remote::sign_sigv4(e, *t.sign, headers);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
}

// The answer: status, S3 error, size, TLS, and an error line when it is not the first byte.
void read_answer(CURL* e, CURLcode rc, const Probe& p, RemoteCheck& c) {
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c.http_status);
  c.connect_ms = ms(e, CURLINFO_CONNECT_TIME_T);
  c.tls_ms = ms(e, CURLINFO_APPCONNECT_TIME_T);
  c.first_byte_ms = ms(e, CURLINFO_STARTTRANSFER_TIME_T);
  c.total_ms = ms(e, CURLINFO_TOTAL_TIME_T);
  const bool tls_failed = rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
                          rc == CURLE_SSL_CONNECT_ERROR;
  if (!c.tls) {
    c.tls_verify = "not used (http)";
  } else if (tls_failed) {
    const std::string what = p.errbuf[0] ? p.errbuf : curl_easy_strerror(rc);
    c.tls_verify = rc == CURLE_SSL_CONNECT_ERROR
                       ? fmt::format("failed: {}", what)
                       : fmt::format(
                             "failed: {} (the CA bundle {} does not hold the CA that "
                             "signed the endpoint's certificate: set AWS_CA_BUNDLE, or "
                             "the profile's ca_bundle, to one that does)",
                             what, c.ca_bundle.empty() ? "(libcurl's)" : c.ca_bundle);
  } else {
    c.tls_verify = c.tls_ms > 0 ? "verified (certificate chain and host name)" : "not reached";
  }
  if (c.http_status != 206 && c.http_status != 200 && !p.body.empty()) {
    const remote::S3Error s3 = remote::parse_s3_error(p.body);
    c.s3_code = s3.code;
    c.s3_message = s3.message;
  }
  if (c.http_status == 206) {
    if (const auto cr = remote::parse_content_range(p.content_range)) c.object_size = cr->total;
  }
  const bool answered = c.http_status == 206 || c.http_status == 200;
  if (rc != CURLE_OK && !(answered && rc == CURLE_WRITE_ERROR)) {
    c.error = fmt::format("{}: {}", curl_easy_strerror(rc), p.errbuf[0] ? p.errbuf : "");
  } else if (!answered) {
    c.error = fmt::format("HTTP {}{}{}", c.http_status, c.s3_code.empty() ? "" : " " + c.s3_code,
                          c.s3_message.empty() ? "" : ": " + c.s3_message);
  }
}

void describe(const remote::RemoteTarget& t, RemoteCheck& c) {
  c.request_url = hide_query(t.request_url);
  c.endpoint = t.endpoint;
  c.endpoint_from = t.endpoint_from;
  c.region = t.region;
  c.region_from = t.region_from;
  c.addressing = t.addressing;
  c.addressing_from = t.addressing_from;
  c.credentials = t.credentials.empty() ? "none: the URL as given" : t.credentials;
  if (t.sign) {
    c.access_key = mask(t.sign->key_id);
    c.session_token = !t.sign->session_token.empty();
  }
  c.tls = t.request_url.starts_with("https://");
  c.ca_bundle = t.ca_bundle;
  c.ca_bundle_from = t.ca_bundle_from;
}

}  // namespace
}  // namespace remote_check_impl

RemoteCheck check_remote(const std::string& url, bool probe) {
  namespace impl = remote_check_impl;
  RemoteCheck c;
  c.url = impl::hide_query(url);
  const remote::RemoteTarget t = remote::resolve_remote(url);
  impl::describe(t, c);
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* e = curl_easy_init();
  if (e == nullptr) throw_os_error(ENOMEM, {.op = "check", .path = c.url}, "curl_easy_init");
  if (c.tls && c.ca_bundle.empty()) {  // the bundle libcurl was built to use
    char* builtin = nullptr;
    if (curl_easy_getinfo(e, CURLINFO_CAINFO, &builtin) == CURLE_OK && builtin != nullptr) {
      c.ca_bundle = builtin;
      c.ca_bundle_from = "libcurl's default";
    }
  }
  if (probe) {
    impl::Probe p;
    curl_slist* headers = nullptr;
    impl::set_request(e, t, p, headers);
    const CURLcode rc = curl_easy_perform(e);
    c.probed = true;
    impl::read_answer(e, rc, p, c);
    curl_slist_free_all(headers);
  }
  curl_easy_cleanup(e);
  return c;
}

}  // namespace sluice
