#include "common/base64.h"

#include <doctest/doctest.h>

using namespace syncbus;

TEST_CASE("base64: the default decoding is lenient about padding and whitespace") {
  CHECK(DecodeBase64("QUJD") == "ABC");
  CHECK(DecodeBase64("QQ==") == "A");
  CHECK(DecodeBase64("QQ") == "A");
  CHECK(DecodeBase64("QQ=") == "A");
  CHECK(DecodeBase64(" QU\tJD\r\n") == "ABC");
  CHECK(DecodeBase64("QR==") == std::nullopt);  // unused bits set
  CHECK(DecodeBase64("Q") == std::nullopt);
  CHECK(DecodeBase64("QQ==QQ==") == std::nullopt);
  CHECK(DecodeBase64("QQ*=") == std::nullopt);
}

TEST_CASE("base64: Go's StdEncoding wants whole groups and skips only line breaks") {
  CHECK(DecodeBase64("QUJD\nQQ==", kGoStdBase64) == "ABCA");
  CHECK(DecodeBase64("QR==", kGoStdBase64) == "A");
  CHECK(DecodeBase64("", kGoStdBase64) == "");
  CHECK(DecodeBase64("QQ", kGoStdBase64) == std::nullopt);
  CHECK(DecodeBase64("QQ=", kGoStdBase64) == std::nullopt);
  CHECK(DecodeBase64("QUJD QQ==", kGoStdBase64) == std::nullopt);
}

TEST_CASE("base64: padding, when not loose, completes the last group") {
  Base64Decoding rules{.loose_padding = false};
  CHECK(DecodeBase64("QQ", rules) == "A");
  CHECK(DecodeBase64("QQ==", rules) == "A");
  CHECK(DecodeBase64("QQ=", rules) == std::nullopt);
  CHECK(DecodeBase64("QUJD=", rules) == std::nullopt);
}

TEST_CASE("base64: encoding pads to whole groups") {
  CHECK(EncodeBase64("") == "");
  CHECK(EncodeBase64("A") == "QQ==");
  CHECK(EncodeBase64("AB") == "QUI=");
  CHECK(EncodeBase64("ABC") == "QUJD");
  CHECK(EncodeBase64(std::string("\xff\x00", 2)) == "/wA=");
}
