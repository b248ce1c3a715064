// tests/io/test_input.cpp: the guards every reader of an outside file uses (fbt/detail/input.hpp).
//
// excerpt() bounds a quoted value and escapes every byte that is not printable UTF-8 (control
// characters, stray continuation bytes, overlong forms, surrogates, a character cut by the bound) as
// \xNN, keeping well-formed UTF-8 text as it is.
#include <gtest/gtest.h>

#include <fbt/detail/input.hpp>

#include <string>

namespace test_io_input {

TEST(Input, ExcerptKeepsPrintableUtf8AndEscapesTheRest) {
  using fbt::detail::excerpt;
  EXPECT_EQ(excerpt("plain text"), "plain text");
  EXPECT_EQ(excerpt("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");  // 2-, 3- and 4-byte characters
  EXPECT_EQ(excerpt("a\nb\tc\x7f"), "a\\x0ab\\x09c\\x7f");                                       // control characters
  EXPECT_EQ(excerpt("x\xff\xfey"), "x\\xff\\xfey");                                               // never valid in UTF-8
  EXPECT_EQ(excerpt("\x80z"), "\\x80z");                                                         // a stray continuation byte
  EXPECT_EQ(excerpt("\xc0\xaf"), "\\xc0\\xaf");                                                  // an overlong '/'
  EXPECT_EQ(excerpt("\xed\xa0\x80"), "\\xed\\xa0\\x80");                                          // a surrogate
  EXPECT_EQ(excerpt("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");                                  // over U+10FFFF
  EXPECT_EQ(excerpt("\xc2\x85"), "\\xc2\\x85");                                                  // a C1 control (NEL)
  EXPECT_EQ(excerpt("\xe2\x82"), "\\xe2\\x82");                                                  // a truncated character
  // the bound counts bytes of the output, a character or an escape kept whole, then the length is given
  EXPECT_EQ(excerpt("ab\xc3\xa9", 3), "ab... (4 bytes)");
  EXPECT_EQ(excerpt(std::string(100, 'q'), 4), "qqqq... (100 bytes)");
  // issue 47: control bytes were escaped after the bound (4x its length: a 240-byte bound gave 960 bytes)
  EXPECT_EQ(excerpt(std::string(100, '\x7f'), 12), "\\x7f\\x7f\\x7f... (100 bytes)");
  EXPECT_LE(excerpt(std::string(10000, '\x01'), 240).size(), 240u + 20u);
}

}  // namespace test_io_input
