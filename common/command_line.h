// Command-line parsing for the binaries' mains, with kubectl's exit codes: --help and --version
// print and exit 0, a usage or parse error prints CLI11's message and exits 2 (CLI11's own codes,
// 105 and up, never reach the shell). Header only: the mains link CLI11, the libraries do not.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

namespace syncbus {

// nullopt when the arguments were parsed and the program goes on; else its exit code.
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
}

}  // namespace syncbus
