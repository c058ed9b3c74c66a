// lock/lock_domain.hpp — which lock domain a process's locks live in, as one line of text.
//
// Two processes exclude each other only if they lock in the same domain: the same host's
// kernel and locks.dir for `local`, the same PostgreSQL database for `postgres`, the same
// kagi-lockd server for `lockd`. A data folder
// written under two domains (two web hosts on `local` sharing an NFS data.dir, or one host
// pointed at another locks.dir) loses updates silently; the store records the domain that
// writes a data folder and refuses another (store/lock_domain_claim.hpp).
#pragma once

#include <string>

#include <kagi/lock/options.hpp>

namespace kagi::lock {

// "local host=<hostname> dir=<canonical locks.dir>", "dir id=<id stored in the shared
// locks.dir>" (every host mounting the folder is one domain; throws std::system_error if the
// id cannot be read or made) or
// "postgres host=<host> port=<port> dbname=<dbname>" (from the DSN, with the libpq defaults
// for what it leaves out; no user or password: roles of one database share its locks), or
// "lockd address=<address>" ("lockd host=<hostname> address=..." for a loopback or unix
// address, which is a different server on every host).
std::string lock_domain(const LockOptions& options);

}  // namespace kagi::lock
