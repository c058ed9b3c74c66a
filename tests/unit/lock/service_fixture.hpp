// tests/unit/lock/service_fixture.hpp — a LockService on a fresh temporary lock directory.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <kagi/lock/lock_service.hpp>
#include "../support/temp_dir.hpp"

namespace kagi::lock::testing {

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { service_ = make_service(); }

  std::unique_ptr<LockService> make_service(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(2000),
      bool order_fail = false) {
    LockOptions options;
    options.dir = dir_.path() + "/locks";
    options.timeout = timeout;
    options.order_check_fail = order_fail;
    return LockService::create(options);
  }

  std::unique_ptr<LockContext> request(const std::string& id, LockService* service = nullptr) {
    return (service ? service : service_.get())
        ->context(HolderInfo{.request_id = id,
                             .method = "POST",
                             .path = "/test/" + id,
                             .client_address = "192.0.2.1"});
  }

  test_support::TempDir dir_;
  std::unique_ptr<LockService> service_;
};

}  // namespace kagi::lock::testing
