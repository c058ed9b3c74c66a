#include "bbs/input.hpp"

#include <kagi/util/utf8.hpp>
#include "bbs/text.hpp"

namespace kagi::apps::bbs {
namespace {

std::string trim(std::string_view s) {
  const char* ws = " \t\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

InputLimits InputLimits::from(const Config& conf) {
  return InputLimits{static_cast<size_t>(conf.get_int("bbs.max_name_chars")),
                     static_cast<size_t>(conf.get_int("bbs.max_subject_chars")),
                     static_cast<size_t>(conf.get_int("bbs.max_body_chars"))};
}

Checked check_post(const http::Request& request, const InputLimits& limits) {
  Checked out;
  struct Field {
    const char* form_name;
    const char* label;
    std::string* target;
    size_t max_chars;
    bool multiline;
  };
  Field fields[] = {
      {"name", "Name", &out.input.name, limits.max_name_chars, false},
      {"subject", "Subject", &out.input.subject, limits.max_subject_chars, false},
      {"body", "Message", &out.input.body, limits.max_body_chars, true},
      {"password", "Delete password", &out.input.password, 128, false},
  };
  for (const Field& f : fields) {
    std::string_view raw = request.field(f.form_name);
    if (!util::valid_utf8(raw)) {
      out.error = std::string(f.label) + " is not valid UTF-8 text.";
      out.bad_encoding = true;
      return out;
    }
    if (f.target == &out.input.password) {
      if (raw.find('\0') != std::string_view::npos) {
        out.error = "Delete password must not contain a NUL character.";
        out.bad_encoding = true;
        return out;
      }
      *f.target = std::string(raw);
    } else {
      *f.target = trim(util::strip_control_chars(raw, f.multiline));
      if (!f.multiline) *f.target = trim(util::strip_bidi_controls(*f.target));
    }
    if (char_count(*f.target) > f.max_chars) {
      out.error =
          std::string(f.label) + " is longer than " + std::to_string(f.max_chars) + " characters.";
      return out;
    }
  }
  if (out.input.body.empty()) {
    out.error = "Please write a message.";
    return out;
  }
  if (out.input.name.empty()) out.input.name = "Anonymous";
  return out;
}

std::string client_tag(std::string_view address, const util::Secret& secret) {
  return secret.tag("bbs-client", address, 8);
}

}  // namespace kagi::apps::bbs
