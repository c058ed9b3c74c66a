#include "chat/message.hpp"

#include <algorithm>
#include <charconv>

#include <kagi/store/record_fields.hpp>
#include <kagi/util/json.hpp>

namespace kagi::apps::chat {
namespace {

constexpr std::string_view kTag = "m1";  // record format version

// {"id":..,"name":..,"text":..,"time":..}
void write_object(util::JsonWriter& w, const Message& m) {
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

}  // namespace

std::string encode(const Message& m) {
  return store::join_fields({kTag, std::to_string(m.id), std::to_string(m.time), m.name, m.text});
}

std::optional<Message> decode(std::string_view record) {
  auto fields = store::split_fields(record, 5);
  if (!fields || (*fields)[0] != kTag) return std::nullopt;
  auto id = store::parse_int((*fields)[1]);
  auto time = store::parse_int((*fields)[2]);
  if (!id || *id <= 0 || !time) return std::nullopt;
  Message m{
      .id = *id, .time = *time, .name = std::move((*fields)[3]), .text = std::move((*fields)[4])};
  util::JsonWriter w;
  write_object(w, m);
  m.json = w.take();
  return m;
}

std::span<const Message> newer_than(std::span<const Message> messages, int64_t since) {
  auto first = std::upper_bound(messages.begin(), messages.end(), since,
                                [](int64_t id, const Message& m) { return id < m.id; });
  return messages.subspan(static_cast<size_t>(first - messages.begin()));
}

std::string messages_json(std::span<const Message> messages, int64_t last) {
  util::JsonWriter w;
  w.begin_object().key("messages").begin_array();
  for (const auto& m : messages) {
    if (m.json.empty()) {
      write_object(w, m);
    } else {
      w.raw(m.json);
    }
  }
  w.end_array().key("last").value(last).end_object();
  return w.take();
}

}  // namespace kagi::apps::chat
