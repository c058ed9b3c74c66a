// view/page_cache.hpp — rendered pages kept until the state they show changes.
//
// A page that shows shared state (a board's newest posts) is the same for every reader until
// that state changes, but for one value per client: the CSRF token in its forms. Rendering
// it again for each reader is most of what a read costs (templates, escaping, dates). A
// PageCache keeps each such page rendered once, from a state named by a version number,
// with a marker where the token goes; serving it again is pasting the reader's token in.
//
//   // under the lock that keeps the state from changing:
//   if (auto page = cache.find(key, version)) return page->with_token(token);
//   ... render with cache.marker() as the token, then:
//   auto page = cache.store(key, version, html);
//
// The marker is 32 random hex digits drawn at start and never sent to anyone, so no post can
// contain it. Only tokens that every escaper leaves alone ([0-9A-Za-z_-], such as kagi's hex
// CSRF tokens) may be pasted: the page must be byte for byte what rendering it would give.
// Context::render_cached (app/context.hpp) does all of this for a handler.
//
// Thread-safe. At most `max_pages` pages are kept; a new one pushes out the one rendered from
// the oldest state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <kagi/util/mutex.hpp>
#include <kagi/util/thread_annotations.hpp>

namespace kagi::view {

// A rendered page cut at each place the token goes.
class CachedPage {
 public:
  // Cuts `html` at every `marker` in it.
  CachedPage(std::string_view html, std::string_view marker);

  // The page with `token` in each marked place.
  std::string with_token(std::string_view token) const;
  size_t marked_places() const { return pieces_.size() - 1; }

 private:
  std::vector<std::string> pieces_;  // the text between the marked places (one more than them)
  size_t text_size_ = 0;
};

// True when `token` reads the same after any escaping (HTML, attribute, URL, JavaScript).
bool pastable_token(std::string_view token);

class PageCache {
 public:
  explicit PageCache(size_t max_pages);
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  // What to render in place of the token.
  const std::string& marker() const { return marker_; }
  size_t max_pages() const { return max_pages_; }

  // The page `key` rendered from state `version`, or nullptr (none, or one of another state).
  std::shared_ptr<const CachedPage> find(const std::string& key, uint64_t version) const
      KAGI_EXCLUDES(mu_);
  // Keeps `html` (rendered with marker()) as page `key` of state `version`, unless a newer
  // state's page is kept already, and returns it cut.
  std::shared_ptr<const CachedPage> store(const std::string& key, uint64_t version,
                                          std::string_view html) KAGI_EXCLUDES(mu_);

 private:
  struct Kept {
    uint64_t version = 0;
    std::shared_ptr<const CachedPage> page;
  };
  const size_t max_pages_;
  const std::string marker_;
  mutable util::Mutex mu_;
  std::unordered_map<std::string, Kept> pages_ KAGI_GUARDED_BY(mu_);
};

}  // namespace kagi::view
