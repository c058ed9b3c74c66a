#include <kagi/pg/options.hpp>

#include <libpq-fe.h>

#include <charconv>

#include <kagi/pg/errors.hpp>
#include <kagi/util/process.hpp>

namespace kagi::pg {

std::error_code parse_dsn(const std::string& dsn, DsnSettings& out, std::string* why) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(dsn.c_str(), &error);
  if (!parsed) {
    if (why) *why = error ? std::string(error) : "out of memory";
    if (why && !why->empty() && why->back() == '\n') why->pop_back();
    PQfreemem(error);
    return make_error_code(Errc::kBadOptions);
  }
  out.clear();
  for (PQconninfoOption* o = parsed; o->keyword; ++o) {
    if (o->val) out.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(parsed);
  return {};
}

std::error_code check_dsn(const std::string& dsn, std::string* why) {
  DsnSettings ignored;
  return parse_dsn(dsn, ignored, why);
}

std::string default_application_name() {
  const std::string pid = std::to_string(util::current_pid());
  std::string name = util::host_name();
  // PostgreSQL keeps 63 bytes of application_name; the pid must survive whole.
  const size_t room = 63 - (std::string_view("kagi//").size() + pid.size());
  if (name.size() > room) name.resize(room);
  for (char& c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      c = '_';
    }
  }
  return "kagi/" + name + "/" + pid;
}

bool parse_application_name(const std::string& application_name, std::string& host, int& pid) {
  if (application_name.rfind("kagi/", 0) != 0) return false;
  const size_t slash = application_name.rfind('/');
  if (slash <= 4) return false;
  const char* first = application_name.data() + slash + 1;
  const char* last = application_name.data() + application_name.size();
  auto [end, ec] = std::from_chars(first, last, pid);
  if (ec != std::errc() || end != last || first == last) return false;
  host = application_name.substr(5, slash - 5);
  return true;
}

}  // namespace kagi::pg
