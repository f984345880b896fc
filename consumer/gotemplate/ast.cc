#include "consumer/gotemplate/ast.h"

#include <algorithm>
#include <string_view>

#include "consumer/gotemplate/go_text.h"

namespace syncbus::consumer::gotemplate {
namespace {

// unicode.IsSpace (what bytes.TrimSpace trims).
bool IsUnicodeSpace(char32_t r) {
  switch (r) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return r >= 0x2000 && r <= 0x200A;
  }
}

}  // namespace

std::string Node::String() const {
  std::string out;
  WriteTo(out);
  return out;
}

void Node::WriteTo(std::string& out) const {
  switch (type) {
    case NodeType::kText:
    case NodeType::kIdentifier:
    case NodeType::kNumber: out += text; return;
    case NodeType::kString: out += quoted; return;
    case NodeType::kList:
      for (const auto& n : children) n->WriteTo(out);
      return;
    case NodeType::kPipe:
      for (size_t i = 0; i < decl.size(); ++i) {
        if (i > 0) out += ", ";
        decl[i]->WriteTo(out);
      }
      if (!decl.empty()) out += flag ? " = " : " := ";
      for (size_t i = 0; i < children.size(); ++i) {
        if (i > 0) out += " | ";
        children[i]->WriteTo(out);
      }
      return;
    case NodeType::kAction:
      out += "{{";
      pipe->WriteTo(out);
      out += "}}";
      return;
    case NodeType::kCommand:
      for (size_t i = 0; i < children.size(); ++i) {
        if (i > 0) out.push_back(' ');
        if (children[i]->type == NodeType::kPipe) {
          out.push_back('(');
          children[i]->WriteTo(out);
          out.push_back(')');
        } else {
          children[i]->WriteTo(out);
        }
      }
      return;
    case NodeType::kVariable:
      for (size_t i = 0; i < idents.size(); ++i) {
        if (i > 0) out.push_back('.');
        out += idents[i];
      }
      return;
    case NodeType::kDot: out.push_back('.'); return;
    case NodeType::kNil: out += "nil"; return;
    case NodeType::kField:
      for (const auto& id : idents) {
        out.push_back('.');
        out += id;
      }
      return;
    case NodeType::kChain:
      if (node->type == NodeType::kPipe) {
        out.push_back('(');
        node->WriteTo(out);
        out.push_back(')');
      } else {
        node->WriteTo(out);
      }
      for (const auto& field : idents) {
        out.push_back('.');
        out += field;
      }
      return;
    case NodeType::kBool: out += flag ? "true" : "false"; return;
    case NodeType::kEnd: out += "{{end}}"; return;
    case NodeType::kElse: out += "{{else}}"; return;
    case NodeType::kBreak: out += "{{break}}"; return;
    case NodeType::kContinue: out += "{{continue}}"; return;
    case NodeType::kIf:
    case NodeType::kRange:
    case NodeType::kWith:
      out += type == NodeType::kIf ? "{{if " : type == NodeType::kRange ? "{{range " : "{{with ";
      pipe->WriteTo(out);
      out += "}}";
      list->WriteTo(out);
      if (else_list) {
        out += "{{else}}";
        else_list->WriteTo(out);
      }
      out += "{{end}}";
      return;
    case NodeType::kTemplate:
      out += "{{template ";
      out += Quote(text);
      if (pipe) {
        out.push_back(' ');
        pipe->WriteTo(out);
      }
      out += "}}";
      return;
  }
}

bool IsEmptyTree(const Node* n) {
  if (n == nullptr) return true;
  switch (n->type) {
    case NodeType::kList:
      return std::all_of(n->children.begin(), n->children.end(),
                         [](const std::unique_ptr<Node>& c) { return IsEmptyTree(c.get()); });
    case NodeType::kText: {
      std::string_view t = n->text;
      while (!t.empty()) {
        DecodedRune d = DecodeRune(t);
        if (!IsUnicodeSpace(d.rune) || (d.rune == kRuneError && d.width == 1)) return false;
        t.remove_prefix(static_cast<size_t>(d.width));
      }
      return true;
    }
    default: return false;
  }
}

std::string ErrorLocation(const Node& n) {
  std::string_view text = *n.tree->text;
  text = text.substr(0, static_cast<size_t>(n.pos));
  size_t newline = text.rfind('\n');
  size_t col = newline == std::string_view::npos ? text.size() : text.size() - (newline + 1);
  int line = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  return n.tree->parse_name + ":" + std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace syncbus::consumer::gotemplate
