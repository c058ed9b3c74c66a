#include <kagi/store/status.hpp>

namespace kagi::store {

namespace {

class StoreCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "kagi.store"; }
  std::string message(int e) const override {
    switch (static_cast<Errc>(e)) {
      case Errc::kUnsafePath:
        return "unsafe path (must be relative to data.dir, without '..', NUL, empty "
               "segments or symlinks)";
      case Errc::kNotHeld:
        return "the guard does not hold its lock (take the lock before touching the data)";
      case Errc::kTooLarge:
        return "record too large";
      case Errc::kCorrupt:
        return "content failed its integrity check";
      case Errc::kForeignLockDomain:
        return "data.dir is written by processes of another lock domain";
      case Errc::kUnavailable:
        return "the data server cannot be reached (retry shortly)";
      case Errc::kDatabase:
        return "the data server refused the statement";
    }
    return "unknown store error";
  }
};

}  // namespace

const std::error_category& store_category() {
  static const StoreCategory category;
  return category;
}

std::error_code make_error_code(Errc e) { return {static_cast<int>(e), store_category()}; }

namespace {

// Paths come from requests: control bytes are escaped so a message stays one log line.
void append_printable(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : s) {
    auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out.append("\\x").push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 0xF]);
    } else {
      out.push_back(c);
    }
  }
}

}  // namespace

Status Status::failed(std::error_code code, std::string_view op, std::string_view path,
                      std::string_view step) {
  std::string m;
  m.reserve(op.size() + path.size() + step.size() + 48);
  m.append(op).append(" ");
  append_printable(m, path);
  m.append(": ");
  if (!step.empty()) m.append(step).append(": ");
  m.append(code.message());
  return Status(code, std::move(m));
}

}  // namespace kagi::store
