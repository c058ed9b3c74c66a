#include <kagi/lock/detail/dir_lock.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

#include <kagi/lock/detail/names.hpp>
#include <kagi/lock/errors.hpp>
#include <kagi/util/process.hpp>
#include <kagi/util/random.hpp>
#include <kagi/util/unique_fd.hpp>

namespace kagi::lock::dirlock {
namespace {

std::error_code errno_code(int e) { return {e, std::generic_category()}; }

std::string failed(std::string_view what, const std::string& path, int e) {
  return std::string(what) + " '" + path + "': " + std::strerror(e);
}

template <typename T>
bool parse_number(std::string_view text, T& out, int base = 10) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string read_small_file(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  char buf[4096];
  std::string out;
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Escapes what would end a field of the record: '%' and line breaks.
std::string escape(std::string_view v, size_t limit) {
  std::string out;
  for (char c : v.substr(0, limit)) {
    if (c == '%' || c == '\n' || c == '\r') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    unsigned value = 0;
    if (v[i] == '%' && i + 2 < v.size() && parse_number(v.substr(i + 1, 2), value, 16)) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

// Removes what a stage folder holds (our records) and the folder.
void remove_folder(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* ent = ::readdir(d)) {
      std::string_view n = ent->d_name;
      if (n != "." && n != "..") ::unlinkat(::dirfd(d), ent->d_name, 0);
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// The names in a folder (not . and ..); empty if it cannot be read.
std::vector<std::string> names_in(DIR* d) {
  std::vector<std::string> out;
  while (dirent* ent = ::readdir(d)) {
    std::string_view n = ent->d_name;
    if (n != "." && n != "..") out.emplace_back(n);
  }
  return out;
}

std::vector<std::string> names_in(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return {};
  std::vector<std::string> out = names_in(d);
  ::closedir(d);
  return out;
}

// Removes the entry `path` by its exact name: true if this call removed it. ESTALE (NFS: the
// lock directory's file handle no longer names a directory on the server, because it was
// removed or replaced) is tried once more by path, which looks the directory up afresh; a
// second ESTALE means the directory, and so the entry, is gone: false, as for ENOENT.
bool unlink_exact(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::unlink(path.c_str()) == 0) return true;
    if (errno != ESTALE) return false;
  }
  return false;
}

uint64_t random64() {
  const std::string hex = util::random_hex(8);
  uint64_t v = 0;
  parse_number(hex, v, 16);
  return v | 1;  // never 0: 0 means "none" in tests and tools
}

}  // namespace

namespace {
std::atomic<int64_t> g_wall_shift_ms{0};
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         g_wall_shift_ms.load(std::memory_order_relaxed);
}

void shift_wall_clock_for_tests(int64_t offset_ms) {
  g_wall_shift_ms.store(offset_ms, std::memory_order_relaxed);
}

const std::string& boot_id() {
  static const std::string id = [] {
    std::string s = read_small_file("/proc/sys/kernel/random/boot_id");
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s.empty() ? std::string("unknown") : s;
  }();
  return id;
}

const std::string& pid_namespace() {
  static const std::string id = [] {
    char buf[64];
    const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
    if (n <= 0) return std::string();
    // "pid:[4026531836]": keep the digits.
    std::string_view link(buf, static_cast<size_t>(n));
    const size_t open = link.find('['), close = link.rfind(']');
    uint64_t inode = 0;
    if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
        !parse_number(link.substr(open + 1, close - open - 1), inode)) {
      return std::string();
    }
    return std::to_string(inode);
  }();
  return id;
}

ProcessState probe_process(int pid) {
  using K = ProcessState::Kind;
  if (pid <= 0) return {K::kUnknown, 0};
  // Gone only on evidence: /proc/PID missing *and* the kernel saying no such process (a
  // /proc mounted with hidepid hides other users' live processes behind ENOENT too).
  auto gone_or_unknown = [pid](int err) -> ProcessState {
    if (err != ENOENT && err != ESRCH) return {K::kUnknown, 0};
    return ::kill(pid, 0) != 0 && errno == ESRCH ? ProcessState{K::kGone, 0}
                                                 : ProcessState{K::kUnknown, 0};
  };
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return gone_or_unknown(errno);
  char buf[1024];
  std::string stat;
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) stat.append(buf, static_cast<size_t>(n));
  if (n < 0) return gone_or_unknown(errno);  // ESRCH: it exited while we read
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so count from the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {K::kUnknown, 0};
  std::string_view rest = std::string_view(stat).substr(close + 1);
  if (rest.size() < 2) return {K::kUnknown, 0};
  // A zombie (killed, not reaped yet by its parent) holds nothing any more.
  if (rest[1] == 'Z' || rest[1] == 'X') return {K::kGone, 0};
  // Field 22 (starttime): after the ')' come field 3 (state) and on; skip fields 3 to 21.
  for (int field = 3; field < 22; ++field) {
    const size_t sp = rest.find(' ', 1);
    if (sp == std::string_view::npos) return {K::kUnknown, 0};
    rest.remove_prefix(sp);
  }
  rest.remove_prefix(1);
  rest = rest.substr(0, rest.find(' '));
  uint64_t start = 0;
  if (!parse_number(rest, start)) return {K::kUnknown, 0};
  return {K::kRunning, start};
}

bool holder_is_dead(const Owner& o, std::string_view host, std::string* why) {
  // Another host's, another boot's or another container's pid says nothing here; an unknown
  // namespace (ours or the record's: a record of an older kagi has none) neither.
  if (o.host != host || o.boot != boot_id() || pid_namespace().empty() ||
      o.pidns != pid_namespace()) {
    return false;
  }
  const ProcessState p = probe_process(o.pid);
  if (p.kind == ProcessState::kGone) {
    if (why) *why = "its holder, pid " + std::to_string(o.pid) + " on this host, is not running";
    return true;
  }
  // A start time of 0 is one the holder could not read for itself: not evidence either.
  if (p.kind == ProcessState::kRunning && o.start != 0 && p.start != o.start) {
    if (why) {
      *why = "its holder, pid " + std::to_string(o.pid) +
             " on this host, is not running (the pid now belongs to another process)";
    }
    return true;
  }
  return false;  // running, or unknown: alive
}

bool parse_stage_name(std::string_view file, StageName& out) {
  std::string_view fields[4];
  std::string_view rest = file;
  for (int i = 3; i >= 0; --i) {
    const size_t dot = rest.rfind('.');
    if (dot == std::string_view::npos) return false;
    fields[i] = rest.substr(dot + 1);
    rest = rest.substr(0, dot);
  }
  uint64_t pidns = 0, n = 0;
  if (rest.empty() || !parse_number(fields[0], pidns) || !parse_number(fields[1], out.pid) ||
      !parse_number(fields[2], out.start) || !parse_number(fields[3], n)) {
    return false;
  }
  out.host = std::string(rest);
  out.pidns = std::string(fields[0]);
  return true;
}

bool parse_entry(std::string_view file, Entry& out) {
  // <kind>.<16 hex>.<expiry>.<token>
  if (file.size() < 2 || (file[0] != 'x' && file[0] != 's') || file[1] != '.') return false;
  out.mode = file[0] == 'x' ? Mode::kExclusive : Mode::kShared;
  std::string_view rest = file.substr(2);
  const size_t a = rest.find('.');
  const size_t b = a == std::string_view::npos ? a : rest.find('.', a + 1);
  if (b == std::string_view::npos) return false;
  if (!parse_number(rest.substr(0, a), out.nonce, 16) ||
      !parse_number(rest.substr(a + 1, b - a - 1), out.expiry_ms) ||
      !parse_number(rest.substr(b + 1), out.token)) {
    return false;
  }
  out.file = std::string(file);
  return true;
}

std::string entry_file(const Entry& e) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%c.%016llx.%lld.%llu", e.mode == Mode::kExclusive ? 'x' : 's',
                static_cast<unsigned long long>(e.nonce), static_cast<long long>(e.expiry_ms),
                static_cast<unsigned long long>(e.token));
  return buf;
}

std::string format_owner(const Owner& o) {
  std::string s = "kagi-dirlock 1\n";
  s += "name=" + escape(o.name, 256) + "\n";
  s += "host=" + escape(o.host, 256) + "\n";
  s += "boot=" + escape(o.boot, 64) + "\n";
  s += "pidns=" + escape(o.pidns, 32) + "\n";
  s += "pid=" + std::to_string(o.pid) + "\n";
  s += "start=" + std::to_string(o.start) + "\n";
  s += "request=" + escape(o.request, 128) + "\n";
  s += "route=" + escape(o.route, 1024) + "\n";
  s += "at=" + std::to_string(o.at_ms) + "\n";
  s += "lease=" + std::to_string(o.lease_ms) + "\n";
  return s;  // at most ~2 KB: well within a symlink's 4095 bytes
}

bool parse_owner(std::string_view text, Owner& out) {
  if (!text.starts_with("kagi-dirlock 1\n")) return false;
  text.remove_prefix(15);
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "name") out.name = unescape(value);
    if (key == "host") out.host = unescape(value);
    if (key == "boot") out.boot = unescape(value);
    if (key == "pidns") out.pidns = unescape(value);
    if (key == "pid") parse_number(value, out.pid);
    if (key == "start") parse_number(value, out.start);
    if (key == "request") out.request = unescape(value);
    if (key == "route") out.route = unescape(value);
    if (key == "at") parse_number(value, out.at_ms);
    if (key == "lease") parse_number(value, out.lease_ms);
  }
  return true;
}

DirLocks::DirLocks(Config config)
    : config_(std::move(config)),
      stage_dir_(config_.root + "/.stage"),
      my_start_(probe_process(util::current_pid()).start),
      stage_prefix_(config_.host + "." + (pid_namespace().empty() ? "0" : pid_namespace()) + "." +
                    std::to_string(util::current_pid()) + "." + std::to_string(my_start_) + ".") {
  for (const std::string& dir : {config_.root, stage_dir_}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::system_error(errno_code(errno),
                              "dir locks: cannot create '" + dir +
                                  "' (locks.dir must be writable by every kagi process)");
    }
  }
  // Stage folders of this host's dead processes (killed while making a lock directory):
  // never a lock, only litter. Judged as owner records are (holder_is_dead): a folder of
  // another host, boot or container, or of a process whose state cannot be read, stays.
  for (const std::string& n : names_in(stage_dir_)) {
    StageName stage;
    if (!parse_stage_name(n, stage)) continue;
    Owner maker;
    maker.host = stage.host;
    maker.boot = boot_id();  // a folder of an earlier boot: its pid is gone or another's
    maker.pidns = stage.pidns;
    maker.pid = stage.pid;
    maker.start = stage.start;
    if (!holder_is_dead(maker, config_.host)) continue;
    // Renamed to a name of ours first: if its maker is alive after all and renames it into
    // place meanwhile, exactly one of the two renames succeeds, and a folder that became a
    // lock directory is never emptied here.
    const std::string mine = stage_path();
    if (::rename((stage_dir_ + "/" + n).c_str(), mine.c_str()) == 0) remove_folder(mine);
  }
}

std::string DirLocks::lock_dir(std::string_view name) const {
  std::string file = lock_file_name(name);  // "<base>.lock"
  file.resize(file.size() - 5);
  return config_.root + "/" + file + ".d";
}

std::string DirLocks::counter_file(std::string_view name) const {
  std::string dir = lock_dir(name);
  dir.back() = 'n';
  return dir;
}

std::string DirLocks::intent_dir(std::string_view name) const {
  std::string dir = lock_dir(name);
  dir.back() = 'w';
  return dir;
}

std::string DirLocks::stage_path() {
  return stage_dir_ + "/" + stage_prefix_ +
         std::to_string(stage_seq_.fetch_add(1, std::memory_order_relaxed));
}

std::string DirLocks::token_dir(std::string_view name) const {
  std::string dir = lock_dir(name);
  dir.back() = 't';
  return dir;
}

namespace {

// The tokens in a token folder, read through a fresh descriptor (on NFS an open revalidates
// the folder: close-to-open), and the largest; `ok` false if the folder cannot be read.
uint64_t max_token_in(const std::string& dir, std::vector<uint64_t>* all, int& err) {
  err = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    err = errno;
    return 0;
  }
  uint64_t max = 0;
  for (const std::string& n : names_in(d)) {
    uint64_t v = 0;
    if (!parse_number(n, v)) continue;
    max = std::max(max, v);
    if (all) all->push_back(v);
  }
  ::closedir(d);
  return max;
}

// Tokens kept below the latest: a contender whose listing is a little behind still finds the
// folder it would make taken (EEXIST) and goes higher.
constexpr uint64_t kTokensKept = 64;

}  // namespace

uint64_t DirLocks::latest_token(std::string_view name) const {
  int err = 0;
  return max_token_in(token_dir(name), nullptr, err);
}

std::error_code DirLocks::draw_token(std::string_view name, uint64_t floor, uint64_t& token) {
  const std::string dir = token_dir(name);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::vector<uint64_t> all;
    int err = 0;
    uint64_t max = max_token_in(dir, &all, err);
    if (err == ENOENT) {
      if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_code(errno);
      continue;
    }
    if (err) return errno_code(err);
    if (all.empty()) {
      // The first token of this name here: above what an older kagi's counter reached.
      struct stat st {};
      if (::stat(counter_file(name).c_str(), &st) == 0) {
        max = std::max(max, static_cast<uint64_t>(st.st_size));
      }
    }
    const uint64_t next = std::max(max, floor) + 1;
    if (::mkdir((dir + "/" + std::to_string(next)).c_str(), 0700) == 0) {
      for (uint64_t v : all) {
        if (v + kTokensKept < next) ::rmdir((dir + "/" + std::to_string(v)).c_str());
      }
      token = next;
      return {};
    }
    if (errno == EEXIST) {
      floor = next;  // drawn by someone else meanwhile: go higher
      continue;
    }
    if (errno != ENOENT) return errno_code(errno);  // ENOENT: the folder went; make it again
  }
  return errno_code(EAGAIN);
}

std::error_code DirLocks::join_shared(const std::string& dir, const Entry& e,
                                      const std::string& target, bool& joined) {
  joined = false;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? std::error_code() : errno_code(errno);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    const int err = errno;
    ::close(fd);
    return errno_code(err);
  }
  // Read through the descriptor: the folder we list is the one we would join. A folder is
  // born with a writer's record or a reader's and never gains a writer's later, so one with
  // no writer's record is a reader's folder (or an emptied one, which a reader may take).
  bool writer = false;
  for (const std::string& n : names_in(d)) writer = writer || n.starts_with("x.");
  std::error_code ec;
  if (!writer) {
    // Creating an entry in a folder that was removed meanwhile fails (ENOENT here, ESTALE on
    // NFS): then the caller starts over.
    if (::symlinkat(target.c_str(), ::dirfd(d), entry_file(e).c_str()) == 0) {
      joined = true;
    } else if (errno != ENOENT && errno != ESTALE) {
      ec = errno_code(errno);
    }
  }
  ::closedir(d);
  return ec;
}

std::error_code DirLocks::try_lock(std::string_view name, Mode mode, const HolderInfo& who,
                                   bool respect_intent, Hold& out, std::string* why) {
  const auto busy = make_error_code(Errc::kTimeout);
  if (mode == Mode::kShared && respect_intent && writer_waiting(name)) return busy;
  const int64_t now = wall_ms();
  Owner owner{.name = std::string(name),
              .host = config_.host,
              .boot = boot_id(),
              .pidns = pid_namespace(),
              .pid = util::current_pid(),
              .start = 0,
              .request = who.request_id,
              .route = who.method + " " + who.path,
              .at_ms = now,
              .lease_ms = config_.lease.count()};
  owner.start = my_start_;
  const std::string target = format_owner(owner);
  Entry e;
  e.mode = mode;
  e.nonce = random64();
  e.expiry_ms = now + config_.lease.count();
  e.file = entry_file(e);
  const std::string dir = lock_dir(name);

  for (int attempt = 0; attempt < 3; ++attempt) {
    if (mode == Mode::kExclusive) {
      // Held (a lock directory with an entry): busy, without drawing a token for nothing. An
      // empty one is free and removed here, as a release does.
      if (::rmdir(dir.c_str()) != 0 && (errno == ENOTEMPTY || errno == EEXIST)) return busy;
      // The token is drawn before the record is made, so it is in the record's name from the
      // moment anyone can see the record (and the holder).
      if (auto ec = draw_token(name, 0, e.token)) {
        if (why) *why = failed("draw a fencing token in", token_dir(name), ec.value());
        return ec;
      }
      e.file = entry_file(e);
    }
    if (mode == Mode::kShared) {
      bool joined = false;
      if (auto ec = join_shared(dir, e, target, joined)) {
        if (why) *why = failed("join", dir, ec.value());
        return ec;
      }
      if (joined) {
        out = Hold{std::string(name), dir, e};
        return {};
      }
      struct stat st {};
      if (::lstat(dir.c_str(), &st) == 0) return busy;  // a writer's folder (or just made)
    }
    // Make the lock directory whole under a private name, then rename it into place: rename
    // onto a directory that has an entry fails, so this is the exclusive step, and nobody
    // ever sees a lock directory without its record. (Onto an *empty* one it succeeds: that is
    // a lock whose last record was just removed, free.)
    const std::string stage = stage_path();
    if (::mkdir(stage.c_str(), 0700) != 0) {
      const int err = errno;
      if (why) *why = failed("mkdir", stage, err);
      return errno_code(err);
    }
    if (::symlink(target.c_str(), (stage + "/" + e.file).c_str()) != 0) {
      const int err = errno;
      ::rmdir(stage.c_str());
      if (why) *why = failed("symlink", stage + "/" + e.file, err);
      return errno_code(err);
    }
    if (::rename(stage.c_str(), dir.c_str()) != 0) {
      const int err = errno;
      struct stat st {};
      // ENOENT: on NFS a rename whose answer was lost and that was sent again finds its
      // source gone. Whether it happened is in the lock directory.
      if (!(err == ENOENT && ::lstat((dir + "/" + e.file).c_str(), &st) == 0)) {
        // ENOENT with our stage folder gone: a cleaner took this process for dead (it cannot
        // have, by holder_is_dead's rule, but a wrong host id could): make another.
        if (err == ENOENT && ::lstat(stage.c_str(), &st) != 0) continue;
        remove_folder(stage);
        if (err == EEXIST || err == ENOTEMPTY) {
          if (mode == Mode::kShared) continue;  // a reader may have made it: join that
          return busy;
        }
        if (why) *why = failed("rename", stage + " -> " + dir, err);
        return errno_code(err);
      }
    }
    out = Hold{std::string(name), dir, e};
    if (mode == Mode::kExclusive) {
      // A token drawn before ours may have been published and let go while we waited; and a
      // contender may have drawn a larger one before we published. Ours must be larger than
      // every token drawn before now (every earlier holder's among them): if it is not, draw
      // again and rename our record to it while we hold the name. A rename that fails means
      // the record was taken over meanwhile: not held.
      for (int redraw = 0;; ++redraw) {
        const uint64_t latest = latest_token(name);
        if (latest <= out.entry.token) break;
        Entry higher = out.entry;
        std::error_code ec =
            redraw < 100 ? draw_token(name, latest, higher.token) : errno_code(EAGAIN);
        higher.file = entry_file(higher);
        if (!ec && ::rename((dir + "/" + out.entry.file).c_str(),
                            (dir + "/" + higher.file).c_str()) != 0) {
          ec = errno == ENOENT || errno == ESTALE ? make_error_code(Errc::kTimeout)
                                                  : errno_code(errno);
        }
        if (ec) {
          release(out);
          if (ec == Errc::kTimeout) return busy;
          if (why) *why = failed("draw a fencing token in", token_dir(name), ec.value());
          return ec;
        }
        out.entry = higher;
      }
    }
    return {};
  }
  return busy;
}

std::error_code DirLocks::renew(Hold& hold) {
  Entry next = hold.entry;
  next.expiry_ms = std::max(wall_ms() + config_.lease.count(), hold.entry.expiry_ms + 1);
  next.file = entry_file(next);
  const std::string from = hold.dir + "/" + hold.entry.file;
  const std::string to = hold.dir + "/" + next.file;
  if (::rename(from.c_str(), to.c_str()) == 0) {
    hold.entry = next;
    return {};
  }
  const int err = errno;
  struct stat st {};
  if (err == ENOENT && ::lstat(to.c_str(), &st) == 0) {  // NFS: a resent rename (see above)
    hold.entry = next;
    return {};
  }
  if (err == ENOENT || err == ESTALE) return make_error_code(Errc::kFenceLost);
  return errno_code(err);
}

void DirLocks::release(const Hold& hold) {
  // Only our exact record: if it was taken over, its name is gone and this removes nothing.
  if (unlink_exact(hold.dir + "/" + hold.entry.file)) {
    ::rmdir(hold.dir.c_str());  // fails, harmlessly, while other readers are in it
  }
}

std::vector<Entry> DirLocks::entries(std::string_view name,
                                     std::vector<std::string>* unknown) const {
  std::vector<Entry> out;
  for (const std::string& n : names_in(lock_dir(name))) {
    Entry e;
    if (parse_entry(n, e)) {
      out.push_back(std::move(e));
    } else if (unknown) {
      unknown->push_back(n);
    }
  }
  return out;
}

bool read_owner_at(std::string_view dir, const Entry& e, Owner& out) {
  char buf[4096];
  const std::string path = std::string(dir) + "/" + e.file;
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0) return false;
  return parse_owner(std::string_view(buf, static_cast<size_t>(n)), out);
}

std::vector<Listed> list_all(const std::string& root) {
  std::vector<Listed> out;
  for (const std::string& n : names_in(root)) {
    if (!n.ends_with(".d")) continue;
    const std::string dir = root + "/" + n;
    for (const std::string& f : names_in(dir)) {
      Listed l;
      l.dir = n;
      if (!parse_entry(f, l.entry)) continue;
      l.owner_read = read_owner_at(dir, l.entry, l.owner);
      out.push_back(std::move(l));
    }
  }
  return out;
}

std::error_code break_record(const std::string& root, std::string_view dir, std::string_view file,
                             std::chrono::milliseconds max_skew) {
  Entry e;
  if (!dir.ends_with(".d") || dir.find('/') != std::string_view::npos || dir.starts_with(".") ||
      !parse_entry(file, e)) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  const std::string folder = root + "/" + std::string(dir);
  struct stat st {};
  if (::lstat((folder + "/" + e.file).c_str(), &st) != 0) return make_error_code(Errc::kReleased);
  if (wall_ms() - e.expiry_ms <= max_skew.count())
    return std::make_error_code(std::errc::resource_unavailable_try_again);
  if (!unlink_exact(folder + "/" + e.file)) return make_error_code(Errc::kReleased);
  ::rmdir(folder.c_str());
  return {};
}

std::string DirLocks::stale_reason(std::string_view name, const Entry& e,
                                   std::chrono::steady_clock::duration unchanged_for) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  Owner o;
  const bool known = read_owner(lock_dir(name), e, o) && o.lease_ms > 0;
  // Rule 1, on the holder's own lease: it renews within a third of *its* lease, whatever this
  // process's is. A record that cannot be read or parsed gets this process's lease plus the
  // skew margin: it cannot wedge the lock, and a live holder it was written by (a newer kagi's
  // record, a read that failed once) has had two leases' worth of renewals to show it lives.
  const milliseconds limit = known ? milliseconds(o.lease_ms) : config_.lease + config_.max_skew;
  const int64_t unchanged_ms = duration_cast<milliseconds>(unchanged_for).count();
  if (unchanged_for >= limit) {
    if (!known) {
      return "its record cannot be read and its name did not change for " +
             std::to_string(unchanged_ms) +
             " ms (locks.dir_lease_ms + locks.dir_max_clock_skew_ms = " +
             std::to_string(limit.count()) + ")";
    }
    return "its lease was not renewed for " + std::to_string(unchanged_ms) +
           " ms (the holder's lease: " + std::to_string(o.lease_ms) + " ms)";
  }
  const int64_t late = wall_ms() - e.expiry_ms;
  if (late > config_.max_skew.count()) {
    return "its lease expired " + std::to_string(late) +
           " ms ago by this host's clock (more than locks.dir_max_clock_skew_ms = " +
           std::to_string(config_.max_skew.count()) + ")";
  }
  std::string why;
  if (known && holder_is_dead(o, config_.host, &why)) return why;
  return {};
}

std::string DirLocks::unknown_stale_reason(
    std::chrono::steady_clock::duration unchanged_for) const {
  const auto limit = config_.lease + config_.max_skew;
  if (unchanged_for < limit) return {};
  return "it is not an owner record and did not change for " +
         std::to_string(
             std::chrono::duration_cast<std::chrono::milliseconds>(unchanged_for).count()) +
         " ms (locks.dir_lease_ms + locks.dir_max_clock_skew_ms = " +
         std::to_string(limit.count()) + ")";
}

bool DirLocks::remove_unknown(std::string_view name, const std::string& file) {
  if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
    return false;
  }
  const std::string dir = lock_dir(name);
  const std::string path = dir + "/" + file;
  if (!unlink_exact(path) && !(errno == EISDIR && ::rmdir(path.c_str()) == 0)) {
    return false;
  }
  ::rmdir(dir.c_str());
  return true;
}

bool DirLocks::remove_stale(std::string_view name, const Entry& e) {
  const std::string dir = lock_dir(name);
  if (!unlink_exact(dir + "/" + e.file)) return false;
  ::rmdir(dir.c_str());
  return true;
}

std::error_code DirLocks::add_intent(std::string_view name, uint64_t nonce, int64_t expiry_ms) {
  const std::string dir = intent_dir(name);
  char file[64];
  std::snprintf(file, sizeof file, "/%016llx.%lld", static_cast<unsigned long long>(nonce),
                static_cast<long long>(expiry_ms));
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_code(errno);
    if (::symlink("w", (dir + file).c_str()) == 0 || errno == EEXIST) return {};
    if (errno != ENOENT) return errno_code(errno);  // ENOENT: a reader removed it empty
  }
  return {};  // intent is for fairness only: a writer that cannot post it still waits
}

void DirLocks::remove_intent(std::string_view name, uint64_t nonce, int64_t expiry_ms) {
  const std::string dir = intent_dir(name);
  char file[64];
  std::snprintf(file, sizeof file, "/%016llx.%lld", static_cast<unsigned long long>(nonce),
                static_cast<long long>(expiry_ms));
  ::unlink((dir + file).c_str());
  ::rmdir(dir.c_str());
}

bool DirLocks::writer_waiting(std::string_view name) {
  const std::string dir = intent_dir(name);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return false;  // the common case: one lstat
  const int64_t now = wall_ms();
  bool waiting = false;
  for (const std::string& n : names_in(dir)) {
    int64_t expiry = 0;
    const size_t dot = n.find('.');
    if (dot == std::string::npos || !parse_number(std::string_view(n).substr(dot + 1), expiry)) {
      continue;
    }
    if (expiry < now) {
      ::unlink((dir + "/" + n).c_str());  // a writer that stopped waiting without saying so
    } else {
      waiting = true;
    }
  }
  if (!waiting) ::rmdir(dir.c_str());  // empty: gone; a writer adding meanwhile makes it again
  return waiting;
}

std::string domain_id(const std::string& root, std::error_code& ec) {
  ec.clear();
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    ec = errno_code(errno);
    return {};
  }
  const std::string path = root + "/.domain";
  std::string id = read_small_file(path);
  while (!id.empty() && id.back() == '\n') id.pop_back();
  if (!id.empty()) return id;
  // First comer: write a fresh id under a private name and link() it into place, which fails
  // if another process got there first (then theirs is read).
  const std::string mine = util::random_hex(16);
  const std::string temp = root + "/.domain." + util::random_hex(8) + ".tmp";
  {
    util::UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    const std::string line = mine + "\n";
    if (!fd || ::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
        ::fsync(fd.get()) != 0) {
      ec = errno_code(errno ? errno : EIO);
      ::unlink(temp.c_str());
      return {};
    }
  }
  const bool linked = ::link(temp.c_str(), path.c_str()) == 0;
  const int err = errno;
  ::unlink(temp.c_str());
  if (linked) return mine;
  if (err != EEXIST) {
    ec = errno_code(err);
    return {};
  }
  id = read_small_file(path);
  while (!id.empty() && id.back() == '\n') id.pop_back();
  if (id.empty()) ec = errno_code(EIO);
  return id;
}

}  // namespace kagi::lock::dirlock
