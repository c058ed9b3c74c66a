// apps/demo/home.hpp — the demo's front page: links to the mounted apps.
#pragma once

#include <kagi/app/app.hpp>

namespace kagi::apps {

void mount_home(App& app);

}  // namespace kagi::apps
