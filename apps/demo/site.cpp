#include "demo/site.hpp"

#include "admin/admin.hpp"
#include "bbs/bbs.hpp"
#include "chat/chat.hpp"
#include "demo/home.hpp"
#include "testing/test_routes.hpp"

namespace kagi::apps {

std::vector<AppModule> demo_modules() {
  return {{"", {}, "the demo's front page", mount_home},
          test_routes_module(),
          bbs_module(),
          chat_module(),
          admin_module()};
}

}  // namespace kagi::apps
