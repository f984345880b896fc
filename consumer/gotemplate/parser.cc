#include "consumer/gotemplate/parser.h"

#include <optional>
#include <set>
#include <string_view>

#include "consumer/gotemplate/go_text.h"
#include "consumer/gotemplate/lexer.h"

namespace syncbus::consumer::gotemplate {
namespace {

using NodePtr = std::unique_ptr<Node>;

bool HasFunction(std::string_view name) {
  static const std::set<std::string_view> kFunctions = {
      "fromCDLabel", "and",    "call",    "html",     "index", "slice", "js", "len", "not", "or",
      "print",       "printf", "println", "urlquery", "eq",    "ge",    "gt", "le",  "lt",  "ne"};
  return kFunctions.count(name) != 0;
}

bool FitsInt64(double f) {
  return f >= -9223372036854775808.0 && f < 9223372036854775808.0;
}
bool FitsUint64(double f) {
  return f >= 0 && f < 18446744073709551616.0;
}

// Go's NumberNode.simplifyComplex.
void SimplifyComplex(Node& n) {
  n.is_float = n.complex128.imag() == 0;
  if (!n.is_float) return;
  n.float64 = n.complex128.real();
  n.is_int =
      FitsInt64(n.float64) && static_cast<double>(static_cast<int64_t>(n.float64)) == n.float64;
  if (n.is_int) n.int64 = static_cast<int64_t>(n.float64);
  n.is_uint =
      FitsUint64(n.float64) && static_cast<double>(static_cast<uint64_t>(n.float64)) == n.float64;
  if (n.is_uint) n.uint64 = static_cast<uint64_t>(n.float64);
}

// fmt.Sscan's float token (scan.go floatToken) from the front of s.
std::string_view FloatToken(std::string_view s) {
  size_t i = 0;
  auto accept = [&](std::string_view set) {
    if (i < s.size() && set.find(s[i]) != std::string_view::npos) {
      ++i;
      return true;
    }
    return false;
  };
  accept("+-");
  std::string_view digits = "0123456789_";
  std::string_view exp = "eEpP";
  if (accept("0") && accept("xX")) {
    digits = "0123456789aAbBcCdDeEfF_";
    exp = "pP";
  }
  while (accept(digits)) {
  }
  if (accept(".")) {
    while (accept(digits)) {
    }
  }
  if (accept(exp)) {
    accept("+-");
    while (accept("0123456789_")) {
    }
  }
  return s.substr(0, i);
}

// strconv.ParseFloat as fmt.Sscan reports it (a *NumError).
std::optional<std::string> ParseFloatForScan(std::string_view token, double* out) {
  bool out_of_range = false;
  if (std::optional<double> f = ParseFloat(token, &out_of_range)) {
    *out = *f;
    return std::nullopt;
  }
  return "strconv.ParseFloat: parsing " + Quote(token) +
         (out_of_range ? ": value out of range" : ": invalid syntax");
}

// fmt.Sscan(text, &complex128) for the "N+Ni" text the lexer calls a complex constant.
std::optional<std::string> ScanComplex(std::string_view text, std::complex<double>* out) {
  std::string_view real = FloatToken(text);
  std::string_view rest = text.substr(real.size());
  if (rest.empty() || (rest[0] != '+' && rest[0] != '-'))
    return "syntax error scanning complex number";
  std::string_view imag = FloatToken(rest);
  if (imag.size() >= rest.size() || rest[imag.size()] != 'i')
    return "syntax error scanning complex number";
  double re = 0;
  double im = 0;
  if (auto err = ParseFloatForScan(real, &re)) return err;
  if (auto err = ParseFloatForScan(imag, &im)) return err;
  *out = {re, im};
  return std::nullopt;
}

struct Shared {
  explicit Shared(std::string_view input) : lexer(input) {}
  Lexer lexer;
  std::map<std::string, std::shared_ptr<Tree>> trees;
  std::shared_ptr<const std::string> text;
  std::string parse_name;
  std::optional<std::string> error;
  int nesting = 0;
};

struct Control {
  int pos = 0;
  int line = 0;
  NodePtr pipe, list, else_list;
};

// Go's parse.Tree during parsing: its own token look-ahead and variables, sharing the lexer
// and the tree set with the trees of the same text.
class TreeParser {
 public:
  TreeParser(Shared& shared, std::string name) : sh_(shared), tree_(std::make_shared<Tree>()) {
    tree_->name = std::move(name);
    tree_->parse_name = sh_.parse_name;
    tree_->text = sh_.text;
  }

  // Go's Tree.parse: the top-level template, with its {{define}}s.
  void ParseTop() {
    tree_->root = NewNode(NodeType::kList, Peek().pos);
    while (!Failed() && Peek().type != ItemType::kEOF) {
      if (Peek().type == ItemType::kLeftDelim) {
        Item delim = Next();
        if (NextNonSpace().type == ItemType::kDefine) {
          TreeParser definition(sh_, "definition");
          definition.ParseDefinition();
          continue;
        }
        Backup2(delim);
      }
      NodePtr n = TextOrAction();
      if (Failed()) return;
      if (n->type == NodeType::kEnd || n->type == NodeType::kElse) {
        Errorf("unexpected " + n->String());
        return;
      }
      tree_->root->children.push_back(std::move(n));
    }
  }

  // Go's Tree.add.
  void Add() {
    if (Failed()) return;
    auto it = sh_.trees.find(tree_->name);
    if (it == sh_.trees.end() || IsEmptyTree(it->second->root.get())) {
      sh_.trees[tree_->name] = tree_;
      return;
    }
    if (!IsEmptyTree(tree_->root.get()))
      Errorf("template: multiple definition of template " + Quote(tree_->name));
  }

 private:
  bool Failed() const { return sh_.error.has_value(); }

  void Errorf(const std::string& message) {
    if (!Failed())
      sh_.error =
          "template: " + sh_.parse_name + ":" + std::to_string(token_[0].line) + ": " + message;
  }

  NodePtr NewNode(NodeType type, int pos) { return std::make_unique<Node>(type, pos, tree_.get()); }

  Item Next() {
    if (peek_count_ > 0) {
      --peek_count_;
    } else {
      token_[0] = sh_.lexer.NextItem();
    }
    return token_[peek_count_];
  }
  void Backup() { ++peek_count_; }
  void Backup2(Item t1) {
    token_[1] = std::move(t1);
    peek_count_ = 2;
  }
  void Backup3(Item t2, Item t1) {
    token_[1] = std::move(t1);
    token_[2] = std::move(t2);
    peek_count_ = 3;
  }
  Item Peek() {
    if (peek_count_ > 0) return token_[peek_count_ - 1];
    peek_count_ = 1;
    token_[0] = sh_.lexer.NextItem();
    return token_[0];
  }
  Item NextNonSpace() {
    Item token;
    do {
      token = Next();
    } while (token.type == ItemType::kSpace);
    return token;
  }
  Item PeekNonSpace() {
    Item token = NextNonSpace();
    Backup();
    return token;
  }

  void Unexpected(const Item& token, const std::string& context) {
    if (token.type == ItemType::kError) {
      std::string extra;
      if (action_line_ != 0 && action_line_ != token.line) {
        extra = " in action started at " + sh_.parse_name + ":" + std::to_string(action_line_);
        std::string_view suffix = " action";
        if (token.val.size() >= suffix.size() &&
            token.val.compare(token.val.size() - suffix.size(), suffix.size(), suffix) == 0) {
          extra = extra.substr(std::string_view(" in action").size());
        }
      }
      Errorf(token.val + extra);
      return;
    }
    Errorf("unexpected " + ItemString(token) + " in " + context);
  }

  Item Expect(ItemType expected, const std::string& context) {
    Item token = NextNonSpace();
    if (token.type != expected) Unexpected(token, context);
    return token;
  }

  Item ExpectOneOf(ItemType expected1, ItemType expected2, const std::string& context) {
    Item token = NextNonSpace();
    if (token.type != expected1 && token.type != expected2) Unexpected(token, context);
    return token;
  }

  bool Enter() {
    if (++sh_.nesting > kMaxParseNesting) {
      Errorf("max nesting depth exceeded (" + std::to_string(kMaxParseNesting) + ")");
      return false;
    }
    return true;
  }
  void Leave() { --sh_.nesting; }

  void ParseDefinition() {
    const std::string context = "define clause";
    Item name = ExpectOneOf(ItemType::kString, ItemType::kRawString, context);
    if (Failed()) return;
    std::optional<std::string> unquoted = Unquote(name.val);
    if (!unquoted) {
      Errorf("invalid syntax");
      return;
    }
    tree_->name = *unquoted;
    Expect(ItemType::kRightDelim, context);
    if (Failed()) return;
    NodePtr end;
    tree_->root = ItemList(&end);
    if (Failed()) return;
    if (end->type != NodeType::kEnd) {
      Errorf("unexpected " + end->String() + " in " + context);
      return;
    }
    Add();
  }

  // itemList: textOrAction* up to {{end}} or {{else}}, returned in *end.
  NodePtr ItemList(NodePtr* end) {
    NodePtr list = NewNode(NodeType::kList, PeekNonSpace().pos);
    while (!Failed() && PeekNonSpace().type != ItemType::kEOF) {
      NodePtr n = TextOrAction();
      if (Failed()) return nullptr;
      if (n->type == NodeType::kEnd || n->type == NodeType::kElse) {
        *end = std::move(n);
        return list;
      }
      list->children.push_back(std::move(n));
    }
    Errorf("unexpected EOF");
    return nullptr;
  }

  NodePtr TextOrAction() {
    Item token = NextNonSpace();
    switch (token.type) {
      case ItemType::kText: {
        NodePtr n = NewNode(NodeType::kText, token.pos);
        n->text = token.val;
        return n;
      }
      case ItemType::kLeftDelim: {
        action_line_ = token.line;
        NodePtr n = Action();
        action_line_ = 0;
        return n;
      }
      default: Unexpected(token, "input"); return nullptr;
    }
  }

  NodePtr Action() {
    Item token = NextNonSpace();
    switch (token.type) {
      case ItemType::kBlock: return BlockControl();
      case ItemType::kBreak: return BreakOrContinue(token, NodeType::kBreak, "{{break}}");
      case ItemType::kContinue: return BreakOrContinue(token, NodeType::kContinue, "{{continue}}");
      case ItemType::kElse: return ElseControl();
      case ItemType::kEnd: {
        Item right = Expect(ItemType::kRightDelim, "end");
        return NewNode(NodeType::kEnd, right.pos);
      }
      case ItemType::kIf: return BranchControl(NodeType::kIf, "if");
      case ItemType::kRange: return BranchControl(NodeType::kRange, "range");
      case ItemType::kTemplate: return TemplateControl();
      case ItemType::kWith: return BranchControl(NodeType::kWith, "with");
      default: break;
    }
    Backup();
    Item start = Peek();
    NodePtr action = NewNode(NodeType::kAction, start.pos);
    action->line = start.line;
    action->pipe = Pipeline("command", ItemType::kRightDelim);
    return Failed() ? nullptr : std::move(action);
  }

  NodePtr BreakOrContinue(const Item& keyword, NodeType type, const std::string& what) {
    Item token = NextNonSpace();
    if (token.type != ItemType::kRightDelim) {
      Unexpected(token, what);
      return nullptr;
    }
    if (range_depth_ == 0) {
      Errorf(what + " outside {{range}}");
      return nullptr;
    }
    NodePtr n = NewNode(type, keyword.pos);
    n->line = keyword.line;
    return n;
  }

  NodePtr NewVariable(int pos, std::string_view ident) {
    NodePtr v = NewNode(NodeType::kVariable, pos);
    size_t start = 0;
    while (true) {
      size_t dot = ident.find('.', start);
      v->idents.emplace_back(ident.substr(start, dot - start));
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    return v;
  }

  NodePtr NewField(int pos, std::string_view ident) {
    NodePtr f = NewNode(NodeType::kField, pos);
    ident.remove_prefix(1);
    size_t start = 0;
    while (true) {
      size_t dot = ident.find('.', start);
      f->idents.emplace_back(ident.substr(start, dot - start));
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    return f;
  }

  NodePtr Pipeline(const std::string& context, ItemType end) {
    Item first = PeekNonSpace();
    NodePtr pipe = NewNode(NodeType::kPipe, first.pos);
    pipe->line = first.line;
    while (true) {  // declarations (Go's "decls:" label)
      Item v = PeekNonSpace();
      if (v.type != ItemType::kVariable) break;
      Next();
      Item after_variable = Peek();
      Item next = PeekNonSpace();
      if (next.type == ItemType::kAssign || next.type == ItemType::kDeclare) {
        pipe->flag = next.type == ItemType::kAssign;
        NextNonSpace();
        pipe->decl.push_back(NewVariable(v.pos, v.val));
        vars_.push_back(v.val);
      } else if (next.type == ItemType::kChar && next.val == ",") {
        NextNonSpace();
        pipe->decl.push_back(NewVariable(v.pos, v.val));
        vars_.push_back(v.val);
        if (context == "range" && pipe->decl.size() < 2) {
          ItemType t = PeekNonSpace().type;
          if (t == ItemType::kVariable || t == ItemType::kRightDelim || t == ItemType::kRightParen)
            continue;
          Errorf("range can only initialize variables");
          return nullptr;
        }
        Errorf("too many declarations in " + context);
        return nullptr;
      } else if (after_variable.type == ItemType::kSpace) {
        Backup3(v, after_variable);
      } else {
        Backup2(v);
      }
      break;
    }
    while (true) {
      Item token = NextNonSpace();
      if (Failed()) return nullptr;
      if (token.type == end) {
        if (pipe->children.empty()) {
          Errorf("missing value for " + context);
          return nullptr;
        }
        for (size_t i = 1; i < pipe->children.size(); ++i) {
          switch (pipe->children[i]->children[0]->type) {
            case NodeType::kBool:
            case NodeType::kDot:
            case NodeType::kNil:
            case NodeType::kNumber:
            case NodeType::kString:
              Errorf("non executable command in pipeline stage " + std::to_string(i + 1));
              return nullptr;
            default: break;
          }
        }
        return pipe;
      }
      switch (token.type) {
        case ItemType::kBool:
        case ItemType::kCharConstant:
        case ItemType::kComplex:
        case ItemType::kDot:
        case ItemType::kField:
        case ItemType::kIdentifier:
        case ItemType::kNumber:
        case ItemType::kNil:
        case ItemType::kRawString:
        case ItemType::kString:
        case ItemType::kVariable:
        case ItemType::kLeftParen: {
          Backup();
          NodePtr cmd = Command();
          if (Failed()) return nullptr;
          pipe->children.push_back(std::move(cmd));
          break;
        }
        default: Unexpected(token, context); return nullptr;
      }
    }
  }

  Control ParseControl(const std::string& context) {
    Control c;
    if (!Enter()) return c;
    size_t vars = vars_.size();
    c.pipe = Pipeline(context, ItemType::kRightDelim);
    if (Failed()) return c;
    if (context == "range") ++range_depth_;
    NodePtr next;
    c.list = ItemList(&next);
    if (context == "range") --range_depth_;
    if (Failed()) return c;
    if (next->type == NodeType::kElse) {
      if (context == "if" && Peek().type == ItemType::kIf) {
        Next();
        c.else_list = NewNode(NodeType::kList, next->pos);
        NodePtr nested = BranchControl(NodeType::kIf, "if");
        if (Failed()) return c;
        c.else_list->children.push_back(std::move(nested));
      } else if (context == "with" && Peek().type == ItemType::kWith) {
        Next();
        c.else_list = NewNode(NodeType::kList, next->pos);
        NodePtr nested = BranchControl(NodeType::kWith, "with");
        if (Failed()) return c;
        c.else_list->children.push_back(std::move(nested));
      } else {
        NodePtr end;
        c.else_list = ItemList(&end);
        if (Failed()) return c;
        if (end->type != NodeType::kEnd) {
          Errorf("expected end; found " + end->String());
          return c;
        }
      }
    }
    c.pos = c.pipe->pos;
    c.line = c.pipe->line;
    vars_.resize(vars);
    Leave();
    return c;
  }

  NodePtr BranchControl(NodeType type, const std::string& context) {
    Control c = ParseControl(context);
    if (Failed()) return nullptr;
    NodePtr n = NewNode(type, c.pos);
    n->line = c.line;
    n->pipe = std::move(c.pipe);
    n->list = std::move(c.list);
    n->else_list = std::move(c.else_list);
    return n;
  }

  NodePtr ElseControl() {
    Item peek = PeekNonSpace();
    if (peek.type == ItemType::kIf || peek.type == ItemType::kWith) {
      NodePtr n = NewNode(NodeType::kElse, peek.pos);
      n->line = peek.line;
      return n;
    }
    Item token = Expect(ItemType::kRightDelim, "else");
    if (Failed()) return nullptr;
    NodePtr n = NewNode(NodeType::kElse, token.pos);
    n->line = token.line;
    return n;
  }

  std::optional<std::string> ParseTemplateName(const Item& token, const std::string& context) {
    if (token.type == ItemType::kString || token.type == ItemType::kRawString) {
      std::optional<std::string> name = Unquote(token.val);
      if (!name) Errorf("invalid syntax");
      return name;
    }
    Unexpected(token, context);
    return std::nullopt;
  }

  NodePtr BlockControl() {
    const std::string context = "block clause";
    Item token = NextNonSpace();
    std::optional<std::string> name = ParseTemplateName(token, context);
    if (Failed()) return nullptr;
    NodePtr pipe = Pipeline(context, ItemType::kRightDelim);
    if (Failed() || !Enter()) return nullptr;
    TreeParser block(sh_, *name);
    NodePtr end;
    block.tree_->root = block.ItemList(&end);
    if (Failed()) return nullptr;
    if (end->type != NodeType::kEnd) {
      Errorf("unexpected " + end->String() + " in " + context);
      return nullptr;
    }
    block.Add();
    Leave();
    NodePtr n = NewNode(NodeType::kTemplate, token.pos);
    n->line = token.line;
    n->text = *name;
    n->pipe = std::move(pipe);
    return n;
  }

  NodePtr TemplateControl() {
    const std::string context = "template clause";
    Item token = NextNonSpace();
    std::optional<std::string> name = ParseTemplateName(token, context);
    if (Failed()) return nullptr;
    NodePtr pipe;
    if (NextNonSpace().type != ItemType::kRightDelim) {
      Backup();
      pipe = Pipeline(context, ItemType::kRightDelim);
      if (Failed()) return nullptr;
    }
    NodePtr n = NewNode(NodeType::kTemplate, token.pos);
    n->line = token.line;
    n->text = *name;
    n->pipe = std::move(pipe);
    return n;
  }

  NodePtr Command() {
    NodePtr cmd = NewNode(NodeType::kCommand, PeekNonSpace().pos);
    while (true) {
      PeekNonSpace();
      NodePtr operand = Operand();
      if (Failed()) return nullptr;
      if (operand) cmd->children.push_back(std::move(operand));
      Item token = Next();
      if (token.type == ItemType::kSpace) continue;
      if (token.type == ItemType::kRightDelim || token.type == ItemType::kRightParen) {
        Backup();
      } else if (token.type != ItemType::kPipe) {
        Unexpected(token, "operand");
        return nullptr;
      }
      break;
    }
    if (cmd->children.empty()) {
      Errorf("empty command");
      return nullptr;
    }
    return cmd;
  }

  NodePtr Operand() {
    NodePtr node = Term();
    if (!node || Failed()) return nullptr;
    if (Peek().type == ItemType::kField) {
      NodePtr chain = NewNode(NodeType::kChain, Peek().pos);
      while (Peek().type == ItemType::kField) chain->idents.push_back(Next().val.substr(1));
      NodeType term = node->type;
      chain->node = std::move(node);
      switch (term) {
        case NodeType::kField: return NewField(chain->pos, chain->String());
        case NodeType::kVariable: return NewVariable(chain->pos, chain->String());
        case NodeType::kBool:
        case NodeType::kString:
        case NodeType::kNumber:
        case NodeType::kNil:
        case NodeType::kDot:
          Errorf("unexpected . after term " + Quote(chain->node->String()));
          return nullptr;
        default: return chain;
      }
    }
    return node;
  }

  NodePtr Term() {
    Item token = NextNonSpace();
    switch (token.type) {
      case ItemType::kIdentifier: {
        if (!HasFunction(token.val)) {
          Errorf("function " + Quote(token.val) + " not defined");
          return nullptr;
        }
        NodePtr n = NewNode(NodeType::kIdentifier, token.pos);
        n->text = token.val;
        return n;
      }
      case ItemType::kDot: return NewNode(NodeType::kDot, token.pos);
      case ItemType::kNil: return NewNode(NodeType::kNil, token.pos);
      case ItemType::kVariable: {
        NodePtr v = NewVariable(token.pos, token.val);
        for (const std::string& name : vars_) {
          if (name == v->idents[0]) return v;
        }
        Errorf("undefined variable " + Quote(v->idents[0]));
        return nullptr;
      }
      case ItemType::kField: return NewField(token.pos, token.val);
      case ItemType::kBool: {
        NodePtr n = NewNode(NodeType::kBool, token.pos);
        n->flag = token.val == "true";
        return n;
      }
      case ItemType::kCharConstant:
      case ItemType::kComplex:
      case ItemType::kNumber: return NewNumber(token);
      case ItemType::kLeftParen: {
        if (!Enter()) return nullptr;
        NodePtr pipe = Pipeline("parenthesized pipeline", ItemType::kRightParen);
        Leave();
        return pipe;
      }
      case ItemType::kString:
      case ItemType::kRawString: {
        std::optional<std::string> s = Unquote(token.val);
        if (!s) {
          Errorf("invalid syntax");
          return nullptr;
        }
        NodePtr n = NewNode(NodeType::kString, token.pos);
        n->quoted = token.val;
        n->text = std::move(*s);
        return n;
      }
      default: Backup(); return nullptr;
    }
  }

  // Go's newNumber: the constant under every type that can represent it.
  NodePtr NewNumber(const Item& token) {
    const std::string& text = token.val;
    NodePtr n = NewNode(NodeType::kNumber, token.pos);
    n->text = text;
    if (token.type == ItemType::kCharConstant) {
      UnquotedChar c = UnquoteChar(std::string_view(text).substr(1), '\'');
      if (!c.ok) {
        Errorf("invalid syntax");
        return nullptr;
      }
      if (c.tail != "'") {
        Errorf("malformed character constant: " + text);
        return nullptr;
      }
      n->int64 = c.value;
      n->is_int = true;
      n->uint64 = c.value;
      n->is_uint = true;
      n->float64 = c.value;
      n->is_float = true;
      return n;
    }
    if (token.type == ItemType::kComplex) {
      if (std::optional<std::string> err = ScanComplex(text, &n->complex128)) {
        Errorf(*err);
        return nullptr;
      }
      n->is_complex = true;
      SimplifyComplex(*n);
      return n;
    }
    if (!text.empty() && text.back() == 'i') {
      if (std::optional<double> f = ParseFloat(std::string_view(text).substr(0, text.size() - 1))) {
        n->is_complex = true;
        n->complex128 = {0, *f};
        SimplifyComplex(*n);
        return n;
      }
    }
    std::optional<uint64_t> u = ParseUint(text);
    if (u) {
      n->is_uint = true;
      n->uint64 = *u;
    }
    if (std::optional<int64_t> i = ParseInt(text)) {
      n->is_int = true;
      n->int64 = *i;
      if (*i == 0) {
        n->is_uint = true;
        n->uint64 = u.value_or(0);
      }
    }
    if (n->is_int) {
      n->is_float = true;
      n->float64 = static_cast<double>(n->int64);
    } else if (n->is_uint) {
      n->is_float = true;
      n->float64 = static_cast<double>(n->uint64);
    } else if (std::optional<double> f = ParseFloat(text)) {
      if (text.find_first_of(".eEpP") == std::string::npos) {
        Errorf("integer overflow: " + Quote(text));
        return nullptr;
      }
      n->is_float = true;
      n->float64 = *f;
      if (FitsInt64(*f) && static_cast<double>(static_cast<int64_t>(*f)) == *f) {
        n->is_int = true;
        n->int64 = static_cast<int64_t>(*f);
      }
      if (FitsUint64(*f) && static_cast<double>(static_cast<uint64_t>(*f)) == *f) {
        n->is_uint = true;
        n->uint64 = static_cast<uint64_t>(*f);
      }
    }
    if (!n->is_int && !n->is_uint && !n->is_float) {
      Errorf("illegal number syntax: " + Quote(text));
      return nullptr;
    }
    return n;
  }

  Shared& sh_;
  std::shared_ptr<Tree> tree_;
  Item token_[3];
  int peek_count_ = 0;
  std::vector<std::string> vars_{"$"};
  int action_line_ = 0;
  int range_depth_ = 0;
};

}  // namespace

Result<TreeSet> Parse(const std::string& name, std::shared_ptr<const std::string> text) {
  Shared shared(*text);
  shared.text = std::move(text);
  shared.parse_name = name;
  TreeParser main(shared, name);
  main.ParseTop();
  main.Add();
  if (shared.error) return InvalidArgument(*shared.error);
  TreeSet trees;
  for (auto& [tree_name, tree] : shared.trees) trees.emplace(tree_name, std::move(tree));
  return trees;
}

}  // namespace syncbus::consumer::gotemplate
