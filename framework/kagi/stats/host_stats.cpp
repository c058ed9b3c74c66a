#include <kagi/stats/host_stats.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <iterator>
#include <system_error>

#include <kagi/lock/live_file.hpp>
#include <kagi/lock/lock_service.hpp>
#include <kagi/store/damage.hpp>
#include <kagi/store/data_store.hpp>
#include <kagi/store/detail/file_io.hpp>
#include <kagi/store/fs.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::stats {
namespace {

constexpr std::string_view kMagicLine = "kagi-stats\t2";
constexpr size_t kEventsPerProcess = 64;

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxTextField = 512;

// Tabs and line breaks would split a record: route paths are percent-decoded and may hold them.
std::string clean(std::string_view s) {
  std::string out(s.substr(0, kMaxTextField));
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

// What clean() can have written. The reader refuses the rest: such a file was not written by a
// worker, and a name read as it stood would sort and merge differently once written again.
bool is_clean(std::string_view s) {
  return s.size() <= kMaxTextField && s.find('\r') == std::string_view::npos;
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string_view::npos ? tab : tab - start));
    if (tab == std::string_view::npos) return out;
    start = tab + 1;
  }
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

void put_histogram(std::string& out, const lock::HistogramSnapshot& h) {
  out += '\t' + std::to_string(h.count) + '\t' + std::to_string(h.sum_us);
  for (uint64_t b : h.buckets) out += '\t' + std::to_string(b);
}

bool get_histogram(const std::vector<std::string_view>& f, size_t& i, lock::HistogramSnapshot& h) {
  if (i + 2 + lock::kHistogramBuckets > f.size()) return false;
  if (!parse_number(f[i++], h.count) || !parse_number(f[i++], h.sum_us)) return false;
  for (uint64_t& b : h.buckets) {
    if (!parse_number(f[i++], b)) return false;
  }
  return true;
}

bool read_file(const std::string& path, std::string& out) {
  const util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd && store::detail::read_from(store::real_fs(), fd.get(), 0, out) == 0;
}

}  // namespace

void add_into(lock::StatsSnapshot& total, const lock::StatsSnapshot& part) {
  for (const auto& [prefix, p] : part.prefixes) total.prefixes[prefix].add(p);
}

std::string encode_stats_file(const lock::StatsSnapshot& stats,
                              const RequestStatsSnapshot& requests, const std::deque<Event>& events,
                              const store::StoreStats& storage) {
  std::string out(kMagicLine);
  out += '\n';
  for (const auto& [prefix, p] : stats.prefixes) {
    out += "p\t" + clean(prefix) + '\t' + std::to_string(p.acquisitions) + '\t' +
           std::to_string(p.contended) + '\t' + std::to_string(p.timeouts) + '\t' +
           std::to_string(p.order_violations) + '\t' + std::to_string(p.leaks);
    put_histogram(out, p.wait);
    put_histogram(out, p.hold);
    // Added after the histograms, so that a file without it (an older worker) still reads.
    out += '\t' + std::to_string(p.revocations);
    out += '\n';
  }
  // r <route> <duration histogram> <status>=<count>...
  for (const auto& [route, r] : requests.routes) {
    out += "r\t" + clean(route);
    put_histogram(out, r.duration);
    for (const auto& [status, n] : r.by_status) {
      out += '\t' + std::to_string(status) + '=' + std::to_string(n);
    }
    out += '\n';
  }
  for (const Event& e : events) {
    out += "e\t" + std::to_string(e.unix_ms) + '\t' + clean(e.kind) + '\t' + clean(e.name) + '\t' +
           std::to_string(e.pid) + '\t' + clean(e.method) + '\t' + clean(e.path) + '\t' +
           clean(e.detail) + '\n';
  }
  // s <the store's counters, in store::kStoreFields order>, once there is something to count.
  // A reader from before this line skips the whole file (its lock and request stats too) until
  // its own process is restarted as well: during a rolling restart, briefly.
  if (storage != store::StoreStats{}) {
    out += "s";
    for (const store::StoreField& f : store::kStoreFields) {
      out += '\t' + std::to_string(storage.*f.member);
    }
    out += '\n';
  }
  out += "end\n";
  return out;
}

bool decode_stats_file(std::string_view text, lock::StatsSnapshot& stats,
                       RequestStatsSnapshot& requests, std::vector<Event>& events,
                       store::StoreStats* storage) {
  if (storage) *storage = {};  // a file without the line (an older worker's): nothing counted
  if (text.substr(0, kMagicLine.size() + 1) != std::string(kMagicLine) + "\n") return false;
  text.remove_prefix(kMagicLine.size() + 1);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return false;  // torn: every line ends in '\n'
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (line == "end") return text.empty();
    std::vector<std::string_view> f = split_tabs(line);
    if (!std::all_of(f.begin(), f.end(), is_clean)) return false;
    constexpr size_t kPrefixFields = 7 + 2 * (2 + lock::kHistogramBuckets);
    if (f[0] == "p" && (f.size() == kPrefixFields || f.size() == kPrefixFields + 1)) {
      lock::PrefixStatsSnapshot p;
      if (!parse_number(f[2], p.acquisitions) || !parse_number(f[3], p.contended) ||
          !parse_number(f[4], p.timeouts) || !parse_number(f[5], p.order_violations) ||
          !parse_number(f[6], p.leaks)) {
        return false;
      }
      size_t i = 7;
      if (!get_histogram(f, i, p.wait) || !get_histogram(f, i, p.hold)) return false;
      if (i < f.size() && !parse_number(f[i], p.revocations)) return false;
      stats.prefixes[std::string(f[1])] = p;
    } else if (f[0] == "r" && f.size() >= 2 + 2 + lock::kHistogramBuckets) {
      RouteStatsSnapshot r;
      size_t i = 2;
      if (!get_histogram(f, i, r.duration)) return false;
      for (; i < f.size(); ++i) {
        const size_t eq = f[i].find('=');
        int status = 0;
        uint64_t n = 0;
        if (eq == std::string_view::npos || !parse_number(f[i].substr(0, eq), status) ||
            !parse_number(f[i].substr(eq + 1), n)) {
          return false;
        }
        r.by_status[status] = n;
      }
      requests.routes[std::string(f[1])] = std::move(r);
    } else if (f[0] == "s" && f.size() >= 1 + std::size(store::kStoreFields)) {
      // Counters a newer worker appends after ours are not ours to read.
      store::StoreStats read;
      for (size_t i = 0; i < std::size(store::kStoreFields); ++i) {
        if (!parse_number(f[i + 1], read.*store::kStoreFields[i].member)) return false;
      }
      if (storage) *storage = read;
    } else if (f[0] == "e" && f.size() == 8) {
      Event e;
      if (!parse_number(f[1], e.unix_ms) || !parse_number(f[4], e.pid)) return false;
      e.kind = f[2];
      e.name = f[3];
      e.method = f[5];
      e.path = f[6];
      e.detail = f[7];
      events.push_back(std::move(e));
    } else {
      return false;
    }
  }
  return false;  // no "end" line
}

HostStats read_host_stats(const std::string& locks_dir) {
  HostStats host;
  const std::string dir = locks_dir + "/stats";
  for (const std::string& name : lock::live_file_names(dir, ".live")) {
    const std::string live = dir + "/" + name;
    util::UniqueFd fd;
    // A dead process's .live is removed with its .stats: its totals drop out.
    if (lock::open_if_alive(live, O_RDONLY, fd, {".stats"}) != lock::Liveness::kAlive) continue;
    const std::string file = live.substr(0, live.size() - 5) + ".stats";
    std::string text;
    lock::StatsSnapshot part;
    RequestStatsSnapshot requests;
    std::vector<Event> events;
    store::StoreStats storage;
    if (!read_file(file, text) || !decode_stats_file(text, part, requests, events, &storage)) {
      continue;
    }
    add_into(host.stats, part);
    host.requests.add(requests);
    host.storage.add(storage);
    host.events.insert(host.events.end(), events.begin(), events.end());
    ++host.processes;
  }
  std::sort(host.events.begin(), host.events.end(),
            [](const Event& a, const Event& b) { return a.unix_ms > b.unix_ms; });
  if (host.events.size() > kMaxEvents) host.events.resize(kMaxEvents);
  return host;
}

StatsPublisher::StatsPublisher(lock::LockService& locks, const RequestStats& requests,
                               Options options)
    : locks_(locks),
      requests_(requests),
      options_(options),
      dir_(lock::host_state_dir(locks.options()) + "/stats") {
  // Owner only, like the registry: the events name clients and routes.
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::system_error(errno, std::generic_category(), "stats: cannot create " + dir_);
  }
  std::error_code ec;
  live_ = lock::LiveFile::create(dir_, ".live", nullptr, ec);
  if (!live_) throw std::system_error(ec, "stats: cannot create a .live file in " + dir_);
  publish_now();
  thread_ = std::thread([this] { run(); });
}

StatsPublisher::~StatsPublisher() {
  {
    util::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  ::unlink((dir_ + "/" + live_->stem() + ".stats").c_str());
  live_.reset();
}

void StatsPublisher::run() {
  for (;;) {
    {
      util::MutexLock lock(mu_);
      const auto next = std::chrono::steady_clock::now() + options_.interval;
      while (!stop_ && cv_.wait_until(mu_, next) != std::cv_status::timeout) {
      }
      if (stop_) return;
    }
    publish_now();  // without mu_: the destructor's stop is not held up by a slow step
  }
}

void StatsPublisher::collect_slow_holds() {
  // Slow holds of this process, reported once each (while still held), with the holder's route.
  // Reading the registry means reading every process's file: skip it while this process
  // holds and waits for nothing, which is most of the time.
  if (locks_.active_names() == 0) {
    slow_reported_.clear();
    return;
  }
  const int pid = ::getpid();
  const auto wall_now = std::chrono::system_clock::now();
  std::set<std::string> still_held;
  for (const lock::RegistryEntry& e : locks_.snapshot().entries) {
    if (e.pid != pid || e.waiting) continue;
    const auto held = wall_now - e.since;
    if (held < options_.slow_hold) continue;
    std::string key =
        e.request_id + '\t' + e.name + '\t' + std::to_string(e.since.time_since_epoch().count());
    if (!slow_reported_.count(key)) {
      const auto held_ms = std::chrono::duration_cast<std::chrono::milliseconds>(held).count();
      slow_holds_.push_front(Event{unix_ms_now(), "slow_hold", e.name, pid, e.method, e.path,
                                   "held over " + std::to_string(held_ms) + " ms by " +
                                       e.request_id + " (" + e.client_address + ")"});
      if (slow_holds_.size() > kEventsPerProcess) slow_holds_.pop_back();
    }
    still_held.insert(std::move(key));
  }
  slow_reported_ = std::move(still_held);
}

void StatsPublisher::publish_now() {
  util::MutexLock lock(publish_mu_);
  collect_slow_holds();
  // This process's events: the slow holds seen here and the lock layer's own ring.
  std::deque<Event> events(slow_holds_.begin(), slow_holds_.end());
  const int pid = ::getpid();
  for (const lock::LockEvent& e : locks_.recent_events()) {
    events.push_back(Event{
        std::chrono::duration_cast<std::chrono::milliseconds>(e.time.time_since_epoch()).count(),
        std::string(lock::to_string(e.kind)), e.name, pid, e.who.method, e.who.path,
        e.detail + " (request " + e.who.request_id + ", " + e.who.client_address + ")"});
  }
  // The store's damaged log spans (store/damage.hpp): rare, and an operator must see them.
  const std::vector<store::DamageEvent> damage =
      options_.damage ? options_.damage->recent() : std::vector<store::DamageEvent>{};
  for (const store::DamageEvent& d : damage) {
    events.push_back(Event{
        std::chrono::duration_cast<std::chrono::milliseconds>(d.time.time_since_epoch()).count(),
        "log_damage", d.path, pid, "", "",
        std::to_string(d.length) + " damaged bytes at offset " + std::to_string(d.offset) +
            " skipped (records after it kept); see kagi-fsck"});
  }
  std::string text =
      encode_stats_file(locks_.stats(), requests_.snapshot(), events,
                        options_.data ? options_.data->store_stats() : store::StoreStats{});
  if (text == last_text_) return;
  const std::string tmp = dir_ + "/tmp-" + live_->stem();
  const std::string file = dir_ + "/" + live_->stem() + ".stats";
  {
    // 0600, not std::ofstream's 0666 & umask: the snapshot carries client addresses.
    util::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) return;  // retried at the next tick: last_text_ is unchanged
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    // The close is checked: a failed write-back may only show there.
    if (::close(fd.release()) != 0 || done != text.size()) return;
  }
  if (::rename(tmp.c_str(), file.c_str()) == 0) last_text_ = std::move(text);
}

}  // namespace kagi::stats
