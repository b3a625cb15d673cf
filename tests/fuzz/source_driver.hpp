// Drives the File source as `skipprd sync` does — open, read every batch, shape the records into
// columns, encode them as the WAL would — and checks what the source promises on any input:
//   * every record and deadletter of a file has its own row number, together exactly 1..N where N
//     is the position's records_consumed, and the file ends closed;
//   * line numbers never go backwards;
//   * resuming from the position after the first batch reads exactly the rest (exactly once);
//   * the shaper's batches validate and come back unchanged through a WAL segment.
// An error Status from the source is allowed (a damaged gzip stream, an unterminated CSV header)
// but never Internal, and a resumed read must end with the same error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace skippr::fuzz {

struct SourceFuzzOptions {
  std::string file_name;  // the scratch file's name: its extension matters to the File source
  std::string format;     // the File connector's format setting
};

void FuzzFileSource(const SourceFuzzOptions& options, const uint8_t* data, size_t size);

}  // namespace skippr::fuzz
