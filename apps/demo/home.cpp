#include "demo/home.hpp"

#include <kagi/app/static_files.hpp>
#include <kagi/view/views.hpp>

namespace kagi::apps {

void mount_home(App& app) {
  mount_static(app, app.conf().get_string("templates.dir") + "/static", "/static/");
  app.router().get("/", [](Request&, Context& ctx) {
    view::Dict page;
    return ctx.render("home.html", page);
  });
}

}  // namespace kagi::apps
