// lock/detail/intrusive_list.hpp — a doubly linked list threaded through its elements.
//
// The lock table keeps its waiters (stack objects of the waiting threads) and its idle
// entries in lists that must never allocate: an element carries its own links by deriving
// from ListNode<T, Tag>, one base per list it can be in (the Tag tells them apart). The list
// owns nothing: it only links and unlinks. An element is in at most one list per Tag at a
// time, and must be removed before it is destroyed. Not thread-safe: the owner's mutex guards
// the list together with its elements' links.
#pragma once

#include <cstddef>

namespace kagi::lock::detail {

template <typename T, typename Tag = void>
struct ListNode {
  T* list_prev = nullptr;
  T* list_next = nullptr;
};

template <typename T, typename Tag = void>
class IntrusiveList {
 public:
  IntrusiveList() = default;
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  bool empty() const { return head_ == nullptr; }
  size_t size() const { return size_; }
  // The oldest element pushed (null if empty).
  T* front() const { return head_; }
  // The element after `item` (null at the end).
  static T* next(const T* item) { return node(item)->list_next; }

  void push_back(T* item) {
    Node* n = node(item);
    n->list_prev = tail_;
    n->list_next = nullptr;
    (tail_ ? node(tail_)->list_next : head_) = item;
    tail_ = item;
    ++size_;
  }
  // `item` must be in this list.
  void remove(T* item) {
    Node* n = node(item);
    (n->list_prev ? node(n->list_prev)->list_next : head_) = n->list_next;
    (n->list_next ? node(n->list_next)->list_prev : tail_) = n->list_prev;
    n->list_prev = n->list_next = nullptr;
    --size_;
  }

 private:
  using Node = ListNode<T, Tag>;
  static Node* node(T* item) { return static_cast<Node*>(item); }
  static const Node* node(const T* item) { return static_cast<const Node*>(item); }

  T* head_ = nullptr;
  T* tail_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kagi::lock::detail
