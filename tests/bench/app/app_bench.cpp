// What the demo site's handlers cost in this process, with no front end and no socket
// (TestClient), next to its hello route in the same run: the share of a request that is the
// app's own work, apart from nginx, the FastCGI records and the kernel's sockets.
//
//   BM_Hello        GET /_test/hello: the pipeline alone (parse, route, CSRF, answer)
//   BM_Page         GET /bbs/general/ with 20 posts (the page cache warm)
//   BM_Post         POST /bbs/general/post (data.fsync=never): form, CSRF, lock, read, append
//   BM_Say          POST /chat/lobby/say (data.fsync=never)
//
// Each write is checked: a benchmark whose answers are not 303/200 fails.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <string>

#include <kagi/app/app.hpp>
#include <kagi/app/test_client.hpp>
#include "demo/site.hpp"
#include "support/scratch_main.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path& scratch() { return kagi::bench::scratch_dir("kagi-app-bench"); }

struct Site {
  std::unique_ptr<kagi::App> app;
  std::unique_ptr<kagi::TestClient> browser;

  Site() {
    const auto modules = kagi::apps::demo_modules();
    app = std::make_unique<kagi::App>(kagi::Config::load(
        kagi::schema_for(modules), std::nullopt,
        {"templates.dir=" + std::string(KAGI_SOURCE_DIR) + "/templates",
         "locks.dir=" + (scratch() / "locks").string(), "data.dir=" + (scratch() / "data").string(),
         "data.fsync=never", "log.access=false", "test.routes=true", "bbs.flood_interval_s=0",
         "chat.say_per_minute=0"}));
    for (const auto& m : modules) m.mount(*app);
    browser = std::make_unique<kagi::TestClient>(*app);
  }
};

Site& site() {
  static Site s;
  return s;
}

void run_get(benchmark::State& state, const std::string& target) {
  auto& browser = *site().browser;
  for (auto _ : state) {
    const int status = browser.get(target).status;
    if (status != 200) {
      state.SkipWithError(("GET " + target + ": " + std::to_string(status)).c_str());
      break;
    }
  }
}

void run_post(benchmark::State& state, const std::string& target, const char* field, int ok) {
  auto& browser = *site().browser;
  static int64_t n = 0;  // across the runs Google Benchmark makes of one benchmark
  for (auto _ : state) {
    // Distinct texts: the board refuses the same message twice in a row.
    const int status =
        browser.post_form(target, {{field, "a post of some length, number " + std::to_string(++n)}})
            .status;
    if (status != ok) {
      state.SkipWithError(("POST " + target + ": " + std::to_string(status)).c_str());
      break;
    }
  }
}

void BM_Hello(benchmark::State& state) { run_get(state, "/_test/hello"); }
void BM_Page(benchmark::State& state) {
  // A page of 20 posts: seeded once (the post benchmarks add more to the same board).
  static const bool seeded = [] {
    for (int i = 0; i < 20; ++i) {
      if (site()
              .browser->post_form("/bbs/general/post", {{"body", "seed " + std::to_string(i)}})
              .status != 303) {
        return false;
      }
    }
    return true;
  }();
  if (!seeded) {
    state.SkipWithError("seeding /bbs/general/ failed");
    return;
  }
  run_get(state, "/bbs/general/");
}
void BM_Post(benchmark::State& state) { run_post(state, "/bbs/general/post", "body", 303); }
void BM_Say(benchmark::State& state) { run_post(state, "/chat/lobby/say", "text", 200); }

BENCHMARK(BM_Hello);
BENCHMARK(BM_Page);
BENCHMARK(BM_Post);
BENCHMARK(BM_Say);

}  // namespace

int main(int argc, char** argv) { return kagi::bench::run_in_scratch(argc, argv); }
