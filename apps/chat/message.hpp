// apps/chat/message.hpp — a chat message, its on-disk record, and the JSON the API answers.
//
// A room is one append-only log under data.dir; each message is one record. The record is
// line-free text ("m1", id, time, name, text joined by tabs, with '\\', tab and newline
// escaped), so any bytes round-trip and a foreign record is recognised and skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kagi::apps::chat {

struct Message {
  int64_t id = 0;    // per room, from 1, increasing, never reused
  int64_t time = 0;  // unix seconds
  std::string name{};
  std::string text{};
  // This message as a JSON object, made once by decode() so that each poll pastes it instead
  // of encoding it again; empty for a message built in memory (messages_json encodes those).
  std::string json{};

  // The message itself: `json` is only a copy of it in another form.
  friend bool operator==(const Message& a, const Message& b) {
    return a.id == b.id && a.time == b.time && a.name == b.name && a.text == b.text;
  }
};

std::string encode(const Message& message);
// nullopt for a record that is not a message (foreign, damaged, or a newer format).
std::optional<Message> decode(std::string_view record);

// The messages newer than `since`, in id order: a view of the tail of `messages`, which must
// be in ascending id order.
std::span<const Message> newer_than(std::span<const Message> messages, int64_t since);

// {"messages":[{"id":..,"name":..,"text":..,"time":..},...],"last":L}: the body of
// GET /chat/{room}/messages. `time` is unix seconds.
std::string messages_json(std::span<const Message> messages, int64_t last);

}  // namespace kagi::apps::chat
