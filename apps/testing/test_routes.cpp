#include "testing/test_routes.hpp"

#include <malloc.h>

#include <charconv>
#include <thread>

#include <kagi/app/http_error.hpp>
#include <kagi/lock/lock_context.hpp>
#include <kagi/store/data_dir.hpp>

namespace kagi::apps {
namespace {

int64_t int_arg(const Request& req, std::string_view name, int64_t max) {
  std::string_view text = req.arg(name);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > max) {
    throw HttpError(400,
                    std::string(name) + " must be an integer from 0 to " + std::to_string(max));
  }
  return value;
}

// What the app sees of the request, and the client's CSRF token as a page with a form would
// render it (so this answer sets the token's cookie when the client has none).
Response echo(Request& req, Context& ctx) {
  std::string out = "method " + req.method + "\npath " + req.path + "\n";
  for (const auto& [k, v] : req.query_params.items()) out += "arg " + k + "=" + v + "\n";
  for (const auto& [k, v] : req.form.fields.items()) out += "field " + k + "=" + v + "\n";
  for (const auto& file : req.form.files) {
    out +=
        "file " + file.field + " " + file.filename + " " + std::to_string(file.data.size()) + "\n";
  }
  for (const auto& [k, v] : req.cookies.items()) out += "cookie " + k + "\n";
  out += "client " + req.client_address + "\n";
  out += "csrf " + ctx.csrf_token() + "\n";
  return Response::text(std::move(out));
}

// The file that lock `name` protects: "testing/<name with '/' as '-'>.txt".
std::string file_of(std::string_view name) {
  std::string file = "testing/" + std::string(name) + ".txt";
  for (size_t i = 8; i < file.size(); ++i) {
    if (file[i] == '/') file[i] = '-';
  }
  return file;
}

}  // namespace

void mount_test_routes(App& app) {
  Router& r = app.router();
  r.get("/_test/hello", [](Request&, Context&) { return Response::text("hello\n"); });
  r.get("/_test/echo", echo);
  r.get("/_test/heap", [](Request&, Context&) {
    // Bytes malloc has handed out and not got back, over every arena and in its own mmaps
    // (large blocks): unlike RSS, it does not include what the allocator keeps cached, so leak
    // and per-request memory tests can compare it exactly.
    struct mallinfo2 info = mallinfo2();
    return Response::json("{\"in_use\":" + std::to_string(info.uordblks + info.hblkhd) + "}");
  });
  r.post("/_test/echo", echo);
  // An empty answer with the status `code` (200..599): how front ends frame each status.
  r.get("/_test/status", [](Request& req, Context&) {
    Response response;
    response.status = static_cast<int>(int_arg(req, "code", 599));
    if (response.status < 200) throw HttpError(400, "code must be from 200 to 599");
    return response;
  });
  r.get("/_test/sleep", [](Request& req, Context&) {
    int64_t ms = int_arg(req, "ms", 60000);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return Response::text("slept " + std::to_string(ms) + "\n");
  });
  r.get("/_test/big", [](Request& req, Context&) {
    int64_t bytes = int_arg(req, "bytes", int64_t{64} << 20);
    return Response::text(std::string(static_cast<size_t>(bytes), 'x'));
  });
  r.get("/_test/hold", [](Request& req, Context& ctx) {
    int64_t ms = int_arg(req, "ms", 60000);
    auto guard = ctx.locks.exclusive(req.arg("name"));
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return Response::text("held " + std::string(req.arg("name")) + " " + std::to_string(ms) + "\n");
  });
  r.get("/_test/hold_commit", [](Request& req, Context& ctx) {
    int64_t ms = int_arg(req, "ms", 60000);
    auto guard = ctx.locks.exclusive(req.arg("name"));
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    const std::string value(req.arg("value"));
    store::Status s = ctx.data.commit(guard, file_of(guard.name()), value);
    if (!s.ok()) return Response::text("refused: " + s.message() + "\n", 409);
    return Response::text("committed " + value + "\n");
  });
  r.get("/_test/data", [](Request& req, Context& ctx) {
    auto guard = ctx.locks.shared(req.arg("name"));
    auto text = ctx.data.read(guard, file_of(guard.name()));
    if (!text.ok()) return Response::text(text.status().message() + "\n", 404);
    return Response::text(text.value());
  });
}

namespace {

using enum config::KeyType;

// The [test] section of the conf (conf/kagi.toml documents each key at length).
constexpr config::KeySpec kTestKeys[] = {
    config::KeySpec{"test.routes", kBool, "false", 0, 0, "",
                    "mount /_test/ routes used by the integration tests"},
};

}  // namespace

// The routes are mounted only when test.routes is on.
AppModule test_routes_module() {
  return {"test", kTestKeys, "test hooks: never on in production", [](App& app) {
            if (app.conf().get_bool("test.routes")) mount_test_routes(app);
          }};
}

}  // namespace kagi::apps
