// view/views.hpp — HTML templates (Google ctemplate, from Debian's libctemplate-dev).
//
// Why ctemplate: it escapes by *context*. Every kagi template starts with
//   {{%AUTOESCAPE context="HTML"}}
// and ctemplate then escapes each {{VAR}} for where it stands — element text, a quoted or
// unquoted attribute, a URL in href, inline JavaScript — not just with one HTML escape. Views
// refuses to load a template without that pragma, so an unescaped page cannot ship by
// accident. Templates are parsed once at start, the cache is frozen, and rendering is
// lock-free and thread-safe.
//
//   view::Dict page;
//   page.set("TITLE", title);                    // escaped on output
//   for (auto& post : posts) {
//     view::Dict row = page.add_section("POST");  // one {{#POST}}...{{/POST}} repetition
//     row.set("SUBJECT", post.subject);
//   }
//   std::string html = views.render("bbs/board.html", page);
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ctemplate {
class TemplateDictionary;
class TemplateCache;
}  // namespace ctemplate

namespace kagi::view {

class ViewError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The values a template is rendered with. A top-level Dict owns its data; sections returned
// by add_section() belong to their parent and must not outlive it.
class Dict {
 public:
  Dict();
  ~Dict();
  Dict(Dict&&) noexcept;
  Dict& operator=(Dict&&) noexcept;
  Dict(const Dict&) = delete;
  Dict& operator=(const Dict&) = delete;

  void set(std::string_view name, std::string_view value);
  void set(std::string_view name, int64_t value);
  // Adds one repetition of section `name` and returns its dictionary.
  Dict add_section(std::string_view name);
  // Shows section `name` once with this dictionary's values ({{#NAME}}..{{/NAME}} as an "if").
  void show_section(std::string_view name);
  // Sets `name` only for this render, without escaping: for HTML that kagi built and escaped
  // itself (e.g. auto-linked post bodies). Use sparingly; the name must end in "_HTML".
  void set_trusted_html(std::string_view name, std::string_view html);

  const ctemplate::TemplateDictionary* raw() const { return dict_; }

 private:
  explicit Dict(ctemplate::TemplateDictionary* child);
  std::unique_ptr<ctemplate::TemplateDictionary> owned_;
  ctemplate::TemplateDictionary* dict_ = nullptr;
};

class Views {
 public:
  // Loads every *.html below `dir` (e.g. "errors/404.html"), then every one below
  // `fallback_dir` (when not empty) that `dir` does not have: a site's own templates first,
  // kagi's installed error pages behind them. Throws ViewError naming the file when one is
  // missing the AUTOESCAPE pragma or does not parse, or when a folder is missing.
  explicit Views(const std::string& dir, const std::string& fallback_dir = {});
  ~Views();
  Views(const Views&) = delete;
  Views& operator=(const Views&) = delete;

  bool has(std::string_view name) const;
  // Renders template `name` (relative to the folder). Throws ViewError if it is unknown.
  std::string render(std::string_view name, const Dict& dict) const;

 private:
  std::unique_ptr<ctemplate::TemplateCache> cache_;
  std::string dir_;
};

}  // namespace kagi::view
