// store/data_store.hpp — the guarded storage API apps use (ctx.data), whatever keeps the data.
//
// Two implementations: DataDir (data.backend = "files": crash-safe files under data.dir, see
// data_dir.hpp) and PgDataStore (data.backend = "postgres": rows in PostgreSQL, shared by
// every web host, see pg_data_store.hpp). Apps do not know which one runs; the rules are the
// same for both:
//
//   - every call names the lock that protects the data: reading takes any lock::Guard,
//     writing (commit, remove, append, rewrite_log) a lock::ExclusiveGuard, so nobody can
//     read before locking and a shared holder cannot write;
//   - a write is fenced: it is applied only while the guard still holds its lock, else it
//     fails with the lock layer's error (kFenceLost, kRevoked) and nothing changes;
//   - a write that returned ok survives a process crash (and a power loss with data.fsync on);
//     on any error the old content is intact (PgDataStore: see its note on a connection lost
//     during the commit);
//   - errors are values (Status / Result) with a message naming the operation and the path;
//     the same Errc values from both (kUnsafePath, kNotHeld, kTooLarge, kCorrupt, ...);
//   - paths follow store/path.hpp on both backends.
//
// Thread-safe; one instance per process.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <kagi/lock/guard.hpp>
#include <kagi/store/log_cursor.hpp>
#include <kagi/store/status.hpp>
#include <kagi/store/store_stats.hpp>

namespace kagi::store {

// News from a DataStore::watch(): something below the watched folder changed, in this
// process or another (on another host with PostgreSQL). Poll fd() for readability, then
// call drain().
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  // Readable when there is news. Read it again before each poll: it may change in drain()
  // (the postgres feed reconnects) and is -1 while the feed has no connection.
  virtual int fd() const = 0;
  // Adds the paths (relative to the store, below the watched folder) that changed since the
  // last call to `changed`. Returns false when news may have been missed (a queue overflow, a
  // lost connection): the caller must then re-read everything it watches. Call it now and
  // then even when fd() is not readable: that is when a lost connection is reopened.
  virtual bool drain(std::vector<std::string>& changed) = 0;

  // While nobody waits for news, a feed may stop collecting it (files: the inotify watch is
  // dropped, so appends cost nothing extra). resume() starts again (false: it could not; news
  // is then missed until a later resume() works). Both are thread-safe; the defaults do
  // nothing: such a feed always collects.
  virtual bool resume() { return true; }
  virtual void pause() {}
  virtual bool active() const { return true; }
};

class DataStore {
 public:
  virtual ~DataStore() = default;

  // --- whole files ---------------------------------------------------------------------

  // The file's bytes. A missing file reads as empty (a first commit creates it): use exists()
  // to tell them apart.
  virtual Result<std::string> read(const lock::Guard& guard, std::string_view path) const = 0;
  // Whether a file or a log is stored at `path`.
  virtual Result<bool> exists(const lock::Guard& guard, std::string_view path) const = 0;
  // Atomically replaces the file's content with `bytes`, creating it if needed.
  virtual Status commit(const lock::ExclusiveGuard& guard, std::string_view path,
                        std::string_view bytes) = 0;
  // Removes the file or log at `path`. Removing a missing one is not an error.
  virtual Status remove(const lock::ExclusiveGuard& guard, std::string_view path) = 0;

  // --- append-only logs ------------------------------------------------------------------

  // Appends one record (any bytes, up to kMaxRecord) to the log, creating it if needed.
  virtual Status append(const lock::ExclusiveGuard& guard, std::string_view path,
                        std::string_view record) = 0;
  // Atomically replaces the whole log with `records` (compaction, deletions).
  virtual Status rewrite_log(const lock::ExclusiveGuard& guard, std::string_view path,
                             const std::vector<std::string>& records) = 0;
  // The log's records, oldest first; at most the last `last_n`. A missing log has none.
  virtual Result<std::vector<std::string>> read_log(
      const lock::Guard& guard, std::string_view path,
      size_t last_n = std::numeric_limits<size_t>::max()) const = 0;
  // The records appended since `cursor` (a default cursor: the whole log), and the cursor
  // moved past them. When the log was replaced, shrank or vanished since, the whole log comes
  // back with `restarted` set (as on the first read, with a default cursor). On error the
  // cursor is unchanged.
  virtual Result<LogTail> read_log_since(const lock::Guard& guard, std::string_view path,
                                         LogCursor& cursor) const = 0;

  // --- change notices --------------------------------------------------------------------

  // A feed of changes to logs and files below `folder` (a path, or "" for everything), made
  // by any process sharing the data. Null with `ec` set if the backend cannot watch.
  virtual std::unique_ptr<ChangeFeed> watch(std::string_view folder, std::error_code& ec) const = 0;

  // --- about -----------------------------------------------------------------------------

  // "files" or "postgres" (conf data.backend).
  virtual std::string_view backend() const = 0;
  // data.fsync: whether a write returns only once it is durable.
  virtual bool fsync_enabled() const = 0;
  // How many times a path was touched under a different lock than before (each is logged).
  virtual uint64_t lock_mismatches() const = 0;
  // What this store did to make records durable (store_stats.hpp): group commit's rounds and
  // the journal's replay for data.dir; none elsewhere (PostgreSQL makes its own commits).
  virtual StoreStats store_stats() const { return {}; }
  // Waits until every answer held for a group flush (store/durable_scope.hpp) has been sent.
  virtual void drain() {}
};

}  // namespace kagi::store
