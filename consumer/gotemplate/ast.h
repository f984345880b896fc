// Parse trees of Go's text/template/parse: one Node struct tagged by NodeType (the fields a type
// does not use stay empty), Go's Node.String() (error messages quote it), and Tree, a named
// template with the text it was parsed from. A Tree owns its nodes; every node points back to its
// Tree, which must outlive it. Immutable after parsing; safe to share between threads.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace syncbus::consumer::gotemplate {

enum class NodeType {
  kText,
  kAction,
  kBool,
  kChain,
  kCommand,
  kDot,
  kElse,
  kEnd,
  kField,
  kIdentifier,
  kIf,
  kList,
  kNil,
  kNumber,
  kPipe,
  kRange,
  kString,
  kTemplate,
  kVariable,
  kWith,
  kBreak,
  kContinue,
};

struct Tree;

struct Node {
  NodeType type;
  int pos = 0;
  const Tree* tree = nullptr;
  int line = 0;  // Pipe, Action, If/Range/With, Template, Break, Continue, Else

  // kText (text), kIdentifier (ident), kString (text = value, quoted = source),
  // kNumber (text = source), kTemplate (text = name).
  std::string text;
  std::string quoted;
  // kField, kVariable (name then fields), kChain (fields).
  std::vector<std::string> idents;
  bool flag = false;  // kBool value; kPipe IsAssign

  // kNumber: the value under every type that can represent it (Go's ideal constant).
  bool is_int = false, is_uint = false, is_float = false, is_complex = false;
  int64_t int64 = 0;
  uint64_t uint64 = 0;
  double float64 = 0;
  std::complex<double> complex128;

  std::unique_ptr<Node> pipe;       // kAction, kIf/kRange/kWith, kTemplate (may be null)
  std::unique_ptr<Node> list;       // kIf/kRange/kWith
  std::unique_ptr<Node> else_list;  // kIf/kRange/kWith (may be null)
  std::unique_ptr<Node> node;       // kChain: the term
  std::vector<std::unique_ptr<Node>> children;  // kList nodes, kCommand args, kPipe commands
  std::vector<std::unique_ptr<Node>> decl;      // kPipe declared variables

  Node(NodeType t, int p, const Tree* tr) : type(t), pos(p), tree(tr) {}

  std::string String() const;
  void WriteTo(std::string& out) const;
};

// One named template: `name` is what {{template}} looks up; parse_name and text locate errors
// ("template: cdParams:3:14: ...") in the whole text the tree came from.
struct Tree {
  std::string name;
  std::string parse_name;
  std::shared_ptr<const std::string> text;
  std::unique_ptr<Node> root;  // a kList
};

// Go's IsEmptyTree: nothing but space (and comments) at top level.
bool IsEmptyTree(const Node* n);

// Go's Tree.ErrorContext: "name:line:col" (col is a 0-based byte offset in its line) and the
// node's text.
std::string ErrorLocation(const Node& n);

}  // namespace syncbus::consumer::gotemplate
