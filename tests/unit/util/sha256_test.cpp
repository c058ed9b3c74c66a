#include <kagi/util/sha256.hpp>

#include <gtest/gtest.h>

#include <random>

#include <kagi/util/detail/sha256_blocks.hpp>

namespace kagi::util {
namespace {

// FIPS 180-4 examples (and the NIST long-message vector).
TEST(Sha256, FipsVectors) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(to_hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Padding edges: 55 bytes fit one block with the length, 56..63 need a second one.
TEST(Sha256, BlockBoundaries) {
  EXPECT_EQ(to_hex(sha256(std::string(55, 'a'))),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(to_hex(sha256(std::string(56, 'a'))),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(to_hex(sha256(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

// RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (case 5 is about truncation).
TEST(HmacSha256, Rfc4231Vectors) {
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  EXPECT_EQ(to_hex(hmac_sha256(key4, std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'),
                               "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'),
                               "This is a test using a larger than block-size key and a larger "
                               "than block-size data. The key needs to be hashed before being "
                               "used by the HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// A kept key signs any number of messages, each as a fresh HMAC would (RFC 4231 cases 6 and 7:
// a key hashed first, one short message and one over a block).
TEST(HmacSha256, AKeptKeySignsEachMessageAlike) {
  const HmacSha256 key(std::string(131, '\xaa'));
  const std::string long_message =
      "This is a test using a larger than block-size key and a larger than block-size data. The "
      "key needs to be hashed before being used by the HMAC algorithm.";
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(to_hex(key.sign("Test Using Larger Than Block-Size Key - Hash Key First")),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    EXPECT_EQ(to_hex(key.sign(long_message)),
              "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
  }
}

// The two compression functions agree on any state and block: 10,000 random pairs, and the
// padded block of "abc" from the initial state (FIPS 180-4's first example). The extensions are
// what sha256() uses wherever the processor has them, so the vectors above test them there.
TEST(Sha256, TheShaExtensionsComputeWhatThePortableCodeComputes) {
  if (!detail::sha256_extensions_available()) {
    GTEST_SKIP() << "this processor has no SHA extensions: only the portable code runs here";
  }
  unsigned char abc[64] = {'a', 'b', 'c', 0x80};
  abc[63] = 24;  // the message's length in bits
  detail::Sha256State initial{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  detail::Sha256State portable = initial, extensions = initial;
  detail::sha256_block_portable(portable, abc);
  detail::sha256_block_with_extensions(extensions, abc);
  EXPECT_EQ(portable[0], 0xba7816bfu);
  EXPECT_EQ(extensions, portable);

  std::mt19937 rng(20261129);
  for (int trial = 0; trial < 10000; ++trial) {
    detail::Sha256State state;
    for (auto& word : state) word = static_cast<uint32_t>(rng());
    unsigned char block[64];
    for (auto& byte : block) byte = static_cast<unsigned char>(rng());
    detail::Sha256State a = state, b = state;
    detail::sha256_block_portable(a, block);
    detail::sha256_block_with_extensions(b, block);
    ASSERT_EQ(b, a) << "trial " << trial;
  }
}

// Every message length from 0 to 192 bytes (three blocks: every padding case, and input that
// ends anywhere in a block), checked at once: the SHA-256 of the 193 digests one after another,
// as Python's hashlib computes it.
TEST(Sha256, EveryLengthUpToThreeBlocks) {
  std::string message, digests;
  for (int n = 0; n <= 192; ++n) {
    const Digest d = sha256(message);
    digests.append(reinterpret_cast<const char*>(d.data()), d.size());
    message += static_cast<char>('a' + n % 26);
  }
  EXPECT_EQ(to_hex(sha256(digests)),
            "6d969a9e8706a6a8a94d55294d2f70aba4d592ea35e33e0eb054988685a71114");
}

TEST(Sha256, ToHexTruncates) {
  const Digest d = sha256("abc");
  EXPECT_EQ(to_hex(d, 4), "ba7816bf");
  EXPECT_EQ(to_hex(d, 99).size(), 64u);
}

}  // namespace
}  // namespace kagi::util
