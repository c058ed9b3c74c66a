// apps/demo/site.hpp — the apps kagi-demo mounts, in mount order: home page, test hooks
// (only with test.routes = true), BBS, chat, lock admin. conf/kagi.toml documents exactly the
// keys of these modules plus the framework's.
#pragma once

#include <vector>

#include <kagi/app/app_module.hpp>

namespace kagi::apps {

std::vector<AppModule> demo_modules();

}  // namespace kagi::apps
