// Fuzzes multipart_boundary and parse_multipart. Input: two limit bytes, then an optional
// Content-Type line ("multipart/form-data; boundary=...\n") whose boundary is used if valid
// (else "XyZ"), then the body. Invariants: no crash; `out` untouched on error; counts and
// sizes within the limits; and a body rebuilt from what was parsed (CRLF, quoted names)
// parses to the same fields and files.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <kagi/http/form.hpp>
#include "fuzz_check.hpp"

using kagi::http::FilePart;
using kagi::http::Form;
using kagi::http::FormLimits;
using kagi::http::ParseError;

namespace {

// multipart.cpp rejects part header lines longer than this.
constexpr size_t kMaxHeaderLine = 8 * 1024;

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

bool same_files(const std::vector<FilePart>& a, const std::vector<FilePart>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].field != b[i].field || a[i].filename != b[i].filename ||
        a[i].content_type != b[i].content_type || a[i].data != b[i].data) {
      return false;
    }
  }
  return true;
}

void check_boundary(const std::optional<std::string>& boundary) {
  if (!boundary) return;
  FUZZ_CHECK(!boundary->empty() && boundary->size() <= 70 && boundary->back() != ' ');
  for (const char c : *boundary) {
    FUZZ_CHECK(std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos);
  }
  // Quoting the boundary in a clean header gives it back unchanged.
  FUZZ_CHECK(kagi::http::multipart_boundary("multipart/form-data; boundary=" + quoted(*boundary)) ==
             boundary);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  FormLimits limits;
  limits.max_fields = data[0] % 16;
  limits.max_field_bytes = (data[1] & 0x0F) * 8;
  limits.max_file_bytes = (data[1] >> 4) * 16;
  std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::string boundary = "XyZ";
  const size_t nl = in.substr(0, 200).find('\n');
  if (nl != std::string_view::npos) {
    const std::string_view content_type = in.substr(0, nl);
    const auto parsed = kagi::http::multipart_boundary(content_type);
    check_boundary(parsed);
    if (parsed) {
      boundary = *parsed;
      in.remove_prefix(nl + 1);
    }
  }

  Form out;
  out.fields.add("pre", "existing");
  const ParseError e = kagi::http::parse_multipart(in, boundary, limits, out);
  FUZZ_CHECK(out.fields.items().front() == kagi::http::Params::Item("pre", "existing"));
  if (e != ParseError::kNone) {
    FUZZ_CHECK(out.fields.size() == 1 && out.files.empty());
    return 0;
  }
  FUZZ_CHECK(out.fields.size() - 1 + out.files.size() <= limits.max_fields);

  // Rebuild the body. Field order relative to files is not kept by Form, so fields first.
  std::string rebuilt;
  bool rebuildable = true;
  auto add_part = [&](const std::string& disposition, const std::string* content_type,
                      const std::string& value) {
    const std::string line = "Content-Disposition: form-data; " + disposition;
    if (line.size() > kMaxHeaderLine) rebuildable = false;
    rebuilt += "--" + boundary + "\r\n" + line + "\r\n";
    if (content_type) rebuilt += "Content-Type: " + *content_type + "\r\n";
    rebuilt += "\r\n" + value + "\r\n";
  };
  for (size_t i = 1; i < out.fields.size(); ++i) {
    const auto& [name, value] = out.fields.items()[i];
    FUZZ_CHECK(name.size() <= limits.max_field_bytes);
    FUZZ_CHECK(value.size() <= limits.max_field_bytes);
    add_part("name=" + quoted(name), nullptr, value);
  }
  for (const FilePart& file : out.files) {
    FUZZ_CHECK(file.field.size() <= limits.max_field_bytes);
    FUZZ_CHECK(file.data.size() <= limits.max_file_bytes);
    add_part("name=" + quoted(file.field) + "; filename=" + quoted(file.filename),
             &file.content_type, file.data);
  }
  rebuilt += "--" + boundary + "--\r\n";
  if (!rebuildable) return 0;

  Form again;
  again.fields.add("pre", "existing");
  FUZZ_CHECK(kagi::http::parse_multipart(rebuilt, boundary, limits, again) == ParseError::kNone);
  FUZZ_CHECK(again.fields.items() == out.fields.items());
  FUZZ_CHECK(same_files(again.files, out.files));
  return 0;
}
