// The object the test code's precompiled header (support/precompiled.hpp) is built with.
