#include <kagi/view/views.hpp>

#include <ctemplate/template.h>
#include <ctemplate/template_cache.h>
#include <ctemplate/template_dictionary.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

namespace kagi::view {
namespace {

ctemplate::TemplateString ts(std::string_view s) {
  return ctemplate::TemplateString(s.data(), s.size());
}

constexpr std::string_view kPragma = "{{%AUTOESCAPE";

}  // namespace

Dict::Dict()
    : owned_(std::make_unique<ctemplate::TemplateDictionary>("page")), dict_(owned_.get()) {}
Dict::Dict(ctemplate::TemplateDictionary* child) : dict_(child) {}
Dict::~Dict() = default;
Dict::Dict(Dict&&) noexcept = default;
Dict& Dict::operator=(Dict&&) noexcept = default;

void Dict::set(std::string_view name, std::string_view value) {
  dict_->SetValue(ts(name), ts(value));
}
void Dict::set(std::string_view name, int64_t value) {
  dict_->SetValue(ts(name), ts(std::to_string(value)));
}
Dict Dict::add_section(std::string_view name) {
  return Dict(dict_->AddSectionDictionary(ts(name)));
}
void Dict::show_section(std::string_view name) { dict_->ShowSection(ts(name)); }

void Dict::set_trusted_html(std::string_view name, std::string_view html) {
  if (!name.ends_with("_HTML")) {
    throw ViewError("trusted HTML variable '" + std::string(name) + "' must end in _HTML");
  }
  // ctemplate's :none modifier in the template marks the variable as pre-escaped; the
  // template must say {{NAME_HTML:none}} for it, which keeps every such spot greppable.
  dict_->SetValue(ts(name), ts(html));
}

Views::Views(const std::string& dir, const std::string& fallback_dir)
    : cache_(std::make_unique<ctemplate::TemplateCache>()), dir_(dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ViewError("templates folder '" + dir +
                    "' not found: run from the project root or set templates.dir");
  }
  if (!fallback_dir.empty() && !fs::is_directory(fallback_dir, ec)) {
    throw ViewError("templates fallback folder '" + fallback_dir +
                    "' not found: set templates.fallback_dir to kagi's installed templates "
                    "(share/kagi/templates) or leave it empty");
  }
  cache_->SetTemplateRootDirectory(dir);
  std::vector<std::string> roots{dir};
  if (!fallback_dir.empty()) {
    cache_->AddAlternateTemplateRootDirectory(fallback_dir);
    roots.push_back(fallback_dir);
  }
  std::set<std::string> loaded;
  for (const auto& root : roots) {
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".html") continue;
      std::string rel = fs::relative(entry.path(), root).string();
      // The first folder that has a name wins (ctemplate searches the roots in this order).
      if (!loaded.insert(rel).second) continue;
      std::ifstream in(entry.path());
      std::string head;
      std::getline(in, head);
      if (head.rfind(kPragma, 0) != 0) {
        throw ViewError("template " + entry.path().string() +
                        " must start with {{%AUTOESCAPE context=\"HTML\"}}");
      }
      if (!cache_->LoadTemplate(ts(rel), ctemplate::STRIP_BLANK_LINES)) {
        throw ViewError("template " + entry.path().string() +
                        " does not parse (see the ctemplate message above)");
      }
    }
  }
  cache_->Freeze();
}

Views::~Views() = default;

bool Views::has(std::string_view name) const {
  // A frozen cache answers from memory: render into a throwaway with an empty dictionary.
  ctemplate::TemplateDictionary empty("probe");
  std::string out;
  return cache_->ExpandNoLoad(ts(name), ctemplate::STRIP_BLANK_LINES, &empty, nullptr, &out);
}

std::string Views::render(std::string_view name, const Dict& dict) const {
  std::string out;
  if (!cache_->ExpandNoLoad(ts(name), ctemplate::STRIP_BLANK_LINES, dict.raw(), nullptr, &out)) {
    throw ViewError("template " + std::string(name) + " is not loaded from " + dir_);
  }
  return out;
}

}  // namespace kagi::view
