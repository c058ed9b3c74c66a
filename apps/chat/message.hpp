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

  friend bool operator==(const Message&, const Message&) = default;
};

std::string encode(const Message& message);
// nullopt for a record that is not a message (foreign, damaged, or a newer format).
std::optional<Message> decode(std::string_view record);

// The messages newer than `since`, in id order. `messages` must be in ascending id order.
std::vector<Message> newer_than(std::span<const Message> messages, int64_t since);

// {"messages":[{"id":..,"name":..,"text":..,"time":..},...],"last":L}: the body of
// GET /chat/{room}/messages. `time` is unix seconds.
std::string messages_json(const std::vector<Message>& messages, int64_t last);

}  // namespace kagi::apps::chat
