// The lexer of Go's text/template/parse: splits a template into text, actions and the tokens
// inside actions ({{ }} delimiters, `{{- ` / ` -}}` trimming, comments skipped, Go literals),
// with Go's token positions, line numbers and error texts. One Lexer per parse; it borrows the
// input, which must outlive it. Not thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace syncbus::consumer::gotemplate {

enum class ItemType {
  kError,
  kBool,
  kChar,
  kCharConstant,
  kComment,
  kComplex,
  kAssign,
  kDeclare,
  kEOF,
  kField,
  kIdentifier,
  kLeftDelim,
  kLeftParen,
  kNumber,
  kPipe,
  kRawString,
  kRightDelim,
  kRightParen,
  kSpace,
  kString,
  kText,
  kVariable,
  kKeyword,  // keywords follow
  kBlock,
  kBreak,
  kContinue,
  kDot,
  kDefine,
  kElse,
  kEnd,
  kIf,
  kNil,
  kRange,
  kTemplate,
  kWith,
};

struct Item {
  ItemType type = ItemType::kEOF;
  int pos = 0;      // byte offset in the input
  std::string val;  // the token's text (the message for kError)
  int line = 1;     // line of the token's start
};

// Go's item.String(), used in parse errors: EOF, the error text, <keyword>, or %q (%.10q... when
// longer than 10 bytes).
std::string ItemString(const Item& item);

class Lexer {
 public:
  explicit Lexer(std::string_view input) : input_(input) {}
  Item NextItem();

 private:
  enum class State {
    kText,
    kLeftDelim,
    kComment,
    kRightDelim,
    kInsideAction,
    kSpace,
    kQuote,
    kRawQuote,
    kVariable,
    kChar,
    kNumber,
    kIdentifier,
    kField,
    kDone
  };

  char32_t Next();
  char32_t Peek();
  void Backup();
  Item ThisItem(ItemType type);
  State Emit(ItemType type);
  State EmitItem(Item item);
  void Ignore();
  bool Accept(std::string_view valid);
  void AcceptRun(std::string_view valid);
  State Errorf(std::string message);
  bool AtTerminator();
  bool AtRightDelim(bool* trim_spaces);
  bool ScanNumber();

  State LexText();
  State LexLeftDelim();
  State LexComment();
  State LexRightDelim();
  State LexInsideAction();
  State LexSpace();
  State LexIdentifier();
  State LexFieldOrVariable(ItemType type);
  State LexChar();
  State LexNumber();
  State LexQuote();
  State LexRawQuote();

  std::string_view input_;
  size_t pos_ = 0;
  size_t start_ = 0;
  bool at_eof_ = false;
  int paren_depth_ = 0;
  int line_ = 1;
  int start_line_ = 1;
  Item item_;
  bool inside_action_ = false;
};

}  // namespace syncbus::consumer::gotemplate
