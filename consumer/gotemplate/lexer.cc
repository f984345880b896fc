#include "consumer/gotemplate/lexer.h"

#include <algorithm>
#include <unordered_map>

#include "consumer/gotemplate/go_fmt.h"
#include "consumer/gotemplate/go_text.h"

namespace syncbus::consumer::gotemplate {
namespace {

constexpr char32_t kEof = static_cast<char32_t>(-1);  // above every rune: never ASCII
constexpr std::string_view kLeftDelimText = "{{";
constexpr std::string_view kRightDelimText = "}}";
constexpr std::string_view kLeftComment = "/*";
constexpr std::string_view kRightComment = "*/";
constexpr std::string_view kSpaceChars = " \t\r\n";
constexpr size_t kTrimMarkerLen = 2;

bool IsSpace(char32_t r) {
  return r == ' ' || r == '\t' || r == '\r' || r == '\n';
}
bool IsAlphaNumeric(char32_t r) {
  return r == '_' || IsLetter(r) || IsDigit(r);
}

bool HasLeftTrimMarker(std::string_view s) {
  return s.size() >= 2 && s[0] == '-' && IsSpace(static_cast<unsigned char>(s[1]));
}
bool HasRightTrimMarker(std::string_view s) {
  return s.size() >= 2 && IsSpace(static_cast<unsigned char>(s[0])) && s[1] == '-';
}

size_t RightTrimLength(std::string_view s) {
  size_t n = s.find_last_not_of(kSpaceChars);
  return n == std::string_view::npos ? s.size() : s.size() - n - 1;
}
size_t LeftTrimLength(std::string_view s) {
  size_t n = s.find_first_not_of(kSpaceChars);
  return n == std::string_view::npos ? s.size() : n;
}

int CountNewlines(std::string_view s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

std::string SharpU(char32_t r) {
  return *Sprintf("%#U", {Value::Int(static_cast<int64_t>(r))});
}

const std::unordered_map<std::string_view, ItemType>& Keywords() {
  static const auto* keywords = new std::unordered_map<std::string_view, ItemType>{
      {".", ItemType::kDot},
      {"block", ItemType::kBlock},
      {"break", ItemType::kBreak},
      {"continue", ItemType::kContinue},
      {"define", ItemType::kDefine},
      {"else", ItemType::kElse},
      {"end", ItemType::kEnd},
      {"if", ItemType::kIf},
      {"range", ItemType::kRange},
      {"nil", ItemType::kNil},
      {"template", ItemType::kTemplate},
      {"with", ItemType::kWith},
  };
  return *keywords;
}

}  // namespace

std::string ItemString(const Item& item) {
  if (item.type == ItemType::kEOF) return "EOF";
  if (item.type == ItemType::kError) return item.val;
  if (item.type > ItemType::kKeyword) return "<" + item.val + ">";
  if (item.val.size() > 10) return *Sprintf("%.10q...", {Value::String(item.val)});
  return Quote(item.val);
}

char32_t Lexer::Next() {
  if (pos_ >= input_.size()) {
    at_eof_ = true;
    return kEof;
  }
  DecodedRune d = DecodeRune(input_.substr(pos_));
  pos_ += static_cast<size_t>(d.width);
  if (d.rune == '\n') ++line_;
  return d.rune;
}

char32_t Lexer::Peek() {
  char32_t r = Next();
  Backup();
  return r;
}

void Lexer::Backup() {
  if (!at_eof_ && pos_ > 0) {
    DecodedRune d = DecodeLastRune(input_.substr(0, pos_));
    pos_ -= static_cast<size_t>(d.width);
    if (d.rune == '\n') --line_;
  }
}

Item Lexer::ThisItem(ItemType type) {
  Item item{type, static_cast<int>(start_), std::string(input_.substr(start_, pos_ - start_)),
            start_line_};
  start_ = pos_;
  start_line_ = line_;
  return item;
}

Lexer::State Lexer::Emit(ItemType type) {
  return EmitItem(ThisItem(type));
}

Lexer::State Lexer::EmitItem(Item item) {
  item_ = std::move(item);
  return State::kDone;
}

void Lexer::Ignore() {
  line_ += CountNewlines(input_.substr(start_, pos_ - start_));
  start_ = pos_;
  start_line_ = line_;
}

bool Lexer::Accept(std::string_view valid) {
  char32_t r = Next();
  if (r < 0x80 && valid.find(static_cast<char>(r)) != std::string_view::npos) return true;
  Backup();
  return false;
}

void Lexer::AcceptRun(std::string_view valid) {
  while (true) {
    char32_t r = Next();
    if (r >= 0x80 || valid.find(static_cast<char>(r)) == std::string_view::npos) break;
  }
  Backup();
}

Lexer::State Lexer::Errorf(std::string message) {
  item_ = Item{ItemType::kError, static_cast<int>(start_), std::move(message), start_line_};
  start_ = 0;
  pos_ = 0;
  input_ = input_.substr(0, 0);
  return State::kDone;
}

Item Lexer::NextItem() {
  item_ = Item{ItemType::kEOF, static_cast<int>(pos_), "EOF", start_line_};
  State state = inside_action_ ? State::kInsideAction : State::kText;
  while (state != State::kDone) {
    switch (state) {
      case State::kText: state = LexText(); break;
      case State::kLeftDelim: state = LexLeftDelim(); break;
      case State::kComment: state = LexComment(); break;
      case State::kRightDelim: state = LexRightDelim(); break;
      case State::kInsideAction: state = LexInsideAction(); break;
      case State::kSpace: state = LexSpace(); break;
      case State::kQuote: state = LexQuote(); break;
      case State::kRawQuote: state = LexRawQuote(); break;
      case State::kVariable:
        state =
            AtTerminator() ? Emit(ItemType::kVariable) : LexFieldOrVariable(ItemType::kVariable);
        break;
      case State::kChar: state = LexChar(); break;
      case State::kNumber: state = LexNumber(); break;
      case State::kIdentifier: state = LexIdentifier(); break;
      case State::kField: state = LexFieldOrVariable(ItemType::kField); break;
      case State::kDone: break;
    }
  }
  return item_;
}

Lexer::State Lexer::LexText() {
  size_t x = input_.find(kLeftDelimText, pos_);
  if (x != std::string_view::npos) {
    if (x > pos_) {
      pos_ = x;
      size_t trim = 0;
      size_t delim_end = pos_ + kLeftDelimText.size();
      if (HasLeftTrimMarker(input_.substr(delim_end)))
        trim = RightTrimLength(input_.substr(start_, pos_ - start_));
      pos_ -= trim;
      line_ += CountNewlines(input_.substr(start_, pos_ - start_));
      Item item = ThisItem(ItemType::kText);
      pos_ += trim;
      Ignore();
      if (!item.val.empty()) return EmitItem(std::move(item));
    }
    return State::kLeftDelim;
  }
  pos_ = input_.size();
  if (pos_ > start_) {
    line_ += CountNewlines(input_.substr(start_, pos_ - start_));
    return Emit(ItemType::kText);
  }
  return Emit(ItemType::kEOF);
}

bool Lexer::AtRightDelim(bool* trim_spaces) {
  std::string_view rest = input_.substr(pos_);
  if (HasRightTrimMarker(rest) && rest.substr(kTrimMarkerLen).substr(0, 2) == kRightDelimText) {
    *trim_spaces = true;
    return true;
  }
  *trim_spaces = false;
  return rest.substr(0, 2) == kRightDelimText;
}

Lexer::State Lexer::LexLeftDelim() {
  pos_ += kLeftDelimText.size();
  bool trim = HasLeftTrimMarker(input_.substr(pos_));
  size_t after_marker = trim ? kTrimMarkerLen : 0;
  if (input_.substr(pos_ + after_marker).substr(0, 2) == kLeftComment) {
    pos_ += after_marker;
    Ignore();
    return State::kComment;
  }
  Item item = ThisItem(ItemType::kLeftDelim);
  inside_action_ = true;
  pos_ += after_marker;
  Ignore();
  paren_depth_ = 0;
  return EmitItem(std::move(item));
}

Lexer::State Lexer::LexComment() {
  pos_ += kLeftComment.size();
  size_t x = input_.find(kRightComment, pos_);
  if (x == std::string_view::npos) return Errorf("unclosed comment");
  pos_ = x + kRightComment.size();
  bool trim = false;
  if (!AtRightDelim(&trim)) return Errorf("comment ends before closing delimiter");
  line_ += CountNewlines(input_.substr(start_, pos_ - start_));
  ThisItem(ItemType::kComment);
  if (trim) pos_ += kTrimMarkerLen;
  pos_ += kRightDelimText.size();
  if (trim) pos_ += LeftTrimLength(input_.substr(pos_));
  Ignore();
  return State::kText;  // comments are not emitted (no ParseComments mode)
}

Lexer::State Lexer::LexRightDelim() {
  bool trim = false;
  AtRightDelim(&trim);
  if (trim) {
    pos_ += kTrimMarkerLen;
    Ignore();
  }
  pos_ += kRightDelimText.size();
  Item item = ThisItem(ItemType::kRightDelim);
  if (trim) {
    pos_ += LeftTrimLength(input_.substr(pos_));
    Ignore();
  }
  inside_action_ = false;
  return EmitItem(std::move(item));
}

Lexer::State Lexer::LexInsideAction() {
  bool trim = false;
  if (AtRightDelim(&trim)) {
    if (paren_depth_ == 0) return State::kRightDelim;
    return Errorf("unclosed left paren");
  }
  char32_t r = Next();
  if (r == kEof) return Errorf("unclosed action");
  if (IsSpace(r)) {
    Backup();
    return State::kSpace;
  }
  switch (r) {
    case '=': return Emit(ItemType::kAssign);
    case ':':
      if (Next() != '=') return Errorf("expected :=");
      return Emit(ItemType::kDeclare);
    case '|': return Emit(ItemType::kPipe);
    case '"': return State::kQuote;
    case '`': return State::kRawQuote;
    case '$': return State::kVariable;
    case '\'': return State::kChar;
    case '.':
      if (pos_ < input_.size()) {
        char c = input_[pos_];
        if (c < '0' || c > '9') return State::kField;
      }
      Backup();
      return State::kNumber;
    case '(': ++paren_depth_; return Emit(ItemType::kLeftParen);
    case ')':
      if (--paren_depth_ < 0) return Errorf("unexpected right paren");
      return Emit(ItemType::kRightParen);
    default: break;
  }
  if (r == '+' || r == '-' || (r >= '0' && r <= '9')) {
    Backup();
    return State::kNumber;
  }
  if (IsAlphaNumeric(r)) {
    Backup();
    return State::kIdentifier;
  }
  if (r <= 0x7F && IsPrint(r)) return Emit(ItemType::kChar);
  return Errorf("unrecognized character in action: " + SharpU(r));
}

Lexer::State Lexer::LexSpace() {
  int spaces = 0;
  while (IsSpace(Peek())) {
    Next();
    ++spaces;
  }
  std::string_view rest = input_.substr(pos_ - 1);
  if (HasRightTrimMarker(rest) && rest.substr(kTrimMarkerLen).substr(0, 2) == kRightDelimText) {
    Backup();
    if (spaces == 1) return State::kRightDelim;
  }
  return Emit(ItemType::kSpace);
}

Lexer::State Lexer::LexIdentifier() {
  while (true) {
    char32_t r = Next();
    if (IsAlphaNumeric(r)) continue;
    Backup();
    std::string_view word = input_.substr(start_, pos_ - start_);
    if (!AtTerminator()) return Errorf("bad character " + SharpU(r));
    auto keyword = Keywords().find(word);
    if (keyword != Keywords().end() && keyword->second > ItemType::kKeyword)
      return Emit(keyword->second);
    if (word[0] == '.') return Emit(ItemType::kField);
    if (word == "true" || word == "false") return Emit(ItemType::kBool);
    return Emit(ItemType::kIdentifier);
  }
}

Lexer::State Lexer::LexFieldOrVariable(ItemType type) {
  if (AtTerminator())
    return Emit(type == ItemType::kVariable ? ItemType::kVariable : ItemType::kDot);
  char32_t r = 0;
  while (true) {
    r = Next();
    if (!IsAlphaNumeric(r)) {
      Backup();
      break;
    }
  }
  if (!AtTerminator()) return Errorf("bad character " + SharpU(r));
  return Emit(type);
}

bool Lexer::AtTerminator() {
  char32_t r = Peek();
  if (IsSpace(r)) return true;
  switch (r) {
    case kEof:
    case '.':
    case ',':
    case '|':
    case ':':
    case ')':
    case '(': return true;
    default: break;
  }
  return input_.substr(pos_).substr(0, 2) == kRightDelimText;
}

Lexer::State Lexer::LexChar() {
  while (true) {
    char32_t r = Next();
    if (r == '\\') {
      char32_t e = Next();
      if (e != kEof && e != '\n') continue;
      return Errorf("unterminated character constant");
    }
    if (r == kEof || r == '\n') return Errorf("unterminated character constant");
    if (r == '\'') break;
  }
  return Emit(ItemType::kCharConstant);
}

Lexer::State Lexer::LexNumber() {
  if (!ScanNumber())
    return Errorf("bad number syntax: " + Quote(input_.substr(start_, pos_ - start_)));
  char32_t sign = Peek();
  if (sign == '+' || sign == '-') {
    if (!ScanNumber() || input_[pos_ - 1] != 'i') {
      return Errorf("bad number syntax: " + Quote(input_.substr(start_, pos_ - start_)));
    }
    return Emit(ItemType::kComplex);
  }
  return Emit(ItemType::kNumber);
}

bool Lexer::ScanNumber() {
  Accept("+-");
  std::string_view digits = "0123456789_";
  if (Accept("0")) {
    if (Accept("xX")) {
      digits = "0123456789abcdefABCDEF_";
    } else if (Accept("oO")) {
      digits = "01234567_";
    } else if (Accept("bB")) {
      digits = "01_";
    }
  }
  AcceptRun(digits);
  if (Accept(".")) AcceptRun(digits);
  if (digits.size() == 10 + 1 && Accept("eE")) {
    Accept("+-");
    AcceptRun("0123456789_");
  }
  if (digits.size() == 16 + 6 + 1 && Accept("pP")) {
    Accept("+-");
    AcceptRun("0123456789_");
  }
  Accept("i");
  if (IsAlphaNumeric(Peek())) {
    Next();
    return false;
  }
  return true;
}

Lexer::State Lexer::LexQuote() {
  while (true) {
    char32_t r = Next();
    if (r == '\\') {
      char32_t e = Next();
      if (e != kEof && e != '\n') continue;
      return Errorf("unterminated quoted string");
    }
    if (r == kEof || r == '\n') return Errorf("unterminated quoted string");
    if (r == '"') break;
  }
  return Emit(ItemType::kString);
}

Lexer::State Lexer::LexRawQuote() {
  while (true) {
    char32_t r = Next();
    if (r == kEof) return Errorf("unterminated raw quoted string");
    if (r == '`') break;
  }
  return Emit(ItemType::kRawString);
}

}  // namespace syncbus::consumer::gotemplate
