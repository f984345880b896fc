#include "consumer/gotemplate/exec.h"

#include <optional>
#include <vector>

#include "consumer/gotemplate/builtins.h"
#include "consumer/gotemplate/go_fmt.h"
#include "consumer/gotemplate/go_text.h"

namespace syncbus::consumer::gotemplate {
namespace {

using Children = std::vector<std::unique_ptr<Node>>;

#define NOINLINE [[gnu::noinline]]

// Stands for an absent pipeline ({{template "x"}}), which evaluates to nil.
const Node kNoPipe(NodeType::kPipe, 0, nullptr);

// The outcome of walking a node: Go's panics for {{break}}/{{continue}}, or an error.
enum class Flow { kNext, kBreak, kContinue, kError };

// A type a parameter (or the receiver of a chain, kNone) expects.
enum class Want { kReflectValue, kAny, kString, kNone };

Want WantOf(ParamType p) {
  switch (p) {
    case ParamType::kReflectValue: return Want::kReflectValue;
    case ParamType::kAny: return Want::kAny;
    case ParamType::kString: return Want::kString;
  }
  return Want::kAny;
}

bool IsHexInt(std::string_view s) {
  return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
         s.find_first_of("pP") == std::string_view::npos;
}

// reflect.Value.String() of a pipeline value (the callee name Go's call builtin reports).
std::string ReflectString(const Value& v) {
  if (v.is_nil()) return "<invalid Value>";
  if (v.kind == Kind::kString) return v.s;
  return std::string("<") + TypeName(v) + " Value>";
}

class Executor {
 public:
  Executor(const Namespace& templates, const hive::Labels& labels, Budget& budget)
      : templates_(templates), labels_(labels), budget_(budget) {}

  Result<std::string> Run(const Tree& tree) {
    tmpl_ = &tree;
    vars_.push_back({"$", Value::Nil()});
    Flow flow = Walk(Value::Nil(), *tree.root);
    if (flow == Flow::kError) return InvalidArgument(*error_);
    return std::move(out_);
  }

 private:
  struct Variable {
    std::string name;
    Value value;
  };

  void At(const Node& n) { node_ = &n; }

  // Go's state.errorf.
  void Errorf(const std::string& message) {
    if (error_) return;
    error_ = "template: " + ErrorLocation(*node_) + ": executing " + Quote(tmpl_->name) + " at <" +
             node_->String() + ">: " + message;
  }
  bool Failed() const { return error_.has_value(); }

  bool Step() {
    if (++budget_.steps > budget_.max_steps) {
      Errorf("execution took more than " + std::to_string(budget_.max_steps) + " steps");
      return false;
    }
    return true;
  }

  bool Write(std::string_view text) {
    if (out_.size() + text.size() > budget_.max_output_bytes ||
        budget_.total_output_bytes + text.size() > budget_.max_total_output_bytes) {
      Errorf("output longer than " +
             std::to_string(out_.size() + text.size() > budget_.max_output_bytes
                                ? budget_.max_output_bytes
                                : budget_.max_total_output_bytes) +
             " bytes");
      return false;
    }
    out_ += text;
    budget_.total_output_bytes += text.size();
    return true;
  }

  void Push(const std::string& name, Value v) { vars_.push_back({name, std::move(v)}); }
  void Pop(size_t mark) { vars_.resize(mark); }

  void SetVar(const std::string& name, const Value& v) {
    for (size_t i = vars_.size(); i-- > 0;) {
      if (vars_[i].name == name) {
        vars_[i].value = v;
        return;
      }
    }
    Errorf("undefined variable: " + name);
  }

  void SetTopVar(size_t n, const Value& v) { vars_[vars_.size() - n].value = v; }

  std::optional<Value> VarValue(const std::string& name) {
    for (size_t i = vars_.size(); i-- > 0;) {
      if (vars_[i].name == name) return vars_[i].value;
    }
    Errorf("undefined variable: " + name);
    return std::nullopt;
  }

  // Walk and the functions it recurses through keep small frames (the work and the error texts
  // are in NOINLINE helpers) so that kMaxExecNesting levels fit a thread's stack even under
  // AddressSanitizer.
  Flow Walk(const Value& dot, const Node& node) {
    At(node);
    if (!Step()) return Flow::kError;
    if (nesting_ == kMaxExecNesting) return FailNesting();
    ++nesting_;
    Flow flow = Flow::kNext;
    switch (node.type) {
      case NodeType::kAction: flow = WalkAction(dot, node); break;
      case NodeType::kBreak: flow = Flow::kBreak; break;
      case NodeType::kContinue: flow = Flow::kContinue; break;
      case NodeType::kIf:
      case NodeType::kWith: flow = WalkIfOrWith(dot, node); break;
      case NodeType::kList:
        for (const auto& child : node.children) {
          flow = Walk(dot, *child);
          if (flow != Flow::kNext) break;
        }
        break;
      case NodeType::kRange: flow = WalkRange(dot, node); break;
      case NodeType::kTemplate: flow = WalkTemplate(dot, node); break;
      case NodeType::kText: flow = Write(node.text) ? Flow::kNext : Flow::kError; break;
      default: flow = FailUnknownNode(node); break;
    }
    --nesting_;
    return flow;
  }

  NOINLINE Flow FailNesting() {
    Errorf("exceeded maximum nesting depth (" + std::to_string(kMaxExecNesting) + ")");
    return Flow::kError;
  }

  NOINLINE Flow FailUnknownNode(const Node& node) {
    Errorf("unknown node: " + node.String());
    return Flow::kError;
  }

  NOINLINE Flow WalkAction(const Value& dot, const Node& node) {
    std::optional<Value> val = EvalPipeline(dot, node.pipe.get());
    if (!val) return Flow::kError;
    if (node.pipe->decl.empty() && !PrintValue(node, *val)) return Flow::kError;
    return Flow::kNext;
  }

  NOINLINE bool PrintValue(const Node& n, const Value& v) {
    At(n);
    if (v.is_nil()) return Write("<no value>");
    std::optional<std::string> text = Sprint({v}, budget_.max_output_bytes);
    if (!text) {
      Errorf("output longer than " + std::to_string(budget_.max_output_bytes) + " bytes");
      return false;
    }
    return Write(*text);
  }

  NOINLINE Flow WalkIfOrWith(const Value& dot, const Node& node) {
    size_t mark = vars_.size();
    std::unique_ptr<Value> val = EvalCondition(dot, *node.pipe);
    Flow flow = Flow::kNext;
    if (!val) {
      flow = Flow::kError;
    } else if (IsTrue(*val)) {
      flow = Walk(node.type == NodeType::kWith ? *val : dot, *node.list);
    } else if (node.else_list) {
      flow = Walk(dot, *node.else_list);
    }
    Pop(mark);
    return flow;
  }

  // The value of an if/with pipeline, on the heap: it lives while the body walks.
  NOINLINE std::unique_ptr<Value> EvalCondition(const Value& dot, const Node& pipe) {
    std::optional<Value> val = EvalPipeline(dot, &pipe);
    if (!val) return nullptr;
    return std::make_unique<Value>(std::move(*val));
  }

  // One iteration of a range body (Go's oneIteration); index is nil for integers.
  NOINLINE Flow Iterate(const Node& r, const Value& index, const Value& elem, size_t mark) {
    const Node& pipe = *r.pipe;
    if (!pipe.decl.empty()) {
      if (pipe.flag) {
        SetVar(pipe.decl[0]->idents[0], pipe.decl.size() > 1 ? index : elem);
      } else {
        SetTopVar(1, elem);
      }
    }
    if (pipe.decl.size() > 1) {
      if (pipe.flag) {
        SetVar(pipe.decl[1]->idents[0], elem);
      } else {
        SetTopVar(2, index);
      }
    }
    if (Failed()) return Flow::kError;
    Flow flow = Walk(elem, *r.list);
    Pop(mark);
    return flow == Flow::kContinue ? Flow::kNext : flow;
  }

  NOINLINE Flow FailRange(const Value& val, bool two_variables) {
    Errorf(two_variables ? "can't use " + *Sprint({val}) + " to iterate over more than one variable"
                         : "range can't iterate over " + *Sprint({val}));
    return Flow::kError;
  }

  NOINLINE Flow WalkRange(const Value& dot, const Node& r) {
    At(r);
    size_t outer = vars_.size();
    std::optional<Value> val = EvalPipeline(dot, r.pipe.get());
    if (!val) return Flow::kError;
    size_t mark = vars_.size();
    Flow flow = Flow::kNext;
    bool ran = false;
    switch (val->kind) {
      case Kind::kInt:
      case Kind::kUint8:
        if (r.pipe->decl.size() > 1) {
          return FailRange(*val, true);
        }
        for (int64_t i = 0; i < val->i; ++i) {
          ran = true;
          Value elem =
              val->kind == Kind::kInt ? Value::Int(i) : Value::Uint8(static_cast<uint8_t>(i));
          flow = Iterate(r, Value::Nil(), elem, mark);
          if (flow != Flow::kNext) break;
        }
        break;
      case Kind::kNil: break;  // acts like an empty map
      default: return FailRange(*val, false);
    }
    if (flow == Flow::kError) return flow;
    if (!ran && r.else_list) flow = Walk(dot, *r.else_list);
    Pop(outer);
    return flow == Flow::kBreak ? Flow::kNext : flow;  // a {{break}} ends this range only
  }

  NOINLINE Flow WalkTemplate(const Value& dot, const Node& t) {
    At(t);
    auto it = templates_.find(t.text);
    if (it == templates_.end() || depth_ == kMaxTemplateDepth)
      return FailTemplate(t, it == templates_.end());
    std::unique_ptr<Value> new_dot = EvalCondition(dot, t.pipe ? *t.pipe : kNoPipe);
    if (!new_dot) return Flow::kError;
    const Tree* saved_tmpl = tmpl_;
    std::vector<Variable> saved_vars = std::move(vars_);
    vars_.clear();
    vars_.push_back({"$", *new_dot});
    tmpl_ = it->second.get();
    ++depth_;
    Flow flow = Walk(*new_dot, *it->second->root);
    --depth_;
    tmpl_ = saved_tmpl;
    vars_ = std::move(saved_vars);
    return flow;
  }

  NOINLINE Flow FailTemplate(const Node& t, bool undefined) {
    Errorf(undefined
               ? "template " + Quote(t.text) + " not defined"
               : "exceeded maximum template depth (" + std::to_string(kMaxTemplateDepth) + ")");
    return Flow::kError;
  }

  std::optional<Value> EvalPipeline(const Value& dot, const Node* pipe) {
    if (pipe == nullptr || pipe == &kNoPipe) return Value::Nil();
    At(*pipe);
    std::optional<Value> value;
    const Value* final = nullptr;
    for (const auto& cmd : pipe->children) {
      value = EvalCommand(dot, *cmd, final);
      if (!value) return std::nullopt;
      final = &*value;
    }
    for (const auto& v : pipe->decl) {
      if (pipe->flag) {
        SetVar(v->idents[0], *value);
        if (Failed()) return std::nullopt;
      } else {
        Push(v->idents[0], *value);
      }
    }
    return value;
  }

  bool NotAFunction(const Children& args, const Value* final) {
    if (args.size() > 1 || final != nullptr) {
      Errorf("can't give argument to non-function " + args[0]->String());
      return false;
    }
    return true;
  }

  std::optional<Value> EvalCommand(const Value& dot, const Node& cmd, const Value* final) {
    if (!Step()) return std::nullopt;
    const Node& first = *cmd.children[0];
    switch (first.type) {
      case NodeType::kField: return EvalFieldNode(dot, first);
      case NodeType::kChain: return EvalChainNode(dot, first);
      case NodeType::kIdentifier: return EvalFunction(dot, first, cmd, cmd.children, final);
      case NodeType::kPipe:
        if (!NotAFunction(cmd.children, final)) return std::nullopt;
        return EvalPipeline(dot, &first);
      case NodeType::kVariable: return EvalVariableNode(first, cmd.children, final);
      default: break;
    }
    At(first);
    if (!NotAFunction(cmd.children, final)) return std::nullopt;
    switch (first.type) {
      case NodeType::kBool: return Value::Bool(first.flag);
      case NodeType::kDot: return dot;
      case NodeType::kNil: Errorf("nil is not a command"); return std::nullopt;
      case NodeType::kNumber: return IdealConstant(first);
      case NodeType::kString: return Value::String(first.text);
      default: break;
    }
    Errorf("can't evaluate command " + Quote(first.String()));
    return std::nullopt;
  }

  std::optional<Value> IdealConstant(const Node& c) {
    At(c);
    if (c.is_complex) return Value::Complex(c.complex128);
    if (c.is_float && !IsHexInt(c.text) && c.text[0] != '\'' &&
        c.text.find_first_of(".eEpP") != std::string::npos) {
      return Value::Float(c.float64);
    }
    if (c.is_int) return Value::Int(c.int64);
    if (c.is_uint) {
      Errorf(c.text + " overflows int");
      return std::nullopt;
    }
    return Value::Nil();
  }

  // A field's arguments are never looked at: fields of nil are nil, other values have none.
  std::optional<Value> EvalFieldNode(const Value& dot, const Node& field) {
    At(field);
    return EvalFieldChain(dot, field.idents[0]);
  }

  std::optional<Value> EvalChainNode(const Value& dot, const Node& chain) {
    At(chain);
    if (chain.node->type == NodeType::kNil) {
      Errorf("indirection through explicit nil in " + chain.String());
      return std::nullopt;
    }
    std::optional<Value> receiver = EvalArg(dot, Want::kNone, *chain.node);
    if (!receiver) return std::nullopt;
    return EvalFieldChain(*receiver, chain.idents[0]);
  }

  std::optional<Value> EvalVariableNode(const Node& variable, const Children& args,
                                        const Value* final) {
    At(variable);
    std::optional<Value> value = VarValue(variable.idents[0]);
    if (!value) return std::nullopt;
    if (variable.idents.size() == 1) {
      if (!NotAFunction(args, final)) return std::nullopt;
      return value;
    }
    return EvalFieldChain(*value, variable.idents[1]);
  }

  // Go's evalFieldChain + evalField for .first.more...: a field of nil is nil
  // (missingkey=default), and no value a template can compute has fields or methods.
  std::optional<Value> EvalFieldChain(const Value& receiver, const std::string& first) {
    if (receiver.is_nil()) return Value::Nil();
    Errorf("can't evaluate field " + first + " in type " + TypeName(receiver));
    return std::nullopt;
  }

  std::optional<Value> EvalFunction(const Value& dot, const Node& ident, const Node& cmd,
                                    const Children& args, const Value* final) {
    At(ident);
    return EvalCall(dot, ident.text, cmd, args, final);
  }

  std::optional<Value> EvalCall(const Value& dot, const std::string& name, const Node& node,
                                const Children& all_args, const Value* final) {
    const Signature& sig = *FindFunction(name);
    size_t nargs = all_args.empty() ? 0 : all_args.size() - 1;
    auto arg = [&](size_t i) -> const Node& { return *all_args[i + 1]; };
    size_t num_in = nargs + (final != nullptr ? 1 : 0);
    size_t sig_in = sig.params.size();
    size_t num_fixed = nargs;
    if (sig.variadic) {
      num_fixed = sig_in - 1;
      if (num_in < num_fixed) {
        Errorf("wrong number of args for " + name + ": want at least " +
               std::to_string(sig_in - 1) + " got " + std::to_string(nargs));
        return std::nullopt;
      }
    } else if (num_in != sig_in) {
      Errorf("wrong number of args for " + name + ": want " + std::to_string(sig_in) + " got " +
             std::to_string(num_in));
      return std::nullopt;
    }

    if (name == "and" || name == "or") {  // short-circuit
      Value v;
      for (size_t i = 0; i < nargs; ++i) {
        std::optional<Value> a = EvalArg(dot, Want::kReflectValue, arg(i));
        if (!a) return std::nullopt;
        v = std::move(*a);
        if (IsTrue(v) == (name == "or")) return v;
      }
      if (final != nullptr) v = *final;
      return v;
    }

    std::vector<Value> argv;
    argv.reserve(num_in);
    size_t i = 0;
    for (; i < num_fixed && i < nargs; ++i) {
      std::optional<Value> a = EvalArg(dot, WantOf(sig.params[i]), arg(i));
      if (!a) return std::nullopt;
      argv.push_back(std::move(*a));
    }
    if (sig.variadic) {
      for (; i < nargs; ++i) {
        std::optional<Value> a = EvalArg(dot, WantOf(sig.params.back()), arg(i));
        if (!a) return std::nullopt;
        argv.push_back(std::move(*a));
      }
    }
    if (final != nullptr) {
      ParamType t = sig.params.back();
      if (sig.variadic && num_in - 1 < num_fixed) t = sig.params[num_in - 1];
      std::optional<Value> a = ValidateType(*final, WantOf(t));
      if (!a) return std::nullopt;
      argv.push_back(std::move(*a));
    }
    std::string callee;
    if (name == "call") callee = nargs == 0 ? ReflectString(*final) : arg(0).String();
    CallResult result = CallFunction(name, argv, labels_, callee, budget_.max_output_bytes);
    if (result.error) {
      At(node);
      Errorf("error calling " + name + ": " + *result.error);
      return std::nullopt;
    }
    return std::move(result.value);
  }

  std::optional<Value> ValidateType(const Value& value, Want want) {
    if (value.is_nil()) {
      if (want != Want::kString) return value;
      Errorf("invalid value; expected string");
      return std::nullopt;
    }
    if (want == Want::kString && value.kind != Kind::kString) {
      Errorf(std::string("wrong type for value; expected string; got ") + TypeName(value));
      return std::nullopt;
    }
    return value;
  }

  std::optional<Value> EvalArg(const Value& dot, Want want, const Node& n) {
    At(n);
    std::optional<Value> v;
    switch (n.type) {
      case NodeType::kDot: return ValidateType(dot, want);
      case NodeType::kNil:
        if (want != Want::kString) return Value::Nil();
        Errorf("cannot assign nil to string");
        return std::nullopt;
      case NodeType::kField: v = EvalFieldNode(dot, n); break;
      case NodeType::kVariable: v = EvalVariableNode(n, {}, nullptr); break;
      case NodeType::kPipe: v = EvalPipeline(dot, &n); break;
      case NodeType::kIdentifier: v = EvalFunction(dot, n, n, {}, nullptr); break;
      case NodeType::kChain: v = EvalChainNode(dot, n); break;
      default: {
        if (want == Want::kString) {
          At(n);
          if (n.type == NodeType::kString) return Value::String(n.text);
          Errorf("expected string; found " + n.String());
          return std::nullopt;
        }
        At(n);
        switch (n.type) {
          case NodeType::kBool: return Value::Bool(n.flag);
          case NodeType::kNumber: return IdealConstant(n);
          case NodeType::kString: return Value::String(n.text);
          default: break;
        }
        Errorf("can't handle assignment of " + n.String() + " to empty interface argument");
        return std::nullopt;
      }
    }
    if (!v) return std::nullopt;
    return ValidateType(*v, want);
  }

  const Namespace& templates_;
  const hive::Labels& labels_;
  Budget& budget_;
  const Tree* tmpl_ = nullptr;
  const Node* node_ = nullptr;
  std::vector<Variable> vars_;
  int depth_ = 0;
  int nesting_ = 0;
  std::string out_;
  std::optional<std::string> error_;
};

}  // namespace

Result<std::string> Execute(const Namespace& templates, const std::string& name,
                            const hive::Labels& labels, Budget& budget) {
  auto it = templates.find(name);
  if (it == templates.end()) return InvalidArgument("template: no template " + Quote(name));
  Executor executor(templates, labels, budget);
  return executor.Run(*it->second);
}

}  // namespace syncbus::consumer::gotemplate
