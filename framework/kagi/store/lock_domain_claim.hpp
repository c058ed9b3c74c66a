// store/lock_domain_claim.hpp — a data folder remembers which lock domain writes it, and
// refuses a process that locks in another one.
//
// Locks only keep apart processes that lock in the same domain (lock/lock_domain.hpp). Two web
// hosts on the `local` backend sharing a data.dir over NFS, or a host started with another
// locks.dir, each take "the" lock of a board in a different place and both write: posts are
// lost, silently. So the first process to open a data folder records its domain in
// `.kagi-lock-domain` there, and a process whose domain differs refuses to start, naming both.
#pragma once

#include <string>

#include <kagi/store/status.hpp>

namespace kagi::store {

// Records `domain` in `data_dir`/.kagi-lock-domain if nothing is recorded yet (atomically: of
// two processes claiming a fresh folder at once, exactly one wins and the other is compared
// against it). Ok if the recorded domain is `domain`. Otherwise Errc::kForeignLockDomain with
// a message naming both and what to do, unless `adopt` (conf data.adopt_lock_domain: a
// deliberate move, every other writer stopped), which records `domain` instead.
Status claim_lock_domain(const std::string& data_dir, const std::string& domain, bool adopt);

// Why a process locking in `domain` refuses `data` (e.g. "data.dir 'var/data'") recorded for
// `recorded`, and what to do. Data on PostgreSQL records its domain in kagi_lock_domain
// (PgDataStore::open) and refuses with the same words.
std::string foreign_lock_domain(const std::string& data, const std::string& recorded,
                                const std::string& domain);

}  // namespace kagi::store
