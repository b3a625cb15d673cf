// Secrets never leave the process in clear: every message that does — printed on stderr, logged,
// written to the store (a run's error), or sent as a --output json event — goes through Redact().
// The registry is process-wide: the config loader teaches it each secret setting's resolved value
// (passwords, tokens, connection strings, catalog_uri), and two shapes are masked whether learned
// or not: the password of a URI's userinfo (`postgresql://user:***@host/db`) and `password=...` in
// a key=value connection string.
#pragma once

#include <string>
#include <string_view>

namespace skippr {

inline constexpr std::string_view kRedacted = "***";

// Values shorter than this are not learned: masking every "ab" would garble every message, and
// such a secret is guessable anyway. URI and key=value passwords are masked at any length.
inline constexpr size_t kMinSecretBytes = 4;

// Learns a secret value (thread-safe; duplicates are ignored). A value holding a URI password or a
// `password=` entry teaches that password on its own too, so a message quoting only it is masked.
void RegisterSecret(std::string_view value);

// `text` with every learned secret, URI userinfo password and `password=` value replaced by ***.
std::string Redact(std::string_view text);

// Replaces the C `stderr` stream by one that redacts each line before it reaches file descriptor
// 2 (line-buffered, so a line is redacted whole). For the binary's main(): everything printed
// with fmt::print(stderr, ...), fprintf(stderr, ...) or a logger created afterwards goes through
// it. Idempotent.
void RedactStandardError();

// Forgets every learned secret (tests).
void ForgetSecretsForTesting();

}  // namespace skippr
