#include <kagi/store/damage.hpp>

namespace kagi::store {

DamageLog& damage_log() {
  static DamageLog log;
  return log;
}

}  // namespace kagi::store
