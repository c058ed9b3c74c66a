// http/params.hpp — ordered name/value lists: query parameters, form fields, cookies,
// path parameters. Lookups return the first match; repeated names keep their order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kagi::http {

class Params {
 public:
  using Item = std::pair<std::string, std::string>;

  void add(std::string name, std::string value) {
    items_.emplace_back(std::move(name), std::move(value));
  }
  // First value for `name`, or nullopt.
  std::optional<std::string_view> get(std::string_view name) const;
  // First value for `name`, or `fallback`.
  std::string_view value_or(std::string_view name, std::string_view fallback) const;
  bool has(std::string_view name) const { return get(name).has_value(); }
  std::vector<std::string_view> all(std::string_view name) const;

  const std::vector<Item>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }

 private:
  std::vector<Item> items_;
};

// An uploaded file from a multipart/form-data body.
struct FilePart {
  std::string field;  // the form field name
  std::string filename;
  std::string content_type;
  std::string data;
};

// A parsed request body: plain fields, plus files for multipart bodies.
struct Form {
  Params fields;
  std::vector<FilePart> files;
};

}  // namespace kagi::http
