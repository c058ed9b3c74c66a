#include <kagi/offline/state_store.hpp>

#include <charconv>

#include <kagi/offline/detail/state_backends.hpp>

namespace kagi::offline {

std::string_view Rows::text(size_t row, size_t column) const {
  const auto& cell = rows_.at(row).at(column);
  return cell ? std::string_view(*cell) : std::string_view();
}

int64_t Rows::integer(size_t row, size_t column) const {
  const std::string_view t = text(row, column);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  return ec == std::errc() && end == t.data() + t.size() ? value : 0;
}

bool Rows::is_null(size_t row, size_t column) const { return !rows_.at(row).at(column); }

std::unique_ptr<StateStore> open_state_store(const StateOptions& options, std::string* why) {
  if (options.backend == "postgres") return detail::open_pg_state(options, why);
  if (options.backend == "sqlite") return detail::open_sqlite_state(options, why);
  if (why) *why = "no state store called '" + options.backend + "' (sqlite or postgres)";
  return nullptr;
}

}  // namespace kagi::offline
