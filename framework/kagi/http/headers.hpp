// http/headers.hpp — an HTTP header list with case-insensitive names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kagi::http {

bool iequals(std::string_view a, std::string_view b);

class Headers {
 public:
  using Item = std::pair<std::string, std::string>;

  // Appends (a header may repeat, e.g. Set-Cookie).
  void add(std::string name, std::string value);
  // Replaces every header of that name by one.
  void set(std::string name, std::string value);
  void remove(std::string_view name);
  std::optional<std::string_view> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }

  const std::vector<Item>& items() const { return items_; }
  // Room for `n` headers in all, so that adding up to that many allocates no more slots.
  void reserve(size_t n) { items_.reserve(n); }
  size_t size() const { return items_.size(); }

 private:
  std::vector<Item> items_;
};

}  // namespace kagi::http
