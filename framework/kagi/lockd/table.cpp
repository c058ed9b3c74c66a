#include <kagi/lockd/table.hpp>

#include <algorithm>

namespace kagi::lockd {
namespace {
constexpr size_t kMaxSpareClaims = 256;
}

void KeyTable::ClaimList::push_back(Claim* c) {
  c->prev = tail;
  c->next = nullptr;
  (tail ? tail->next : head) = c;
  tail = c;
  ++size;
}

void KeyTable::ClaimList::remove(Claim* c) {
  (c->prev ? c->prev->next : head) = c->next;
  (c->next ? c->next->prev : tail) = c->prev;
  c->prev = c->next = nullptr;
  --size;
}

KeyTable::KeyTable(uint64_t first_token) : next_token_(first_token) {}

KeyTable::~KeyTable() {
  for (Claim* c : spare_) delete c;
  for (auto& [name, key] : keys_) {
    for (ClaimList* list : {&key.holders, &key.waiters}) {
      while (Claim* c = list->head) {
        list->remove(c);
        delete c;
      }
    }
  }
}

KeyTable::Claim* KeyTable::new_claim() {
  if (spare_.empty()) return new Claim;
  Claim* c = spare_.back();
  spare_.pop_back();
  *c = Claim();
  return c;
}

void KeyTable::free_claim(Claim* c) {
  if (spare_.size() < kMaxSpareClaims) {
    spare_.push_back(c);
  } else {
    delete c;
  }
}

bool KeyTable::compatible(const Key& key, Mode mode) {
  if (!key.holders.head) return true;
  return mode == Mode::kShared && key.holders.head->mode == Mode::kShared;
}

void KeyTable::grant(Key& key, Claim* c, Clock::time_point now) {
  key.holders.push_back(c);
  c->granted = true;
  c->token = next_token_++;
  c->since = now;
  ++holders_;
}

KeyTable::Claim* KeyTable::request(std::string_view name, Mode mode, Owner& owner,
                                   Clock::time_point now) {
  auto it = keys_.find(name);
  if (it == keys_.end()) {
    it = keys_.try_emplace(std::string(name)).first;
    it->second.name = it->first;
  }
  Key& key = it->second;
  Claim* c = new_claim();
  c->key = &key;
  c->owner = &owner;
  c->mode = mode;
  if (!key.waiters.head && compatible(key, mode)) {
    grant(key, c, now);
  } else {
    c->since = now;
    key.waiters.push_back(c);
    ++waiters_;
  }
  return c;
}

void KeyTable::promote(Key& key, Clock::time_point now) {
  while (Claim* head = key.waiters.head) {
    if (!compatible(key, head->mode)) break;
    key.waiters.remove(head);
    --waiters_;
    grant(key, head, now);
    head->ready = true;
    head->ready_next = nullptr;
    (ready_tail_ ? ready_tail_->ready_next : ready_head_) = head;
    ready_tail_ = head;
  }
}

void KeyTable::release(Claim* c, Clock::time_point now) {
  Key& key = *c->key;
  if (c->granted) {
    key.holders.remove(c);
    --holders_;
  } else {
    key.waiters.remove(c);
    --waiters_;
  }
  if (c->ready) {  // granted by an earlier release but not yet announced: drop the news
    Claim** link = &ready_head_;
    Claim* before = nullptr;
    while (*link != c) {
      before = *link;
      link = &(*link)->ready_next;
    }
    *link = c->ready_next;
    if (ready_tail_ == c) ready_tail_ = before;
  }
  free_claim(c);
  promote(key, now);
  if (!key.holders.head && !key.waiters.head) {
    keys_.erase(keys_.find(key.name));
  }
}

void KeyTable::run_ready() {
  while (Claim* c = ready_head_) {
    ready_head_ = c->ready_next;
    if (!ready_head_) ready_tail_ = nullptr;
    c->ready = false;
    c->ready_next = nullptr;
    c->owner->on_granted(*c);
  }
}

void KeyTable::for_each_key(const std::function<void(const Key&)>& visit) const {
  std::vector<const Key*> sorted;
  sorted.reserve(keys_.size());
  for (const auto& [name, key] : keys_) sorted.push_back(&key);
  std::sort(sorted.begin(), sorted.end(),
            [](const Key* a, const Key* b) { return a->name < b->name; });
  for (const Key* key : sorted) visit(*key);
}

}  // namespace kagi::lockd
