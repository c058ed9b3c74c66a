#include <kagi/lock/detail/names.hpp>

#include <cstdint>
#include <cstdio>

#include <kagi/lock/errors.hpp>

namespace kagi::lock {
namespace {

bool allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

std::error_code invalid(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return make_error_code(Errc::kInvalidName);
}

}  // namespace

std::error_code validate_name(std::string_view name, std::string* why) {
  if (name.empty()) return invalid(why, "the name is empty");
  if (name.size() > kMaxNameBytes) {
    return invalid(why, "the name is " + std::to_string(name.size()) + " bytes; the limit is " +
                            std::to_string(kMaxNameBytes));
  }
  size_t segment = 1;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/') {
      std::string_view seg = name.substr(start, i - start);
      if (seg.empty()) {
        return invalid(why, "segment " + std::to_string(segment) +
                                " is empty (leading, trailing or doubled '/')");
      }
      if (seg == "." || seg == "..") {
        return invalid(why, "segment " + std::to_string(segment) + " is '" + std::string(seg) +
                                "' (not allowed)");
      }
      ++segment;
      start = i + 1;
      continue;
    }
    if (!allowed(name[i])) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned char>(name[i]));
      return invalid(why,
                     "byte " + std::to_string(i) + " (" + code + ") is not one of [a-z0-9_.-/]");
    }
  }
  return {};
}

std::string lock_file_name(std::string_view name) {
  std::string out;
  const bool direct = name.size() <= kMaxDirectFileName;
  std::string_view shown = direct ? name : name.substr(0, 64);
  out.reserve(shown.size() + 24);
  for (char c : shown) out += c == '/' ? '@' : c;
  if (!direct) {
    // '#' appears in no direct file name, so hashed and direct names never meet.
    char hash[20];
    std::snprintf(hash, sizeof hash, "#%016llx", static_cast<unsigned long long>(name_hash(name)));
    out += hash;
  }
  out += ".lock";
  return out;
}

std::string_view name_prefix(std::string_view name) {
  size_t slash = name.rfind('/');
  return slash == std::string_view::npos ? name : name.substr(0, slash);
}

}  // namespace kagi::lock
