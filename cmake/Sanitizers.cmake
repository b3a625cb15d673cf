# Sanitizer and fuzzing builds (docs/ARCHITECTURE.md, "Tests"). Each lives in its own build
# directory, configured by the Makefile (`make sanitize`, `make tsan`, `make fuzz`) with clang:
#   SKIPPR_SANITIZE=address,undefined  ASan + UBSan over every target (UB aborts: no recovery)
#   SKIPPR_SANITIZE=thread             TSan over every target
#   SKIPPR_FUZZ=ON                     also the libFuzzer targets under tests/fuzz/, in the same
#                                      build as the ASan tests; the code the fuzzers feed (and only
#                                      that: skippr_fuzz_coverage) is compiled with coverage
# A sanitizer replaces malloc, so these builds link no jemalloc (SKIPPR_JEMALLOC=OFF).
set(SKIPPR_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined | thread | empty")
option(SKIPPR_FUZZ "Build the libFuzzer targets under tests/fuzz (clang, with SKIPPR_SANITIZE)" OFF)

if(SKIPPR_SANITIZE OR SKIPPR_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SKIPPR_SANITIZE / SKIPPR_FUZZ need clang (configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang)")
  endif()
  if(SKIPPR_JEMALLOC)
    message(FATAL_ERROR "a sanitizer build must not link jemalloc: add -DSKIPPR_JEMALLOC=OFF")
  endif()
endif()

if(SKIPPR_FUZZ AND NOT SKIPPR_SANITIZE MATCHES "address")
  message(FATAL_ERROR "SKIPPR_FUZZ runs the fuzzers under ASan: add -DSKIPPR_SANITIZE=address,undefined")
endif()

if(SKIPPR_SANITIZE)
  # Frame pointers keep the reports' stacks whole at -O1 and above.
  add_compile_options(-fsanitize=${SKIPPR_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${SKIPPR_SANITIZE})
  # Third-party header libraries are not instrumented (the file says which, and why).
  add_compile_options(-fsanitize-ignorelist=${PROJECT_SOURCE_DIR}/cmake/sanitizer_ignorelist.txt)
  if(SKIPPR_SANITIZE MATCHES "undefined")
    # A report is a failure, not a line in a log nobody reads.
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

# Coverage for libFuzzer (-fsanitize=fuzzer-no-link: edge counters and comparison tracing) on the
# targets whose code the fuzzers feed. Everything else (the CLI, landing, Iceberg, the tests)
# stays without it: it made every object of the ASan build slower to compile and every test
# slower to run, for edges no fuzzer reaches. Without SKIPPR_FUZZ this does nothing.
function(skippr_fuzz_coverage)
  if(SKIPPR_FUZZ)
    foreach(target IN LISTS ARGN)
      target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
    endforeach()
  endif()
endfunction()

# The build type of the sanitizer builds: -O1 (what the sanitizers' authors recommend: fast enough,
# stacks still whole) with line tables only (enough for file:line in reports, a fraction of the
# compile and link time of full debug info). Assertions stay on: NDEBUG is not defined.
# (Plain variables: project() already left empty cache entries for a build type it does not know.)
set(CMAKE_C_FLAGS_SANITIZE "-O1 -gline-tables-only")
set(CMAKE_CXX_FLAGS_SANITIZE "-O1 -gline-tables-only")
