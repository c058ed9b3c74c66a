#include "bbs/post.hpp"

#include <charconv>
#include <vector>

namespace kagi::apps::bbs {
namespace {

constexpr std::string_view kTag = "post1";  // record format version

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

std::optional<std::string> unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
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

std::optional<int64_t> to_int(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string encode(const Post& post) {
  std::string out(kTag);
  out += '\t';
  out += std::to_string(post.id);
  out += '\t';
  out += std::to_string(post.time);
  for (std::string_view field :
       {std::string_view(post.client), std::string_view(post.password_hash),
        std::string_view(post.name), std::string_view(post.subject), std::string_view(post.body)}) {
    out += '\t';
    append_escaped(out, field);
  }
  return out;
}

std::optional<Post> decode(std::string_view record) {
  std::vector<std::string_view> fields;
  while (true) {
    size_t tab = record.find('\t');
    fields.push_back(record.substr(0, tab));
    if (tab == std::string_view::npos) break;
    record.remove_prefix(tab + 1);
  }
  if (fields.size() != 8 || fields[0] != kTag) return std::nullopt;
  Post post;
  auto id = to_int(fields[1]);
  auto time = to_int(fields[2]);
  if (!id || !time || *id <= 0) return std::nullopt;
  post.id = *id;
  post.time = *time;
  std::string* text[] = {&post.client, &post.password_hash, &post.name, &post.subject, &post.body};
  for (size_t i = 0; i < 5; ++i) {
    auto value = unescape(fields[3 + i]);
    if (!value) return std::nullopt;
    *text[i] = std::move(*value);
  }
  return post;
}

}  // namespace kagi::apps::bbs
