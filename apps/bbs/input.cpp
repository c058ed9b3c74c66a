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

// Reads one user text field into `target` (control characters stripped, trimmed; one-line
// fields without bidi controls). False with `out.error` set if it is not acceptable.
bool check_text(std::string_view raw, const char* label, size_t max_chars, bool multiline,
                std::string& target, Checked& out) {
  if (!util::valid_utf8(raw)) {
    out.error = std::string(label) + " is not valid UTF-8 text.";
    out.bad_encoding = true;
    return false;
  }
  target = trim(util::strip_control_chars(raw, multiline));
  if (!multiline) target = trim(util::strip_bidi_controls(target));
  if (char_count(target) > max_chars) {
    out.error =
        std::string(label) + " is longer than " + std::to_string(max_chars) + " characters.";
    return false;
  }
  return true;
}

}  // namespace

Checked check_edit(const http::Request& request, const InputLimits& limits) {
  Checked out;
  if (!check_text(request.field("subject"), "Subject", limits.max_subject_chars, false,
                  out.input.subject, out) ||
      !check_text(request.field("body"), "Message", limits.max_body_chars, true, out.input.body,
                  out)) {
    return out;
  }
  if (out.input.body.empty()) out.error = "Please write a message.";
  return out;
}

Checked check_editor(const http::Request& request, const InputLimits& limits) {
  Checked out;
  if (!check_text(request.field("name"), "Name", limits.max_name_chars, false, out.input.name,
                  out)) {
    return out;
  }
  const std::string_view password = request.field("password");
  if (!util::valid_utf8(password) || password.find('\0') != std::string_view::npos) {
    out.error = "The password must be UTF-8 text without NUL characters.";
    out.bad_encoding = true;
    return out;
  }
  out.input.password = std::string(password);
  return out;
}

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
