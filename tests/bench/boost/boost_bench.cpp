// kagi's hand-written JSON writer, chat JSON body parser and urlencoded parser next to
// Boost.JSON and Boost.URL (1.81), in one run, on the shapes kagi really serves and parses:
//
//   BM_ChatPoll_*    GET /chat/{room}/messages: 200 messages (id, name, text, time) with
//                    quotes, newlines, '<' '&' and non-ASCII text
//   BM_AdminLocks_*  /admin/locks.json's locks array: 50 names × (2 holders + 1 waiter), the
//                    fields of admin/status.cpp's write_entry
//   BM_Quote_*       one message text as a JSON string literal
//   BM_SayBody_*     POST /chat/{room}/say's JSON body, {"name":..,"text":..}
//   BM_BigBody_*     the same with a 60 KiB text (the body limit is 64 KiB)
//   BM_Form_*        a BBS post form body (_csrf, name, subject, body, password)
//   BM_Query_*       the chat poll's query string
//   BM_Decode_*      one percent-encoded value
//
// Kagi and Boost variants of a family produce the same data (checked before timing; the
// writer outputs differ only in which characters are escaped). Report: the ratios Boost/kagi.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include <kagi/http/form.hpp>
#include <kagi/util/json.hpp>
#include "boost_side.hpp"
#include "chat/json_body.hpp"
#include "chat/message.hpp"
#include "support/checked_reporter.hpp"

namespace {

namespace json = boost::json;
using kagi::apps::chat::Message;

// --- data --------------------------------------------------------------------------------

const std::vector<Message>& chat_messages() {
  static const std::vector<Message> messages = [] {
    const char* names[] = {"ann", "Bob", "Zo\xC3\xAB", "\xE3\x83\xA6\xE3\x83\xBC\xE3\x82\xB6",
                           "d\"q"};
    const char* texts[] = {
        "hello everyone",
        "see <https://example.org/a?b=1&c=2>",
        "line one\nline two\ttabbed",
        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\xA1\xE3\x83\x83\xE3\x82\xBB"
        "\xE3\x83\xBC\xE3\x82\xB8\xE3\x81\xA7\xE3\x81\x99",
        "he said \"hi\" \\o/ \xF0\x9F\x98\x80",
        "\xC3\xA7"
        "a va? tr\xC3\xA8s bien, merci \xE2\x80\x94 \xC3\xA0 demain",
    };
    std::vector<Message> out;
    for (int i = 0; i < 200; ++i) {
      out.push_back(Message{.id = 1000 + i,
                            .time = 1'700'000'000 + 7 * i,
                            .name = names[i % 5],
                            .text = std::string(texts[i % 6]) + " #" + std::to_string(i)});
    }
    return out;
  }();
  return messages;
}

json::value chat_value(const std::vector<Message>& messages, int64_t last, json::storage_ptr sp) {
  json::object root(sp);
  root.reserve(2);
  json::array& list = root["messages"].emplace_array();
  list.reserve(messages.size());
  for (const Message& m : messages) {
    json::object& o = list.emplace_back(json::object(sp)).get_object();
    o.reserve(4);
    o.emplace("id", m.id);
    o.emplace("name", m.name);
    o.emplace("text", m.text);
    o.emplace("time", m.time);
  }
  root.emplace("last", last);
  return json::value(std::move(root));
}

struct Entry {
  std::string mode, request_id, method, path, client_address, since;
  int64_t pid, thread, for_ms, slot;
  uint64_t seq;
  bool waiting;
};
struct Row {
  std::string name;
  std::vector<Entry> holders, waiters;
};

const std::vector<Row>& lock_rows() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> out;
    for (int i = 0; i < 50; ++i) {
      auto entry = [&](int k, bool waiting) {
        return Entry{.mode = k == 0 ? "exclusive" : "shared",
                     .request_id = "1f3a9c" + std::to_string(100000 + 17 * i + k),
                     .method = k == 0 ? "POST" : "GET",
                     .path = "/chat/room" + std::to_string(i) + "/messages?since=12&wait=25",
                     .client_address = "10.0.0." + std::to_string(i % 250),
                     .since = "2026-11-23T02:35:04.123Z",
                     .pid = 4242 + k,
                     .thread = 4300 + i,
                     .for_ms = 40 + 13 * i,
                     .slot = i,
                     .seq = 9000u + static_cast<uint64_t>(i),
                     .waiting = waiting};
      };
      out.push_back(Row{.name = "chat/room/room" + std::to_string(i),
                        .holders = {entry(1, false), entry(2, false)},
                        .waiters = {entry(0, true)}});
    }
    return out;
  }();
  return rows;
}

void kagi_entry(kagi::util::JsonWriter& w, const Entry& e) {
  w.begin_object()
      .key("mode")
      .value(e.mode)
      .key("request_id")
      .value(e.request_id)
      .key("method")
      .value(e.method)
      .key("path")
      .value(e.path)
      .key("client_address")
      .value(e.client_address)
      .key("pid")
      .value(e.pid)
      .key("thread")
      .value(e.thread)
      .key("since")
      .value(e.since)
      .key("for_ms")
      .value(e.for_ms)
      .key("slot")
      .value(e.slot)
      .key("seq")
      .value(e.seq);
  if (!e.waiting) w.key("long").value(e.for_ms >= 1000);
  w.end_object();
}

std::string kagi_locks(const std::vector<Row>& rows) {
  kagi::util::JsonWriter w;
  w.begin_object()
      .key("version")
      .value(1)
      .key("generated_at")
      .value("2026-11-23T02:35:05.000Z")
      .key("served_by")
      .begin_object()
      .key("pid")
      .value(4242)
      .end_object()
      .key("processes")
      .value(uint64_t{4})
      .key("long_hold_ms")
      .value(int64_t{1000})
      .key("locks")
      .begin_array();
  for (const Row& row : rows) {
    w.begin_object().key("name").value(row.name).key("holders").begin_array();
    for (const Entry& e : row.holders) kagi_entry(w, e);
    w.end_array().key("waiters").begin_array();
    for (const Entry& e : row.waiters) kagi_entry(w, e);
    w.end_array().end_object();
  }
  w.end_array().end_object();
  return w.take();
}

json::value boost_entry(const Entry& e, const json::storage_ptr& sp) {
  json::object o(sp);
  o.reserve(12);
  o.emplace("mode", e.mode);
  o.emplace("request_id", e.request_id);
  o.emplace("method", e.method);
  o.emplace("path", e.path);
  o.emplace("client_address", e.client_address);
  o.emplace("pid", e.pid);
  o.emplace("thread", e.thread);
  o.emplace("since", e.since);
  o.emplace("for_ms", e.for_ms);
  o.emplace("slot", e.slot);
  o.emplace("seq", e.seq);
  if (!e.waiting) o.emplace("long", e.for_ms >= 1000);
  return json::value(std::move(o));
}

json::value boost_locks(const std::vector<Row>& rows, json::storage_ptr sp) {
  json::object root(sp);
  root.reserve(6);
  root.emplace("version", 1);
  root.emplace("generated_at", "2026-11-23T02:35:05.000Z");
  json::object served(sp);
  served.emplace("pid", 4242);
  root.emplace("served_by", std::move(served));
  root.emplace("processes", uint64_t{4});
  root.emplace("long_hold_ms", int64_t{1000});
  json::array& locks = root["locks"].emplace_array();
  locks.reserve(rows.size());
  for (const Row& row : rows) {
    json::object r(sp);
    r.reserve(3);
    r.emplace("name", row.name);
    json::array holders(sp), waiters(sp);
    for (const Entry& e : row.holders) holders.push_back(boost_entry(e, sp));
    for (const Entry& e : row.waiters) waiters.push_back(boost_entry(e, sp));
    r.emplace("holders", std::move(holders));
    r.emplace("waiters", std::move(waiters));
    locks.push_back(json::value(std::move(r)));
  }
  return json::value(std::move(root));
}

// A reusable arena for the monotonic-resource variants (256 KiB covers every DOM here).
unsigned char* arena() {
  alignas(16) static unsigned char buffer[256 * 1024];
  return buffer;
}
constexpr size_t kArenaBytes = 256 * 1024;

const std::string& say_body() {
  // What chat.js sends (JSON.stringify: raw UTF-8, '"' and '\' escaped).
  static const std::string body =
      "{\"name\":\"Zo\xC3\xAB\",\"text\":\"\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1"
      "\xE3\x81\xAF! see \\\"the thread\\\" at <https://example.org/t?id=42&p=2> \xF0\x9F\x98"
      "\x80\"}";
  return body;
}

const std::string& form_body() {
  // A BBS post as a browser encodes it (application/x-www-form-urlencoded).
  static const std::string body =
      "_csrf=q0dM3mG4xL9sT2vY7wZ1aB5cD8eF0hJ3kN6pR9uW2yA&name=Ann+Example"
      "&subject=Re%3A+%E3%81%93%E3%82%93%E3%81%AB%E3%81%A1%E3%81%AF+%28again%29"
      "&body=Thanks+for+the+reply%21%0D%0AI+tried+it+and+it+works+now.+See+"
      "https%3A%2F%2Fexample.org%2Fa%3Fb%3D1%26c%3D2+for+the+details.%0D%0A%0D%0A"
      "%E6%97%A5%E6%9C%AC%E8%AA%9E%E3%81%AE%E3%83%86%E3%82%AD%E3%82%B9%E3%83%88%E3%82%82"
      "+%E5%A4%A7%E4%B8%88%E5%A4%AB%E3%81%A7%E3%81%99%E3%80%82+100%25+sure+%3C3+%F0%9F%98%80"
      "%0D%0A--+Ann&password=hunter2";
  return body;
}

const std::string& query_string() {
  static const std::string q = "since=1234&wait=25&name=%E3%82%A2%E3%83%B3";
  return q;
}

const std::string& encoded_value() {
  static const std::string v =
      "Thanks+for+the+reply%21%0D%0AI+tried+it+and+it+works+now.+%E6%97%A5%E6%9C%AC%E8%AA%9E"
      "%E3%81%AE%E3%83%86%E3%82%AD%E3%82%B9%E3%83%88+100%25+sure";
  return v;
}

// --- JSON writing ------------------------------------------------------------------------

void BM_ChatPoll_Kagi(benchmark::State& state) {
  const auto& messages = chat_messages();
  for (auto _ : state) {
    std::string out = kagi::apps::chat::messages_json(messages, 1199);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ChatPoll_Kagi);

void BM_ChatPoll_BoostBuildSerialize(benchmark::State& state) {
  const auto& messages = chat_messages();
  for (auto _ : state) {
    std::string out = json::serialize(chat_value(messages, 1199, {}));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ChatPoll_BoostBuildSerialize);

void BM_ChatPoll_BoostBuildSerializeMonotonic(benchmark::State& state) {
  const auto& messages = chat_messages();
  for (auto _ : state) {
    json::monotonic_resource mr(arena(), kArenaBytes);
    std::string out = json::serialize(chat_value(messages, 1199, json::storage_ptr(&mr)));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ChatPoll_BoostBuildSerializeMonotonic);

// The serializer alone, on a DOM built once (a lower bound: kagi has no DOM to build).
void BM_ChatPoll_BoostSerializeOnly(benchmark::State& state) {
  const json::value v = chat_value(chat_messages(), 1199, {});
  for (auto _ : state) {
    std::string out = json::serialize(v);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ChatPoll_BoostSerializeOnly);

void BM_AdminLocks_Kagi(benchmark::State& state) {
  const auto& rows = lock_rows();
  for (auto _ : state) {
    std::string out = kagi_locks(rows);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_AdminLocks_Kagi);

void BM_AdminLocks_BoostBuildSerialize(benchmark::State& state) {
  const auto& rows = lock_rows();
  for (auto _ : state) {
    std::string out = json::serialize(boost_locks(rows, {}));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_AdminLocks_BoostBuildSerialize);

void BM_AdminLocks_BoostBuildSerializeMonotonic(benchmark::State& state) {
  const auto& rows = lock_rows();
  for (auto _ : state) {
    json::monotonic_resource mr(arena(), kArenaBytes);
    std::string out = json::serialize(boost_locks(rows, json::storage_ptr(&mr)));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_AdminLocks_BoostBuildSerializeMonotonic);

void BM_AdminLocks_BoostSerializeOnly(benchmark::State& state) {
  const json::value v = boost_locks(lock_rows(), {});
  for (auto _ : state) {
    std::string out = json::serialize(v);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_AdminLocks_BoostSerializeOnly);

void BM_Quote_Kagi(benchmark::State& state) {
  const std::string& text = chat_messages()[4].text;
  for (auto _ : state) {
    std::string out = kagi::util::json_quote(text);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Quote_Kagi);

void BM_Quote_Boost(benchmark::State& state) {
  const std::string& text = chat_messages()[4].text;
  for (auto _ : state) {
    std::string out = json::serialize(json::string_view(text.data(), text.size()));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Quote_Boost);

// --- JSON body parsing -------------------------------------------------------------------

void BM_SayBody_Kagi(benchmark::State& state) {
  std::string error;
  for (auto _ : state) {
    auto m = kagi::apps::chat::parse_flat_json_object(say_body(), error);
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_SayBody_Kagi);

void BM_SayBody_BoostParse(benchmark::State& state) {
  for (auto _ : state) {
    auto m = kagi::bench::boost_parse_flat(say_body());
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_SayBody_BoostParse);

void BM_SayBody_BoostParseMonotonic(benchmark::State& state) {
  for (auto _ : state) {
    json::monotonic_resource mr(arena(), kArenaBytes);
    auto m = kagi::bench::boost_parse_flat(say_body(), json::storage_ptr(&mr));
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_SayBody_BoostParseMonotonic);

void BM_SayBody_BoostParserReused(benchmark::State& state) {
  unsigned char stack[4096];
  json::parser p(json::storage_ptr(), kagi::bench::flat_options(), stack, sizeof stack);
  for (auto _ : state) {
    json::monotonic_resource mr(arena(), kArenaBytes);
    auto m = kagi::bench::boost_parser_flat(p, say_body(), json::storage_ptr(&mr));
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_SayBody_BoostParserReused);

void BM_SayBody_BoostHandler(benchmark::State& state) {
  for (auto _ : state) {
    auto m = kagi::bench::boost_handler_flat(say_body());
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_SayBody_BoostHandler);

// The largest body the chat accepts (64 KiB): a long text, mostly ASCII with some UTF-8
// and escapes, as a flooder would send it.
const std::string& big_body() {
  static const std::string body = [] {
    std::string text;
    while (text.size() < 60 * 1024) {
      text += "lorem ipsum dolor sit amet \\\"quoted\\\" \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E ";
    }
    return "{\"name\":\"flood\",\"text\":\"" + text + "\"}";
  }();
  return body;
}

void BM_BigBody_Kagi(benchmark::State& state) {
  std::string error;
  for (auto _ : state) {
    auto m = kagi::apps::chat::parse_flat_json_object(big_body(), error);
    benchmark::DoNotOptimize(m);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(big_body().size()));
}
BENCHMARK(BM_BigBody_Kagi);

void BM_BigBody_BoostParse(benchmark::State& state) {
  for (auto _ : state) {
    auto m = kagi::bench::boost_parse_flat(big_body());
    benchmark::DoNotOptimize(m);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(big_body().size()));
}
BENCHMARK(BM_BigBody_BoostParse);

void BM_BigBody_BoostHandler(benchmark::State& state) {
  for (auto _ : state) {
    auto m = kagi::bench::boost_handler_flat(big_body());
    benchmark::DoNotOptimize(m);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(big_body().size()));
}
BENCHMARK(BM_BigBody_BoostHandler);

// --- urlencoded --------------------------------------------------------------------------

template <kagi::http::ParseError (*Parse)(std::string_view, const kagi::http::FormLimits&,
                                          kagi::http::Params&)>
void parse_loop(benchmark::State& state, const std::string& in) {
  const kagi::http::FormLimits limits;
  for (auto _ : state) {
    kagi::http::Params p;
    auto e = Parse(in, limits, p);
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(p);
  }
}

void BM_Form_Kagi(benchmark::State& s) { parse_loop<kagi::http::parse_urlencoded>(s, form_body()); }
BENCHMARK(BM_Form_Kagi);
void BM_Form_BoostUrl(benchmark::State& s) {
  parse_loop<kagi::bench::boost_urlencoded>(s, form_body());
}
BENCHMARK(BM_Form_BoostUrl);
void BM_Form_BoostParamsView(benchmark::State& s) {
  parse_loop<kagi::bench::boost_params_view>(s, form_body());
}
BENCHMARK(BM_Form_BoostParamsView);
// Validation alone (parse_query), no decoding: what Boost.URL costs before any field is read.
void BM_Form_BoostParseQueryOnly(benchmark::State& state) {
  for (auto _ : state) {
    auto q = boost::urls::parse_query(form_body());
    benchmark::DoNotOptimize(q);
  }
}
BENCHMARK(BM_Form_BoostParseQueryOnly);

void BM_Query_Kagi(benchmark::State& s) {
  parse_loop<kagi::http::parse_urlencoded>(s, query_string());
}
BENCHMARK(BM_Query_Kagi);
void BM_Query_BoostUrl(benchmark::State& s) {
  parse_loop<kagi::bench::boost_urlencoded>(s, query_string());
}
BENCHMARK(BM_Query_BoostUrl);
void BM_Query_BoostParamsView(benchmark::State& s) {
  parse_loop<kagi::bench::boost_params_view>(s, query_string());
}
BENCHMARK(BM_Query_BoostParamsView);

void BM_Decode_Kagi(benchmark::State& state) {
  for (auto _ : state) {
    auto v = kagi::http::percent_decode(encoded_value(), true);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_Decode_Kagi);
void BM_Decode_BoostPct(benchmark::State& state) {
  for (auto _ : state) {
    auto v = kagi::bench::boost_percent_decode(encoded_value(), true);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_Decode_BoostPct);

// --- the two sides agree -----------------------------------------------------------------

// Empty when every kagi/Boost pair produces the same data; otherwise what differs.
std::string check_agreement() {
  const auto& messages = chat_messages();
  if (json::parse(kagi::apps::chat::messages_json(messages, 1199)) !=
      json::parse(json::serialize(chat_value(messages, 1199, {})))) {
    return "chat poll JSON differs";
  }
  if (json::parse(kagi_locks(lock_rows())) !=
      json::parse(json::serialize(boost_locks(lock_rows(), {})))) {
    return "admin locks JSON differs";
  }
  std::string error;
  for (const std::string* body : {&say_body(), &big_body()}) {
    auto k = kagi::apps::chat::parse_flat_json_object(*body, error);
    if (!k || k != kagi::bench::boost_parse_flat(*body) ||
        k != kagi::bench::boost_handler_flat(*body)) {
      return "JSON body parses differ (" + error + ")";
    }
  }
  for (const std::string* in : {&form_body(), &query_string()}) {
    kagi::http::Params a, b, c;
    const kagi::http::FormLimits limits;
    if (kagi::http::parse_urlencoded(*in, limits, a) != kagi::http::ParseError::kNone ||
        kagi::bench::boost_urlencoded(*in, limits, b) != kagi::http::ParseError::kNone ||
        kagi::bench::boost_params_view(*in, limits, c) != kagi::http::ParseError::kNone ||
        a.items() != b.items() || a.items() != c.items()) {
      return "urlencoded parses differ on " + *in;
    }
  }
  if (kagi::http::percent_decode(encoded_value(), true) !=
      kagi::bench::boost_percent_decode(encoded_value(), true)) {
    return "percent_decode differs";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (std::string why = check_agreement(); !why.empty()) {
    std::fprintf(stderr, "the kagi and Boost variants disagree: %s\n", why.c_str());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kagi::bench::CheckedReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return kagi::bench::checked_exit_code(reporter);
}
