#include <kagi/http/headers.hpp>

#include <algorithm>

namespace kagi::http {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

void Headers::add(std::string name, std::string value) {
  items_.emplace_back(std::move(name), std::move(value));
}

void Headers::set(std::string name, std::string value) {
  remove(name);
  add(std::move(name), std::move(value));
}

void Headers::remove(std::string_view name) {
  std::erase_if(items_, [&](const Item& item) { return iequals(item.first, name); });
}

std::optional<std::string_view> Headers::get(std::string_view name) const {
  for (const auto& [key, value] : items_) {
    if (iequals(key, name)) return value;
  }
  return std::nullopt;
}

}  // namespace kagi::http
