#include <kagi/app/test_client.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>

#include <kagi/app/app.hpp>
#include <kagi/app/csrf.hpp>
#include <kagi/app/responder.hpp>
#include <kagi/http/form.hpp>
#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi {
namespace {

// The answer may come from another thread, later (a parked request), or before handle()
// returns (most do): then it is taken without a wait, so a request costs no system call here
// (a promise's set_value wakes a futex on every answer, which the in-process benchmarks
// would count as the app's).
class WaitingResponder : public Responder {
 public:
  explicit WaitingResponder(std::function<void(const http::Response&)> hook)
      : hook_(std::move(hook)) {}
  void send(http::Response response) override {
    if (hook_) hook_(response);
    util::MutexLock lock(mu_);
    if (answer_) throw std::logic_error("TestClient: a request was answered twice");
    answer_ = std::move(response);
    answered_.notify_all();
  }
  // The answer, once it came; nullopt if none came within `bound`.
  std::optional<http::Response> take(std::chrono::milliseconds bound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    util::MutexLock lock(mu_);
    while (!answer_ && answered_.wait_until(mu_, deadline) != std::cv_status::timeout) {
    }
    return std::move(answer_);
  }

 private:
  std::function<void(const http::Response&)> hook_;
  util::Mutex mu_;
  util::CondVar answered_;
  std::optional<http::Response> answer_ KAGI_GUARDED_BY(mu_);
};

}  // namespace

TestClient::TestClient(App& app, std::string client_address)
    : app_(app), address_(std::move(client_address)) {}

http::Response TestClient::get(std::string target) {
  http::Request request;
  request.method = "GET";
  request.target = std::move(target);
  return send(std::move(request));
}

http::Response TestClient::post_form(
    std::string target, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (token_.empty()) get("/");
  if (token_.empty()) {
    // "/" shows no form, so it set no cookie (the token is made only for pages that ask for
    // it): the client gets one the way a page with a form would have given it.
    token_ = app_.csrf_.issue();
    cookies_.emplace_back(csrf::cookie_name(app_.settings_.behind_https), token_);
  }
  std::string body = "_csrf=" + http::percent_encode(token_);
  for (const auto& [name, value] : fields) {
    body += "&" + http::percent_encode(name) + "=" + http::percent_encode(value);
  }
  http::Request request;
  request.method = "POST";
  request.target = std::move(target);
  request.headers.add("Content-Type", "application/x-www-form-urlencoded");
  request.body = std::move(body);
  return send(std::move(request));
}

http::Response TestClient::send(http::Request request, std::chrono::milliseconds bound) {
  request.client_address = address_;
  std::string header;
  for (const auto& [name, value] : cookies_) {
    header += (header.empty() ? "" : "; ") + name + "=" + value;
  }
  if (!header.empty()) request.headers.add("Cookie", header);
  auto out = std::make_shared<WaitingResponder>(on_answer_);
  app_.handle(std::move(request), out);
  std::optional<http::Response> answer = out->take(bound);
  if (!answer) {
    throw std::runtime_error("TestClient: no answer within " + std::to_string(bound.count()) +
                             " ms");
  }
  http::Response response = std::move(*answer);
  for (const auto& cookie : response.cookies) {
    std::erase_if(cookies_, [&](const auto& kept) { return kept.first == cookie.name; });
    const bool dropped = cookie.max_age_s && *cookie.max_age_s <= 0;
    if (!dropped) cookies_.emplace_back(cookie.name, cookie.value);
    if (cookie.name == "kagi_csrf" || cookie.name == "__Host-kagi_csrf") {
      token_ = dropped ? "" : cookie.value;
    }
  }
  return response;
}

std::string TestClient::cookie(std::string_view name) const {
  for (const auto& [n, value] : cookies_) {
    if (n == name) return value;
  }
  return {};
}

void TestClient::clear_cookies() {
  cookies_.clear();
  token_.clear();
}

}  // namespace kagi
