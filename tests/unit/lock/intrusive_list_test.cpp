#include <kagi/lock/detail/intrusive_list.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace kagi::lock::detail {
namespace {

struct OtherTag;

// An item that can be in two lists at once: one per tag.
struct Item : ListNode<Item>, ListNode<Item, OtherTag> {
  explicit Item(int v) : value(v) {}
  int value;
};

template <typename Tag>
std::vector<int> values(const IntrusiveList<Item, Tag>& list) {
  std::vector<int> out;
  for (Item* i = list.front(); i; i = IntrusiveList<Item, Tag>::next(i)) out.push_back(i->value);
  return out;
}

TEST(IntrusiveListTest, KeepsPushOrderAndRemovesFromAnyPlace) {
  Item a(1), b(2), c(3), d(4);
  IntrusiveList<Item> list;
  EXPECT_TRUE(list.empty());
  for (Item* i : {&a, &b, &c, &d}) list.push_back(i);
  EXPECT_EQ(values(list), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(list.size(), 4u);
  list.remove(&b);  // middle
  list.remove(&a);  // front
  list.remove(&d);  // back
  EXPECT_EQ(values(list), (std::vector<int>{3}));
  list.remove(&c);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.front(), nullptr);
  list.push_back(&a);  // removed items can be pushed again
  EXPECT_EQ(values(list), (std::vector<int>{1}));
  list.remove(&a);
}

TEST(IntrusiveListTest, OneItemInTwoListsByTag) {
  Item a(1), b(2);
  IntrusiveList<Item> first;
  IntrusiveList<Item, OtherTag> second;
  first.push_back(&a);
  first.push_back(&b);
  second.push_back(&b);
  second.push_back(&a);
  EXPECT_EQ(values(first), (std::vector<int>{1, 2}));
  EXPECT_EQ(values(second), (std::vector<int>{2, 1}));
  first.remove(&a);
  EXPECT_EQ(values(second), (std::vector<int>{2, 1}));  // untouched
  first.remove(&b);
  second.remove(&a);
  second.remove(&b);
}

}  // namespace
}  // namespace kagi::lock::detail
