#include <kagi/store/path.hpp>

namespace kagi::store {

const char* path_problem(std::string_view path) {
  if (path.empty()) return "empty path";
  if (path.size() > kMaxPath) return "path longer than 1024 bytes";
  if (path.front() == '/') return "absolute path";
  for (char c : path) {
    if (c == '\0') return "NUL byte in path";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "control character in path";
  }
  // Segment by segment without collecting them: every data call checks its path.
  for (std::string_view rest = path;;) {
    const size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty()) return "empty segment ('//' or trailing '/')";
    if (segment == "..") return "'..' segment";
    if (segment == ".") return "'.' segment";
    if (segment.size() > kMaxSegment) return "segment longer than 255 bytes";
    if (segment.starts_with(kReservedPrefix)) return "segment starts with reserved '.kagi-'";
    if (slash == std::string_view::npos) return nullptr;
    rest.remove_prefix(slash + 1);
  }
}

std::vector<std::string_view> path_segments(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      segments.push_back(path.substr(start));
      return segments;
    }
    segments.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
}

std::optional<std::string> folder_prefix(std::string_view folder) {
  if (folder.empty()) return std::string();
  if (path_problem(folder) != nullptr) return std::nullopt;
  return std::string(folder) + '/';
}

}  // namespace kagi::store
