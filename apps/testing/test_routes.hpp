// apps/testing/test_routes.hpp — routes under /_test/ that the integration tests drive.
// Mounted only when conf key test.routes = true; never in production.
//
//   GET      /_test/hello           "hello\n": the framework's own cost (benchmarks)
//   GET      /_test/heap            {"in_use": bytes} from mallinfo2 (leak tests)
//   GET|POST /_test/echo            method, path, query args, form fields, cookie names
//   GET      /_test/sleep?ms=N      sleeps N ms (≤ 60000), then "slept N"
//   GET      /_test/big?bytes=N     an N-byte body (≤ 64 MiB)
//   GET      /_test/hold?name=X&ms=N   holds exclusive lock X for N ms
//   GET      /_test/hold_commit?name=X&ms=N&value=V
//                                   holds X for N ms (a hung handler), then commits V to the
//                                   file X protects: 200 "committed V", or 409 "refused: why"
//                                   (the lock was revoked meanwhile: locks.max_hold_ms)
//   GET      /_test/data?name=X     what the file X protects holds (read under X shared)
#pragma once

#include <kagi/app/app.hpp>
#include <kagi/app/app_module.hpp>

namespace kagi::apps {

void mount_test_routes(App& app);

// The app with its [test] conf keys, for kagi::serve.
AppModule test_routes_module();

}  // namespace kagi::apps
