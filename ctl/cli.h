// syncbusctl's command line: the command tree (flags, subcommands, -o formats), running the
// chosen command with kubectl's exit codes (0 ok, 1 the operation failed, 2 usage or parse error),
// shell completion (`completion bash|zsh` prints a script that asks `__complete` for candidates,
// Cobra's protocol, which kubectl also uses for plugins), and the `kubectl syncbus` name.
// main.cpp only calls RunCommandLine. Not thread-safe (one per process).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace syncbus::ctl {

// The whole program: parses `argv` (argv[0] names it: `kubectl-syncbus` reads as
// `kubectl syncbus` in help and messages) and runs the command. Returns the exit code.
int RunCommandLine(int argc, char** argv);

// Shell completion of `words` (the arguments after the program name, the last one the word
// being completed, possibly empty): one candidate per line ("candidate\tdescription"), then
// ":<directive>" (4: no file names; 0: the shell may complete file names).
std::string CompletionCandidates(const std::vector<std::string>& words);

// The script `completion SHELL` prints, for the program name `program` (syncbusctl or
// kubectl-syncbus); empty for an unknown shell.
std::string CompletionScript(const std::string& shell, const std::string& program);

}  // namespace syncbus::ctl
