// util/thread_annotations.hpp — clang's thread-safety attributes under kagi names.
//
// `int hits_ KAGI_GUARDED_BY(mu_);` turns "guarded by mu_" from a comment into a check: a clang
// build with -Wthread-safety (scripts/test's tsan stage, with -Werror) refuses code that
// touches the field without holding the mutex. Other compilers see nothing. The lockable
// types to annotate against are in util/mutex.hpp (libstdc++'s std::mutex carries no
// attributes, so the checker cannot see it).
#pragma once

#if defined(__clang__)
#define KAGI_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KAGI_THREAD_ANNOTATION(x)
#endif

// On a type: objects of it are locks (capabilities) the checker tracks.
#define KAGI_CAPABILITY(name) KAGI_THREAD_ANNOTATION(capability(name))
// On an RAII type whose constructor acquires and destructor releases.
#define KAGI_SCOPED_CAPABILITY KAGI_THREAD_ANNOTATION(scoped_lockable)

// On a field: reads and writes need the lock (shared for reads, exclusive for writes).
#define KAGI_GUARDED_BY(x) KAGI_THREAD_ANNOTATION(guarded_by(x))
// On a pointer field: what it points to needs the lock.
#define KAGI_PT_GUARDED_BY(x) KAGI_THREAD_ANNOTATION(pt_guarded_by(x))
// On a lock field: it is always taken after (before) the named ones.
#define KAGI_ACQUIRED_AFTER(...) KAGI_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define KAGI_ACQUIRED_BEFORE(...) KAGI_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))

// On a function: the caller must hold (or must not hold) the lock.
#define KAGI_REQUIRES(...) KAGI_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define KAGI_REQUIRES_SHARED(...) KAGI_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define KAGI_EXCLUDES(...) KAGI_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// On a function: it takes or drops the lock (no argument: `this`).
#define KAGI_ACQUIRE(...) KAGI_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define KAGI_ACQUIRE_SHARED(...) KAGI_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define KAGI_RELEASE(...) KAGI_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define KAGI_RELEASE_SHARED(...) KAGI_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define KAGI_RELEASE_GENERIC(...) KAGI_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define KAGI_TRY_ACQUIRE(...) KAGI_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define KAGI_TRY_ACQUIRE_SHARED(...) \
  KAGI_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#define KAGI_ASSERT_CAPABILITY(x) KAGI_THREAD_ANNOTATION(assert_capability(x))
#define KAGI_RETURN_CAPABILITY(x) KAGI_THREAD_ANNOTATION(lock_returned(x))

// The escape hatch, for code the checker cannot follow (say why beside each use).
#define KAGI_NO_THREAD_SAFETY_ANALYSIS KAGI_THREAD_ANNOTATION(no_thread_safety_analysis)
