// Test helper: text as one gzip member, as `gzip` writes it (appending several makes a
// multi-member file, as `cat a.gz b.gz` or `gzip -c >> f.gz` do).
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace skippr::testing {

inline std::string GzipMember(const std::string& text) {
  std::string out(compressBound(text.size()) + 64, '\0');
  z_stream stream{};
  deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // 16: gzip framing
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace skippr::testing
