#pragma once
// The version every tool writes into the files it makes and prints with --version; CMake
// passes the project's version in.

namespace hetrl::core {

inline constexpr const char* kVersion = HETRL_VERSION;

}  // namespace hetrl::core
