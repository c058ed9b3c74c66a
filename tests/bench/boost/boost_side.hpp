// tests/bench/boost/boost_side.hpp — what kagi's JSON body parser and urlencoded parser would
// look like written on Boost.JSON and Boost.URL (1.81), for the benchmark and the
// accept/reject table beside it. Each function produces the same output type as the kagi code
// it stands in for, so the two can be timed and compared on the same inputs.
#pragma once

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>  // basic_parser<Handler> is instantiated here
#include <boost/url.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <kagi/http/form.hpp>
#include <kagi/http/params.hpp>

namespace kagi::bench {

using Members = std::map<std::string, std::string, std::less<>>;

inline constexpr size_t kMaxKeys = 16;  // chat::JsonBodyLimits defaults
inline constexpr size_t kMaxBytes = 64 * 1024;

inline boost::json::parse_options flat_options() {
  boost::json::parse_options opt;
  opt.max_depth = 1;  // the object itself; anything nested is too deep
  return opt;
}

// The shape rules kagi needs, checked on a parsed DOM. Duplicate keys cannot be seen here:
// Boost.JSON's object keeps the last value of a repeated key.
inline std::optional<Members> flat_members(const boost::json::value& v) {
  if (!v.is_object()) return std::nullopt;
  const boost::json::object& o = v.get_object();
  if (o.size() > kMaxKeys) return std::nullopt;
  Members out;
  for (const auto& kv : o) {
    if (!kv.value().is_string()) return std::nullopt;
    const boost::json::string& s = kv.value().get_string();
    out.emplace(std::string(kv.key()), std::string(s.data(), s.size()));
  }
  return out;
}

// boost::json::parse into `sp`, then the shape rules.
inline std::optional<Members> boost_parse_flat(std::string_view body,
                                               boost::json::storage_ptr sp = {}) {
  if (body.size() > kMaxBytes) return std::nullopt;
  boost::json::error_code ec;
  boost::json::value v = boost::json::parse(body, ec, std::move(sp), flat_options());
  if (ec) return std::nullopt;
  return flat_members(v);
}

// The same through a reused boost::json::parser (its temporary stack kept between bodies).
inline std::optional<Members> boost_parser_flat(boost::json::parser& p, std::string_view body,
                                                boost::json::storage_ptr sp) {
  if (body.size() > kMaxBytes) return std::nullopt;
  p.reset(std::move(sp));
  boost::json::error_code ec;
  p.write(body.data(), body.size(), ec);
  if (ec) return std::nullopt;
  boost::json::value v = p.release();
  return flat_members(v);
}

// A basic_parser handler that enforces exactly kagi's rules (one flat object of strings, no
// duplicate keys, at most kMaxKeys) while the bytes stream by, with no DOM.
class FlatHandler {
 public:
  static constexpr std::size_t max_array_size = 0;
  static constexpr std::size_t max_object_size = kMaxKeys;
  static constexpr std::size_t max_string_size = kMaxBytes;
  static constexpr std::size_t max_key_size = kMaxBytes;

  Members members;

  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }
  bool on_array_begin(boost::json::error_code& ec) { return refuse(ec); }
  bool on_array_end(std::size_t, boost::json::error_code& ec) { return refuse(ec); }
  bool on_object_begin(boost::json::error_code& ec) {
    if (objects_++ > 0) return refuse(ec);
    return true;
  }
  bool on_object_end(std::size_t, boost::json::error_code&) { return true; }
  bool on_string_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    value_.append(s.data(), s.size());
    return true;
  }
  bool on_string(boost::json::string_view s, std::size_t, boost::json::error_code& ec) {
    if (objects_ == 0) return refuse(ec);  // a bare string document
    value_.append(s.data(), s.size());
    if (!members.emplace(std::move(key_), std::move(value_)).second) return refuse(ec);
    key_.clear();
    value_.clear();
    return true;
  }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_number_part(boost::json::string_view, boost::json::error_code& ec) { return refuse(ec); }
  bool on_int64(int64_t, boost::json::string_view, boost::json::error_code& ec) {
    return refuse(ec);
  }
  bool on_uint64(uint64_t, boost::json::string_view, boost::json::error_code& ec) {
    return refuse(ec);
  }
  bool on_double(double, boost::json::string_view, boost::json::error_code& ec) {
    return refuse(ec);
  }
  bool on_bool(bool, boost::json::error_code& ec) { return refuse(ec); }
  bool on_null(boost::json::error_code& ec) { return refuse(ec); }
  bool on_comment_part(boost::json::string_view, boost::json::error_code& ec) { return refuse(ec); }
  bool on_comment(boost::json::string_view, boost::json::error_code& ec) { return refuse(ec); }

  void clear() {
    members.clear();
    key_.clear();
    value_.clear();
    objects_ = 0;
  }

 private:
  static bool refuse(boost::json::error_code& ec) {
    ec = boost::json::error::syntax;
    return false;
  }
  std::string key_, value_;
  int objects_ = 0;
};

inline std::optional<Members> boost_handler_flat(std::string_view body) {
  if (body.size() > kMaxBytes) return std::nullopt;
  boost::json::basic_parser<FlatHandler> p(flat_options());
  boost::json::error_code ec;
  const size_t n = p.write_some(false, body.data(), body.size(), ec);
  if (ec || n != body.size()) return std::nullopt;
  return std::move(p.handler().members);
}

// kagi's parse_urlencoded on Boost.URL: parse_query validates the whole string (RFC 3986
// query characters, well-formed %XX), params_view decodes with '+' as space. kagi's rules
// kept: empty pairs skipped, the field count and decoded sizes bounded, `out` untouched on
// failure.
inline http::ParseError boost_urlencoded(std::string_view in, const http::FormLimits& limits,
                                         http::Params& out) {
  auto query = boost::urls::parse_query(boost::urls::string_view(in.data(), in.size()));
  if (!query) return http::ParseError::kMalformed;
  boost::urls::encoding_opts opt;
  opt.space_as_plus = true;
  std::vector<http::Params::Item> parsed;
  for (const boost::urls::param_pct_view p : *query) {
    if (p.key.empty() && !p.has_value) continue;  // "a&&b", a trailing '&', ""
    if (parsed.size() >= limits.max_fields) return http::ParseError::kTooMany;
    if (p.key.decoded_size() > limits.max_field_bytes ||
        p.value.decoded_size() > limits.max_field_bytes) {
      return http::ParseError::kTooLarge;
    }
    parsed.emplace_back(p.key.decode(opt), p.has_value ? p.value.decode(opt) : std::string());
  }
  for (auto& [name, value] : parsed) out.add(std::move(name), std::move(value));
  return http::ParseError::kNone;
}

// The same through params_view (whose elements own their decoded strings). In 1.81 the
// constructor params_view(params_view const&, encoding_opts) is declared but not exported
// from libboost_url.so, so the view is built from the string, which throws on a malformed
// query.
inline http::ParseError boost_params_view(std::string_view in, const http::FormLimits& limits,
                                          http::Params& out) {
  boost::urls::encoding_opts opt;
  opt.space_as_plus = true;
  std::optional<boost::urls::params_view> view;
  try {
    view.emplace(boost::urls::string_view(in.data(), in.size()), opt);
  } catch (const boost::system::system_error&) {
    return http::ParseError::kMalformed;
  }
  std::vector<http::Params::Item> parsed;
  for (boost::urls::param p : *view) {
    if (p.key.empty() && !p.has_value) continue;
    if (parsed.size() >= limits.max_fields) return http::ParseError::kTooMany;
    if (p.key.size() > limits.max_field_bytes || p.value.size() > limits.max_field_bytes) {
      return http::ParseError::kTooLarge;
    }
    parsed.emplace_back(std::move(p.key), std::move(p.value));
  }
  for (auto& [name, value] : parsed) out.add(std::move(name), std::move(value));
  return http::ParseError::kNone;
}

// percent_decode on pct_string_view: validation (make_pct_string_view), then decode.
inline std::optional<std::string> boost_percent_decode(std::string_view in, bool plus_is_space) {
  auto pct = boost::urls::make_pct_string_view(boost::urls::string_view(in.data(), in.size()));
  if (!pct) return std::nullopt;
  boost::urls::encoding_opts opt;
  opt.space_as_plus = plus_is_space;
  return pct->decode(opt);
}

}  // namespace kagi::bench
