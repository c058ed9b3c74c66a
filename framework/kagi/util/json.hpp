// util/json.hpp — writing JSON by hand, safely: string quoting and a small object/array
// builder for the JSON APIs (BBS posts.json, chat messages, admin locks.json).
//
//   util::JsonWriter w;
//   w.begin_object().key("id").value(42).key("name").value(name).end_object();
//   std::string body = w.take();
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kagi::util {

// `text` as a JSON string literal, quotes included. Control characters, quotes and
// backslashes are escaped, and so are '<', '>' and '&' (as \u003c ...), so the output is also
// safe inside an HTML <script> block. Invalid UTF-8 bytes are replaced by U+FFFD.
std::string json_quote(std::string_view text);
// The same, appended to `out` (no string of its own: the writer's path).
void append_json_quoted(std::string& out, std::string_view text);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(double number);
  JsonWriter& value(bool flag);
  JsonWriter& null();
  // A value that is JSON already (e.g. an object encoded once and kept): pasted as it is.
  JsonWriter& raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void separate();  // a comma before a value or key that is not the first in its container
  template <typename Integer>
  void append_integer(Integer number);
  std::string out_;
  bool need_comma_ = false;
};

}  // namespace kagi::util
