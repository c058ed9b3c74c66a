#include <kagi/store/record_fields.hpp>

#include <charconv>

namespace kagi::store {
namespace {

void append_escaped(std::string& out, std::string_view text) {
  // Runs without a byte to escape go in whole: a post's body is mostly one run.
  for (;;) {
    const size_t special = text.find_first_of("\\\t\n");
    out.append(text.substr(0, special));
    if (special == std::string_view::npos) return;
    switch (text[special]) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\n";
    }
    text.remove_prefix(special + 1);
  }
}

std::optional<std::string> unescape(std::string_view text) {
  // Most fields have nothing escaped: one copy, no per-character work.
  size_t first = text.find('\\');
  if (first == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, first));
  out.reserve(text.size());
  for (size_t i = first; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) return std::nullopt;
    switch (text[i]) {
      case '\\':
        out += '\\';
        break;
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      default:
        return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::string join_fields(std::initializer_list<std::string_view> fields) {
  std::string out;
  size_t size = fields.size();
  for (std::string_view field : fields) size += field.size();
  out.reserve(size + size / 16);  // room for a few escapes without growing
  bool first = true;
  for (std::string_view field : fields) {
    if (!first) out += '\t';
    first = false;
    append_escaped(out, field);
  }
  return out;
}

std::optional<std::vector<std::string>> split_fields(std::string_view record, size_t count) {
  std::vector<std::string> fields;
  fields.reserve(count);
  while (true) {
    size_t tab = record.find('\t');
    auto field = unescape(record.substr(0, tab));
    if (!field || fields.size() == count) return std::nullopt;
    fields.push_back(std::move(*field));
    if (tab == std::string_view::npos) break;
    record.remove_prefix(tab + 1);
  }
  if (fields.size() != count) return std::nullopt;
  return fields;
}

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace kagi::store
