#include <kagi/app/app_module.hpp>

namespace kagi {

config::Schema schema_for(const std::vector<AppModule>& modules) {
  config::Schema schema = config::Schema::framework();
  for (const auto& module : modules) {
    if (!module.section.empty()) schema.add_section(module.section, module.keys, module.doc);
  }
  return schema;
}

}  // namespace kagi
