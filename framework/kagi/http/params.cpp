#include <kagi/http/params.hpp>

namespace kagi::http {

std::optional<std::string_view> Params::get(std::string_view name) const {
  for (const auto& [key, value] : items_) {
    if (key == name) return value;
  }
  return std::nullopt;
}

std::string_view Params::value_or(std::string_view name, std::string_view fallback) const {
  auto value = get(name);
  return value ? *value : fallback;
}

std::vector<std::string_view> Params::all(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [key, value] : items_) {
    if (key == name) out.push_back(value);
  }
  return out;
}

}  // namespace kagi::http
