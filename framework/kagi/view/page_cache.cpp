#include <kagi/view/page_cache.hpp>

#include <algorithm>

#include <kagi/util/random.hpp>

namespace kagi::view {

CachedPage::CachedPage(std::string_view html, std::string_view marker) {
  size_t from = 0;
  for (size_t at; !marker.empty() && (at = html.find(marker, from)) != std::string_view::npos;
       from = at + marker.size()) {
    pieces_.emplace_back(html.substr(from, at - from));
  }
  pieces_.emplace_back(html.substr(from));
  for (const auto& piece : pieces_) text_size_ += piece.size();
}

std::string CachedPage::with_token(std::string_view token) const {
  std::string out;
  out.reserve(text_size_ + marked_places() * token.size());
  out += pieces_.front();
  for (size_t i = 1; i < pieces_.size(); ++i) {
    out += token;
    out += pieces_[i];
  }
  return out;
}

bool pastable_token(std::string_view token) {
  return std::all_of(token.begin(), token.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
  });
}

PageCache::PageCache(size_t max_pages)
    : max_pages_(max_pages), marker_("kagi" + util::random_hex(16)) {}

std::shared_ptr<const CachedPage> PageCache::find(const std::string& key, uint64_t version) const {
  util::MutexLock lock(mu_);
  auto it = pages_.find(key);
  if (it == pages_.end() || it->second.version != version) return nullptr;
  return it->second.page;
}

std::shared_ptr<const CachedPage> PageCache::store(const std::string& key, uint64_t version,
                                                   std::string_view html) {
  auto page = std::make_shared<const CachedPage>(html, marker_);
  if (max_pages_ == 0) return page;
  util::MutexLock lock(mu_);
  auto it = pages_.find(key);
  if (it != pages_.end()) {
    // A reader that rendered an older state late must not replace a newer one.
    if (it->second.version <= version) it->second = Kept{version, page};
    return page;
  }
  if (pages_.size() >= max_pages_) {
    auto oldest = std::min_element(pages_.begin(), pages_.end(), [](const auto& a, const auto& b) {
      return a.second.version < b.second.version;
    });
    pages_.erase(oldest);
  }
  pages_.emplace(key, Kept{version, page});
  return page;
}

}  // namespace kagi::view
