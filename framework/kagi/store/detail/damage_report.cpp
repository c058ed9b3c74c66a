#include <kagi/store/detail/damage_report.hpp>

#include <chrono>

#include <kagi/store/damage.hpp>
#include <kagi/util/log.hpp>

namespace kagi::store::detail {

namespace {

constexpr size_t kMaxRemembered = 4096;

}  // namespace

bool DamageReporter::first_sighting(const struct stat& st, uint64_t offset) {
  std::string key =
      std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' + std::to_string(offset);
  util::MutexLock held(mu_);
  if (seen_.size() >= kMaxRemembered) seen_.clear();
  return seen_.insert(std::move(key)).second;
}

void DamageReporter::report(std::string_view op, std::string_view path, const struct stat& st,
                            uint64_t from, const std::vector<Damage>& spans) {
  for (const Damage& d : spans) {
    const uint64_t offset = from + d.offset;
    if (!first_sighting(st, offset)) continue;
    reported_count_.fetch_add(1, std::memory_order_relaxed);
    util::log_error("store: " + std::string(op) + " " + std::string(path) + ": damaged span of " +
                    std::to_string(d.length) + " bytes at offset " + std::to_string(offset) +
                    ", intact records after it: skipped and kept on disk, the records in it are "
                    "lost. List the damage with kagi-fsck --data " +
                    data_dir_ +
                    "; add --repair to rewrite the log without it (after a backup, under the "
                    "log's lock)");
    damage_log().record(
        DamageEvent{std::chrono::system_clock::now(), std::string(path), offset, d.length});
  }
}

}  // namespace kagi::store::detail
