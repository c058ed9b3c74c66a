#include <kagi/app/session.hpp>

namespace kagi {

Session::Session(offline::SessionStore& store, const http::Request& request) : store_(store) {
  if (auto id = request.cookies.get(kCookie)) id_ = std::string(*id);
}

void Session::load() {
  if (loaded_) return;
  loaded_ = true;
  if (id_.empty() || !offline::SessionStore::well_formed(id_)) return;
  record_ = store_.load(id_).value();
}

bool Session::exists() {
  load();
  return record_.has_value();
}

void Session::create() {
  auto [id, record] = store_.create("").value();
  id_ = std::move(id);
  record_ = std::move(record);
  change_ = CookieChange::kSet;
}

const std::string& Session::owner() {
  if (!exists()) create();
  return record_->owner;
}

std::string Session::name() { return exists() ? record_->name : std::string(); }

void Session::set_name(std::string_view name) {
  if (!exists()) create();
  store_.set_name(id_, name).check();
  record_ = store_.load(id_).value();
}

void Session::rotate() {
  if (!exists()) {
    create();  // a fresh id already
    return;
  }
  if (auto fresh = store_.rotate(id_).value()) {
    id_ = std::move(*fresh);
    change_ = CookieChange::kSet;
  } else {
    record_.reset();  // it ended meanwhile: start a new one
    create();
  }
}

std::string Session::end() {
  load();
  std::string owner;
  if (!id_.empty()) owner = store_.end(id_).value();
  if (!id_.empty() || record_) change_ = CookieChange::kClear;
  record_.reset();
  id_.clear();
  return owner;
}

std::optional<http::Cookie> Session::cookie() const {
  if (change_ == CookieChange::kNone) return std::nullopt;
  http::Cookie c;
  c.name = std::string(kCookie);
  if (change_ == CookieChange::kSet) {
    c.value = id_;
  } else {
    c.max_age_s = 0;  // tells the browser to drop it
  }
  return c;
}

}  // namespace kagi
