// app/app_module.hpp — one app as a site mounts it: its conf section and its routes.
//
//   constexpr kagi::config::KeySpec kKeys[] = {
//       {"guestbook.max_entries", kagi::config::KeyType::kInt, "500", 1, 100000, "",
//        "entries kept"}};
//   kagi::AppModule guestbook_module() {
//     return {"guestbook", kKeys, "a guestbook", [](kagi::App& app) { mount(app); }};
//   }
//
// kagi::serve (serve/serve.hpp) adds every module's section to the conf schema before the
// conf file is read, then calls each mount() once the App exists; mount() reads its keys
// from app.conf() and adds routes (and shutdown hooks) to the app.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include <kagi/config/schema.hpp>

namespace kagi {

class App;

struct AppModule {
  // The conf section the app owns ("bbs" → keys "bbs.*"); empty when it has no keys.
  std::string_view section;
  // Its keys, with static storage (a constexpr array): the schema keeps views of them.
  std::span<const config::KeySpec> keys;
  // One line on what the app is, shown by --help-conf.
  std::string_view doc;
  // Adds the app's routes and hooks; throws ConfigError for a bad value of its own keys.
  std::function<void(App&)> mount;
};

// The framework's schema plus each module's section.
config::Schema schema_for(const std::vector<AppModule>& modules);

}  // namespace kagi
