// Sessions on both stores: created on demand, found by their cookie id only, idle expiry,
// a new id after a privilege change (fixation), names, ends, and the bound on their number.
#include <kagi/offline/session_store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <kagi/util/sha256.hpp>
#include "state_fixture.hpp"

namespace kagi::offline {
namespace {

using namespace std::chrono_literals;

class SessionStoreTest : public StateTest {
 protected:
  std::unique_ptr<SessionStore> sessions(SessionOptions options = {}) {
    return std::make_unique<SessionStore>(open_store(), options);
  }
};

TEST_P(SessionStoreTest, ACreatedSessionLoadsByItsIdOnly) {
  auto s = sessions();
  auto [id, record] = s->create("alice").value();
  EXPECT_TRUE(SessionStore::well_formed(id));
  EXPECT_EQ(record.name, "alice");
  EXPECT_EQ(record.owner.size(), 32u);
  auto loaded = s->load(id).value();
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->owner, record.owner);
  EXPECT_EQ(loaded->name, "alice");
  // Another id, one of the wrong shape, or the stored hash itself load nothing.
  std::string other = id;
  other[0] = other[0] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(s->load(other).value());
  EXPECT_FALSE(s->load("not an id").value());
  EXPECT_FALSE(s->load(id.substr(0, 63)).value());
  EXPECT_FALSE(s->load(util::to_hex(util::sha256(id))).value());
  auto [id2, record2] = s->create("").value();
  EXPECT_NE(id2, id);
  EXPECT_NE(record2.owner, record.owner);
  EXPECT_EQ(s->count().value(), 2);
}

TEST_P(SessionStoreTest, AnIdleSessionIsGone) {
  auto s = sessions({.idle = 1s, .max_sessions = 100, .touch_interval = 0s});
  auto [id, record] = s->create("a").value();
  auto [kept, kept_record] = s->create("b").value();
  for (int i = 0; i < 3; ++i) {  // seen every 0.4 s: stays
    std::this_thread::sleep_for(400ms);
    ASSERT_TRUE(s->load(kept).value()) << i;
  }
  EXPECT_FALSE(s->load(id).value());
  EXPECT_FALSE(s->rotate(id).value());
  EXPECT_EQ(s->sweep().value(), 1);
  EXPECT_EQ(s->count().value(), 1);
}

TEST_P(SessionStoreTest, RotateGivesANewIdAndKeepsTheOwner) {
  auto s = sessions();
  auto [id, record] = s->create("a").value();
  auto fresh = s->rotate(id).value();
  ASSERT_TRUE(fresh);
  EXPECT_NE(*fresh, id);
  EXPECT_FALSE(s->load(id).value());  // the old id stops working at once
  auto loaded = s->load(*fresh).value();
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->owner, record.owner);
  EXPECT_FALSE(s->rotate(id).value());
}

TEST_P(SessionStoreTest, NamesAreOneCleanLine) {
  auto s = sessions();
  auto [id, record] = s->create("a").value();
  ASSERT_TRUE(s->set_name(id, "bob\r\n<b>\x07" + std::string(300, 'y')).ok());
  auto loaded = s->load(id).value();
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->name.substr(0, 6), "bob<b>");
  EXPECT_LE(loaded->name.size(), 128u);
  EXPECT_EQ(s->by_owner(record.owner).value()->name, loaded->name);
}

TEST_P(SessionStoreTest, EndForgetsTheSessionAndNamesItsOwner) {
  auto s = sessions();
  auto [id, record] = s->create("a").value();
  EXPECT_EQ(s->end(id).value(), record.owner);
  EXPECT_FALSE(s->load(id).value());
  EXPECT_EQ(s->end(id).value(), "");
  EXPECT_FALSE(s->by_owner(record.owner).value());
}

TEST_P(SessionStoreTest, AFloodOfNewSessionsEvictsTheLeastRecentlySeen) {
  auto s = sessions({.idle = 3600s, .max_sessions = 3, .touch_interval = 0s});
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(s->create("s" + std::to_string(i)).value().first);
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(s->load(ids[0]).value());  // seen now: the most recent
  std::this_thread::sleep_for(5ms);
  for (int i = 0; i < 20; ++i) {
    ids.push_back(s->create("flood").value().first);
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(s->count().value(), 3);
  EXPECT_FALSE(s->load(ids[1]).value());
  EXPECT_FALSE(s->load(ids[0]).value());  // it, too, gave way to 20 newer ones
  EXPECT_TRUE(s->load(ids.back()).value());
}

INSTANTIATE_TEST_SUITE_P(Stores, SessionStoreTest, ::testing::Values("sqlite", "postgres"),
                         backend_name);

}  // namespace
}  // namespace kagi::offline
