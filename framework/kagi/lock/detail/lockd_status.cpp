#include <kagi/lock/detail/lockd_status.hpp>

#include <charconv>
#include <memory>
#include <string>

#include <kagi/lock/detail/holder_text.hpp>
#include <kagi/pg/options.hpp>

namespace kagi::lock::detail {
namespace {

// Just enough JSON for STATUS: objects, arrays, strings, integers; bounded depth.
struct Json {
  enum class Type { kNull, kNumber, kString, kArray, kObject } type = Type::kNull;
  int64_t number = 0;
  std::string text;
  std::vector<Json> items;
  // An object's members: names[i] is the name of values[i] (a vector of an incomplete type is
  // fine, a pair of one is not).
  std::vector<std::string> names;
  std::vector<Json> values;

  const Json* field(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return &values[i];
    }
    return nullptr;
  }
  std::string string_field(std::string_view name) const {
    const Json* v = field(name);
    return v && v->type == Type::kString ? v->text : std::string();
  }
  int64_t number_field(std::string_view name) const {
    const Json* v = field(name);
    return v && v->type == Type::kNumber ? v->number : 0;
  }
};

class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}
  bool parse(Json& out) { return value(out, 0) && (skip(), pos_ == in_.size()); }

 private:
  void skip() {
    while (pos_ < in_.size() && (in_[pos_] == ' ' || in_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  bool string(std::string& out) {
    if (!eat('"')) return false;
    while (pos_ < in_.size()) {
      const char c = in_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= in_.size()) return false;
      const char e = in_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'u': {
          if (pos_ + 4 > in_.size()) return false;
          unsigned cp = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = hex(in_[pos_++]);
            if (h < 0) return false;
            cp = cp * 16 + static_cast<unsigned>(h);
          }
          append_utf8(out, cp);  // STATUS escapes only ASCII this way
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool value(Json& out, int depth) {
    if (depth > 8) return false;
    skip();
    if (pos_ >= in_.size()) return false;
    const char c = in_[pos_];
    if (c == '"') {
      out.type = Json::Type::kString;
      return string(out.text);
    }
    if (c == '{') {
      ++pos_;
      out.type = Json::Type::kObject;
      if (eat('}')) return true;
      do {
        out.names.emplace_back();
        out.values.emplace_back();
        if (!string(out.names.back()) || !eat(':') || !value(out.values.back(), depth + 1)) {
          return false;
        }
      } while (eat(','));
      return eat('}');
    }
    if (c == '[') {
      ++pos_;
      out.type = Json::Type::kArray;
      if (eat(']')) return true;
      do {
        out.items.emplace_back();
        if (!value(out.items.back(), depth + 1)) return false;
      } while (eat(','));
      return eat(']');
    }
    if (in_.substr(pos_, 4) == "null") {
      pos_ += 4;
      return true;
    }
    const auto [end, ec] = std::from_chars(in_.data() + pos_, in_.data() + in_.size(), out.number);
    if (ec != std::errc() || end == in_.data() + pos_) return false;
    pos_ = static_cast<size_t>(end - in_.data());
    out.type = Json::Type::kNumber;
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

// kagi's label: "kagi/<host>/<pid> <request id> <method> <path>".
void apply_label(const std::string& label, const std::string& client, RegistryEntry& e) {
  e.client_address = client;
  const size_t space = label.find(' ');
  const std::string process = label.substr(0, space);
  if (space != std::string::npos && pg::parse_application_name(process, e.host, e.pid)) {
    const std::string_view rest = std::string_view(label).substr(space + 1);
    const size_t a = rest.find(' ');
    const size_t b = a == std::string_view::npos ? a : rest.find(' ', a + 1);
    if (b != std::string_view::npos) {
      e.request_id = decode_holder_text(rest.substr(0, a));
      e.method = decode_holder_text(rest.substr(a + 1, b - a - 1));
      e.path = decode_holder_text(rest.substr(b + 1));
      return;
    }
  }
  // Not kagi's: a PHP script's label or none. The client's address says where it runs.
  e.host = client.substr(0, client.rfind(':'));
  if (!e.host.empty() && e.host.front() == '[') e.host = e.host.substr(1, e.host.size() - 2);
  e.request_id = label.empty() ? "(no label)" : label;
}

}  // namespace

bool parse_lockd_status_line(std::string_view line, std::chrono::system_clock::time_point now,
                             std::vector<RegistryEntry>& out) {
  Json doc;
  if (!Parser(line).parse(doc) || doc.type != Json::Type::kObject) return false;
  const std::string key = doc.string_field("key");
  if (key.empty()) return false;
  for (const char* list : {"holders", "waiters"}) {
    const Json* entries = doc.field(list);
    if (!entries || entries->type != Json::Type::kArray) return false;
    const bool waiting = std::string_view(list) == "waiters";
    for (const Json& item : entries->items) {
      RegistryEntry e;
      e.name = key;
      e.waiting = waiting;
      e.mode = item.string_field("mode") == "shared" ? Mode::kShared : Mode::kExclusive;
      apply_label(item.string_field("label"), item.string_field("client"), e);
      e.since =
          now - std::chrono::milliseconds(item.number_field(waiting ? "waiting_ms" : "held_ms"));
      out.push_back(std::move(e));
    }
  }
  return true;
}

}  // namespace kagi::lock::detail
