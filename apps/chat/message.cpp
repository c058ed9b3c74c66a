#include "chat/message.hpp"

#include <algorithm>
#include <charconv>

#include "util/json.hpp"

namespace kagi::apps::chat {
namespace {

constexpr std::string_view kTag = "m1";

void append_escaped(std::string& out, std::string_view field) {
  for (char c : field) {
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

std::optional<std::string> unescape(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out += field[i];
      continue;
    }
    if (++i == field.size()) return std::nullopt;
    switch (field[i]) {
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

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string encode(const Message& m) {
  std::string out(kTag);
  out += '\t';
  out += std::to_string(m.id);
  out += '\t';
  out += std::to_string(m.time);
  out += '\t';
  append_escaped(out, m.name);
  out += '\t';
  append_escaped(out, m.text);
  return out;
}

std::optional<Message> decode(std::string_view record) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (fields.size() < 5) {
    size_t tab = record.find('\t', start);
    if (tab == std::string_view::npos) {
      fields.push_back(record.substr(start));
      break;
    }
    fields.push_back(record.substr(start, tab - start));
    start = tab + 1;
  }
  if (fields.size() != 5 || fields[0] != kTag) return std::nullopt;
  if (record.find('\t', static_cast<size_t>(fields[4].data() - record.data())) !=
      std::string_view::npos) {
    return std::nullopt;
  }
  auto id = parse_int(fields[1]);
  auto time = parse_int(fields[2]);
  auto name = unescape(fields[3]);
  auto text = unescape(fields[4]);
  if (!id || *id <= 0 || !time || !name || !text) return std::nullopt;
  return Message{.id = *id, .time = *time, .name = std::move(*name), .text = std::move(*text)};
}

std::vector<Message> newer_than(const std::vector<Message>& messages, int64_t since) {
  auto first = std::upper_bound(messages.begin(), messages.end(), since,
                                [](int64_t id, const Message& m) { return id < m.id; });
  return {first, messages.end()};
}

std::string messages_json(const std::vector<Message>& messages, int64_t last) {
  util::JsonWriter w;
  w.begin_object().key("messages").begin_array();
  for (const auto& m : messages) {
    w.begin_object()
        .key("id")
        .value(m.id)
        .key("name")
        .value(m.name)
        .key("text")
        .value(m.text)
        .key("time")
        .value(m.time)
        .end_object();
  }
  w.end_array().key("last").value(last).end_object();
  return w.take();
}

}  // namespace kagi::apps::chat
