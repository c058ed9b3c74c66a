// Prints, for each hostile or odd input, what kagi's parser decides and what the Boost-based
// stand-ins of boost_side.hpp decide, marking every disagreement with "DIFF". Not a test: the
// table is material for deciding whether Boost.JSON / Boost.URL could replace kagi's code.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <kagi/http/form.hpp>
#include <kagi/util/json.hpp>
#include "boost_side.hpp"
#include "chat/json_body.hpp"

namespace {

using kagi::bench::Members;

std::string show(std::string_view s, size_t max = 44) {
  std::string out;
  for (unsigned char c : s.substr(0, max)) {
    if (c < 0x20 || c >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " B)";
  return out;
}

std::string verdict(const std::optional<Members>& m) {
  if (!m) return "reject";
  std::string out = "accept{";
  bool first = true;
  for (const auto& [k, v] : *m) {
    if (!first) out += ",";
    first = false;
    out += show(k, 8) + ":" + show(v, 12);
  }
  return out + "}";
}

std::string raw_boost(std::string_view body) {
  boost::json::error_code ec;
  boost::json::parse_options opt;  // defaults: max_depth 32
  boost::json::value v = boost::json::parse(body, ec, {}, opt);
  if (ec) return "error: " + ec.message();
  return "ok: " + show(boost::json::serialize(v), 40);
}

void json_table() {
  const std::vector<std::string> cases = {
      R"({"name":"ann","text":"hi \"there\"\n\u00e9\ud83d\ude00"})",
      "{}",
      "",
      "[]",
      "\"x\"",
      "{\"a\":1}",
      "{\"a\":1.5e3}",
      "{\"a\":-0}",
      "{\"a\":1e999}",
      "{\"a\":null}",
      "{\"a\":true}",
      "{\"a\":{}}",
      "{\"a\":[\"x\"]}",
      "{\"a\":\"x\",}",
      "{\"a\":\"x\"} x",
      "{\"a\":\"x\"}{}",
      "{\"a\":\"x\" /*c*/}",
      "{\"a\":\"x\",\"a\":\"y\"}",
      "{\"a\":\"x\",\"b\":\"y\",\"a\":\"z\"}",
      "{\"a\":\"\\x\"}",
      "{\"a\":\"\\ud800\"}",
      "{\"a\":\"\\udc00\"}",
      "{\"a\":\"\\ud800\\u0041\"}",
      std::string("{\"a\":\"x\x01\"}"),
      std::string("{\"a\":\"\0\"}", 8),
      "{\"a\":\"\\u0000\"}",
      "{\"a\":\"\x7F\"}",
      "{\"a\":\"\xFF\"}",
      "{\"a\":\"\xC0\xAF\"}",
      "{\"a\":\"\xE0\x80\xAF\"}",
      "{\"a\":\"\xED\xA0\x80\"}",
      "{\"a\":\"\xF4\x90\x80\x80\"}",
      "{\"a\":\"\xE6\x97\"}",
      "{\"\xFF\":\"x\"}",
      "\xEF\xBB\xBF{\"a\":\"x\"}",
      " \t\r\n{\"a\":\"x\"}\n",
      std::string(100, '[') + std::string(100, ']'),
      "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}",
      "{\"a\":\"" + std::string(70000, 'x') + "\"}",
      "{\"a\":\"" + std::string(60000, 'x') + "\"}",
      [] {
        std::string s = "{";
        for (int i = 0; i < 17; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
        return s + "}";
      }(),
      [] {
        std::string s = "{";
        for (int i = 0; i < 16; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
        return s + "}";
      }(),
  };
  std::printf("## JSON body: kagi parse_flat_json_object vs Boost.JSON\n\n");
  std::printf(
      "| input | kagi | boost parse + shape check | basic_parser handler | "
      "plain boost::json::parse (defaults) |\n|---|---|---|---|---|\n");
  for (const std::string& c : cases) {
    std::string error;
    const std::string k = verdict(kagi::apps::chat::parse_flat_json_object(c, error));
    const std::string b = verdict(kagi::bench::boost_parse_flat(c));
    const std::string h = verdict(kagi::bench::boost_handler_flat(c));
    const bool diff = k != b || k != h;
    std::printf("| `%s` | %s%s | %s | %s | %s |\n", show(c).c_str(), diff ? "**DIFF** " : "",
                k == "reject" ? ("reject (" + error + ")").c_str() : k.c_str(), b.c_str(),
                h.c_str(), raw_boost(c).c_str());
  }
}

std::string form_verdict(kagi::http::ParseError e, const kagi::http::Params& p) {
  if (e != kagi::http::ParseError::kNone) return kagi::http::describe(e);
  std::string out = "ok[";
  for (const auto& [k, v] : p.items()) out += show(k, 8) + "=" + show(v, 12) + ";";
  return out + "]";
}

void form_table() {
  const std::vector<std::string> cases = {
      "a=1&b=2",
      "name=Ann+Example&text=caf%C3%A9",
      "a=%zz",
      "a=%",
      "a=%2",
      "a=%2x",
      "a=%%41",
      "%41=b",
      "a=1+2%2B3",
      "a=b=c",
      "a",
      "=v",
      "a&&b",
      "a=1&",
      "&",
      "",
      "a=%00",
      "a=%FF%FE",
      "a=\xFF",
      "a=caf\xC3\xA9",
      "a=b c",
      "a=\"q\"",
      "a=<b>",
      "a=x#frag",
      "a=x?y/z",
      "a=[1]",
      "a={}",
      "a=|^`\\",
      "a=x;b=y",
      "a=:@!$'()*,",
      std::string("a=x\0y", 5),
      "a=\tx",
      "a=x\r\n",
  };
  std::printf("\n## urlencoded: kagi parse_urlencoded vs Boost.URL parse_query + params\n\n");
  std::printf(
      "| input | kagi | Boost.URL (parse_query, decode with +) | percent_decode vs "
      "pct_string_view::decode, whole input |\n|---|---|---|---|\n");
  const kagi::http::FormLimits limits;
  for (const std::string& c : cases) {
    kagi::http::Params kp, bp;
    const std::string k = form_verdict(kagi::http::parse_urlencoded(c, limits, kp), kp);
    const std::string b = form_verdict(kagi::bench::boost_urlencoded(c, limits, bp), bp);
    kagi::http::Params vp;
    const std::string v = form_verdict(kagi::bench::boost_params_view(c, limits, vp), vp);
    auto kd = kagi::http::percent_decode(c, true);
    auto bd = kagi::bench::boost_percent_decode(c, true);
    std::string pct = bd ? "ok `" + show(*bd, 12) + "`" : "reject";
    if (kd.has_value() != bd.has_value() || (kd && *kd != *bd)) pct = "**DIFF** " + pct;
    const bool diff = k != b || b != v;
    std::printf("| `%s` | %s%s | %s%s | %s |\n", show(c).c_str(), diff ? "**DIFF** " : "",
                k.c_str(), b.c_str(), b != v ? (" (params_view: " + v + ")").c_str() : "",
                pct.c_str());
  }
}

void quote_table() {
  const std::vector<std::string> cases = {
      "plain",
      "</script><b>&amp;",
      "a\"b\\c\n\t",
      std::string("\x01\x1f\x7f", 3),
      std::string("a\0b", 3),
      "caf\xC3\xA9 \xF0\x9F\x98\x80",
      "\xE2\x80\xA8 (U+2028)",
      "\xFF",
      "\xC3",
      "\xC0\xAF",
      "\xED\xA0\x80",
  };
  std::printf(
      "\n## JSON string output: kagi json_quote vs boost::json::serialize(string_view)"
      "\n\n| input | kagi | Boost |\n|---|---|---|\n");
  for (const std::string& c : cases) {
    const std::string k = kagi::util::json_quote(c);
    const std::string b = boost::json::serialize(boost::json::string_view(c.data(), c.size()));
    std::printf("| `%s` | %s`%s` | `%s` |\n", show(c).c_str(), k != b ? "**DIFF** " : "",
                show(k, 60).c_str(), show(b, 60).c_str());
  }
}

}  // namespace

int main() {
  json_table();
  form_table();
  quote_table();
  return 0;
}
