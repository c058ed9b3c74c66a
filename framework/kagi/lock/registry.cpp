#include <kagi/lock/registry.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <kagi/lock/errors.hpp>

namespace kagi::lock {
namespace {

constexpr uint64_t kMagic = 0x3147455249474b41ull;  // "AKGIREG1"
constexpr size_t kHeaderBytes = 64;
constexpr size_t kSlotBytes = 512;

enum : uint8_t { kFree = 0, kWaiting = 1, kHeld = 2 };

// One record; copied into and out of the slot as 64-bit words.
struct Payload {
  int64_t since_ns;  // word 0: CLOCK_REALTIME
  int64_t thread;    // word 1
  int32_t pid;       // word 2
  uint8_t mode;
  uint8_t state;
  char name[202];
  char request_id[40];
  char method[16];
  char path[152];
  char client[64];
};
static_assert(sizeof(Payload) % 8 == 0, "copied as whole 64-bit words");
constexpr size_t kWords = sizeof(Payload) / 8;

struct Slot {
  std::atomic<uint64_t> seq;  // odd while being written
  std::atomic<uint64_t> words[kWords];
  // Written by other processes (request_revoke): the seq of the record to revoke. Not part of
  // the record, so outside the seqlock.
  std::atomic<uint64_t> revoke;
};
static_assert(sizeof(Slot) <= kSlotBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

struct Header {
  uint64_t magic;
  uint32_t slots;
  int32_t pid;
};

Slot* slot_at(void* map, size_t i) {
  return reinterpret_cast<Slot*>(static_cast<char*>(map) + kHeaderBytes + i * kSlotBytes);
}

// Copies `from` (cut to fit) and its NUL; returns the bytes written.
size_t copy_field(char* to, size_t size, std::string_view from) {
  size_t n = std::min(from.size(), size - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
  return n + 1;
}

// The payload words that carry data (a bit per word).
struct WordSet {
  uint64_t bits = 0;
  constexpr void add(size_t offset, size_t bytes) {
    for (size_t w = offset / 8; w < (offset + bytes + 7) / 8; ++w) bits |= uint64_t{1} << w;
  }
};
static_assert(kWords <= 64, "WordSet has a bit per payload word");

// The words before `name`: time, thread, pid, mode and state (word 2 also holds name's start).
constexpr WordSet kHeadWords = [] {
  WordSet head;
  head.add(0, offsetof(Payload, name));
  return head;
}();

// Writes the payload's words named in `used` under one odd/even sequence step. Release stores
// keep the odd mark ahead of every word (no fences: GCC's TSan lacks them); on x86 these are
// plain moves.
void write_payload(Slot* s, const Payload& p, WordSet used) {
  const uint64_t seq = s->seq.load(std::memory_order_relaxed);
  s->seq.store(seq + 1, std::memory_order_relaxed);
  const char* bytes = reinterpret_cast<const char*>(&p);
  for (uint64_t bits = used.bits; bits != 0; bits &= bits - 1) {
    const size_t i = static_cast<size_t>(std::countr_zero(bits));
    uint64_t word;
    std::memcpy(&word, bytes + i * 8, sizeof word);
    s->words[i].store(word, std::memory_order_release);
  }
  s->seq.store(seq + 2, std::memory_order_release);
}

// The head words of a slot this process owns. Only the owner writes a slot, so it reads its
// own words without the seqlock; the rest of the returned payload is left unset.
Payload read_own_head(const Slot* s) {
  Payload head;
  char* bytes = reinterpret_cast<char*>(&head);
  for (uint64_t bits = kHeadWords.bits; bits != 0; bits &= bits - 1) {
    const size_t i = static_cast<size_t>(std::countr_zero(bits));
    const uint64_t word = s->words[i].load(std::memory_order_relaxed);
    std::memcpy(bytes + i * 8, &word, sizeof word);
  }
  return head;
}

// Copies a consistent record out of a slot; false if it kept changing.
bool read_slot(const Slot* s, Payload& out, uint64_t* seq = nullptr) {
  uint64_t words[kWords];
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = s->seq.load(std::memory_order_acquire);
    if (before & 1) continue;
    // Acquire loads keep the second read of seq after every word.
    for (size_t i = 0; i < kWords; ++i) words[i] = s->words[i].load(std::memory_order_acquire);
    if (s->seq.load(std::memory_order_relaxed) == before) {
      std::memcpy(&out, words, sizeof out);
      if (seq) *seq = before;
      return true;
    }
  }
  return false;
}

std::string field(const char* f, size_t size) { return std::string(f, strnlen(f, size)); }

// gettid() is a system call: ask once per thread.
int64_t this_thread_id() {
  thread_local const int64_t tid = ::gettid();
  return tid;
}

// Opens and maps the registry file at `path` if its owner is alive (lock/live_file.hpp: it
// holds LOCK_EX on it); a dead owner's file is removed.
enum class MapResult { kMapped, kDead, kUnreadable, kMapFailed };
MapResult map_live_file(const std::string& path, bool writable, void*& map, size_t& size) {
  util::UniqueFd fd;
  switch (open_if_alive(path, writable ? O_RDWR : O_RDONLY, fd)) {
    case Liveness::kAlive:
      break;
    case Liveness::kDead:
      return MapResult::kDead;
    case Liveness::kUnreadable:
      return MapResult::kUnreadable;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < kHeaderBytes) {
    return MapResult::kUnreadable;
  }
  size = static_cast<size_t>(st.st_size);
  map =
      ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd.get(), 0);
  return map == MAP_FAILED ? MapResult::kMapFailed : MapResult::kMapped;
}

}  // namespace

std::unique_ptr<Registry> Registry::create(const std::string& dir, size_t slots,
                                           std::error_code& ec) {
  const std::string reg_dir = dir + "/registry";
  // Owner only: the slots name the clients (addresses) and routes of every request.
  if (::mkdir(reg_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    ec = {errno, std::generic_category()};
    return nullptr;
  }
  const size_t size = kHeaderBytes + slots * kSlotBytes;
  void* map = MAP_FAILED;
  // Sized, mapped and given its header before it has its name: no reader sees it half made.
  auto prepare = [&](int fd) {
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return false;
    map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return false;
    auto* header = static_cast<Header*>(map);
    header->slots = static_cast<uint32_t>(slots);
    header->pid = ::getpid();
    header->magic = kMagic;
    return true;
  };
  std::unique_ptr<LiveFile> file = LiveFile::create(reg_dir, ".reg", prepare, ec);
  if (!file) {
    if (map != MAP_FAILED) ::munmap(map, size);
    return nullptr;
  }
  return std::unique_ptr<Registry>(new Registry(std::move(file), map, size, slots));
}

Registry::Registry(std::unique_ptr<LiveFile> file, void* map, size_t map_size, size_t slots)
    : file_(std::move(file)),
      pid_(::getpid()),
      wall_offset_(std::chrono::system_clock::now().time_since_epoch() -
                   Clock::now().time_since_epoch()),
      map_(map),
      map_size_(map_size),
      slots_(slots) {
  in_use_words_ = (slots + 63) / 64;
  in_use_ = std::make_unique<std::atomic<uint64_t>[]>(in_use_words_);
  for (size_t w = 0; w < in_use_words_; ++w) in_use_[w].store(0, std::memory_order_relaxed);
  if (const size_t tail = slots % 64; tail != 0) {
    in_use_[in_use_words_ - 1].store(~uint64_t{0} << tail, std::memory_order_relaxed);
  }
}

Registry::~Registry() { ::munmap(map_, map_size_); }  // then file_ removes the file

const std::string& Registry::path() const { return file_->path(); }

int64_t Registry::to_realtime_ns(Clock::time_point t) const {
  return (std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()) + wall_offset_)
      .count();
}

int Registry::publish(const HolderInfo& who, std::string_view name, Mode mode,
                      Clock::time_point since, State state) noexcept {
  const int slot = take_slot();
  if (slot < 0) return -1;
  Payload p{};
  p.since_ns = to_realtime_ns(since);
  p.thread = this_thread_id();
  p.pid = pid_;
  p.mode = static_cast<uint8_t>(mode);
  p.state = state == State::kHeld ? kHeld : kWaiting;
  // Only the words up to each field's terminating NUL are written: readers stop there, and
  // most names and paths are short, so this stores ~15 of the 62 words.
  WordSet used = kHeadWords;
  used.add(offsetof(Payload, name), copy_field(p.name, sizeof p.name, name));
  used.add(offsetof(Payload, request_id),
           copy_field(p.request_id, sizeof p.request_id, who.request_id));
  used.add(offsetof(Payload, method), copy_field(p.method, sizeof p.method, who.method));
  used.add(offsetof(Payload, path), copy_field(p.path, sizeof p.path, who.path));
  used.add(offsetof(Payload, client), copy_field(p.client, sizeof p.client, who.client_address));
  write_payload(slot_at(map_, static_cast<size_t>(slot)), p, used);
  return slot;
}

void Registry::mark_held(int slot, Clock::time_point since) noexcept {
  if (slot < 0) return;
  Slot* s = slot_at(map_, static_cast<size_t>(slot));
  Payload head = read_own_head(s);
  head.since_ns = to_realtime_ns(since);
  head.state = kHeld;
  write_payload(s, head, kHeadWords);
}

void Registry::clear(int slot) noexcept {
  if (slot < 0) return;
  Slot* s = slot_at(map_, static_cast<size_t>(slot));
  Payload head = read_own_head(s);
  head.state = kFree;
  write_payload(s, head, kHeadWords);
  // Release: the next taker's writes come after ours.
  in_use_[static_cast<size_t>(slot) / 64].fetch_and(~(uint64_t{1} << (slot % 64)),
                                                    std::memory_order_release);
}

int Registry::take_slot() noexcept {
  // Each thread starts where it last found a free slot, so threads rarely race for one word.
  thread_local size_t t_hint = 0;
  size_t w = t_hint < in_use_words_ ? t_hint : 0;  // the hint may come from another registry
  for (size_t n = 0; n < in_use_words_; ++n, w = w + 1 == in_use_words_ ? 0 : w + 1) {
    uint64_t bits = in_use_[w].load(std::memory_order_relaxed);
    while (bits != ~uint64_t{0}) {
      const int bit = std::countr_one(bits);
      // Acquire: the previous holder's writes to the slot come before ours.
      if (in_use_[w].compare_exchange_weak(bits, bits | (uint64_t{1} << bit),
                                           std::memory_order_acquire, std::memory_order_relaxed)) {
        t_hint = w;
        return static_cast<int>(w * 64) + bit;
      }
    }
  }
  overflows_.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

uint64_t Registry::overflows() const { return overflows_.load(std::memory_order_relaxed); }

bool Registry::revoke_requested(int slot) const noexcept {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_) return false;
  const Slot* s = slot_at(map_, static_cast<size_t>(slot));
  // Only this process writes seq, so a plain load sees the current record's number; a fresh
  // slot has seq 0 and revoke 0, which is no request.
  const uint64_t seq = s->seq.load(std::memory_order_relaxed);
  return seq != 0 && s->revoke.load(std::memory_order_acquire) == seq;
}

std::error_code Registry::request_revoke(const std::string& dir, int pid, int slot, uint64_t seq) {
  if (slot < 0 || seq == 0 || (seq & 1) != 0) return {EINVAL, std::generic_category()};
  const std::string reg_dir = dir + "/registry";
  const std::string prefix = std::to_string(pid) + "-";
  for (const std::string& file : live_file_names(reg_dir, ".reg")) {
    if (!file.starts_with(prefix)) continue;
    void* map = nullptr;
    size_t size = 0;
    // A dead process's file, or one that cannot be read: nothing to revoke there.
    const MapResult mapped = map_live_file(reg_dir + "/" + file, true, map, size);
    if (mapped == MapResult::kMapFailed) return {errno, std::generic_category()};
    if (mapped != MapResult::kMapped) continue;
    const auto* header = static_cast<const Header*>(map);
    std::error_code ec = make_error_code(Errc::kReleased);
    if (header->magic != kMagic || header->pid != pid) {
      ec = {ESRCH, std::generic_category()};
    } else if (static_cast<size_t>(slot) >=
               std::min<size_t>(header->slots, (size - kHeaderBytes) / kSlotBytes)) {
      ec = {EINVAL, std::generic_category()};
    } else {
      Slot* s = slot_at(map, static_cast<size_t>(slot));
      if (s->seq.load(std::memory_order_acquire) == seq) {
        s->revoke.store(seq, std::memory_order_release);
        ec = {};
      }
    }
    ::munmap(map, size);
    if (ec != std::errc::no_such_process) return ec;
  }
  return make_error_code(Errc::kReleased);
}

RegistrySnapshot Registry::read(const std::string& dir) {
  RegistrySnapshot snap;
  const std::string reg_dir = dir + "/registry";
  for (const std::string& file : live_file_names(reg_dir, ".reg")) {
    const std::string path = reg_dir + "/" + file;
    void* map = nullptr;
    size_t size = 0;
    const MapResult mapped = map_live_file(path, false, map, size);
    if (mapped == MapResult::kDead) {  // removed by map_live_file
      ++snap.dead_removed;
      continue;
    }
    if (mapped != MapResult::kMapped) continue;
    const auto* header = static_cast<const Header*>(map);
    if (header->magic == kMagic) {
      ++snap.processes;
      const size_t slots = std::min<size_t>(header->slots, (size - kHeaderBytes) / kSlotBytes);
      for (size_t i = 0; i < slots; ++i) {
        Payload p;
        uint64_t seq = 0;
        if (!read_slot(slot_at(map, i), p, &seq) || p.state == kFree) continue;
        RegistryEntry e;
        e.slot = static_cast<int>(i);
        e.seq = seq;
        e.name = field(p.name, sizeof p.name);
        e.mode =
            p.mode == static_cast<uint8_t>(Mode::kExclusive) ? Mode::kExclusive : Mode::kShared;
        e.waiting = p.state == kWaiting;
        e.request_id = field(p.request_id, sizeof p.request_id);
        e.method = field(p.method, sizeof p.method);
        e.path = field(p.path, sizeof p.path);
        e.client_address = field(p.client, sizeof p.client);
        e.pid = p.pid;
        e.thread = static_cast<long>(p.thread);
        e.since = std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::nanoseconds(p.since_ns)));
        snap.entries.push_back(std::move(e));
      }
    }
    ::munmap(map, size);
  }
  return snap;
}

}  // namespace kagi::lock
