#include <kagi/app/static_files.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace kagi {
namespace {

std::string content_type(const std::filesystem::path& file) {
  std::string ext = file.extension().string();
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

}  // namespace

void mount_static(App& app, const std::string& dir, const std::string& url_prefix) {
  namespace fs = std::filesystem;
  auto files = std::make_shared<std::map<std::string, Response, std::less<>>>();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    Response r;
    r.headers.set("Content-Type", content_type(entry.path()));
    r.headers.set("Cache-Control", "public, max-age=3600");
    r.body = bytes.str();
    files->emplace(entry.path().filename().string(), std::move(r));
  }
  if (ec) throw std::runtime_error("cannot read static folder " + dir + ": " + ec.message());
  app.router().get(url_prefix + "{file}", [files](Request& req, Context&) {
    auto it = files->find(req.param("file"));
    if (it == files->end()) return Response::text("no such file\n", 404);
    return it->second;
  });
}

}  // namespace kagi
