#include <kagi/pg/errors.hpp>

namespace kagi::pg {
namespace {

class PgCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "kagi.pg"; }
  std::string message(int code) const override {
    switch (static_cast<Errc>(code)) {
      case Errc::kUnavailable:
        return "PostgreSQL is unavailable (cannot connect, or the connection broke)";
      case Errc::kTimeout:
        return "PostgreSQL did not answer before the deadline";
      case Errc::kPoolExhausted:
        return "every PostgreSQL connection of the pool is in use";
      case Errc::kQuery:
        return "PostgreSQL refused the statement";
      case Errc::kBadOptions:
        return "the PostgreSQL connection string does not parse";
    }
    return "unknown PostgreSQL client error " + std::to_string(code);
  }
};

}  // namespace

const std::error_category& pg_category() {
  static const PgCategory category;
  return category;
}

std::error_code make_error_code(Errc e) { return {static_cast<int>(e), pg_category()}; }

}  // namespace kagi::pg
