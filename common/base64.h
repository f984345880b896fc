// Standard base64 (RFC 4648) as Kubernetes Secrets and kubeconfig *-data fields use it.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace syncbus {

std::string EncodeBase64(std::string_view data);

// What DecodeBase64 accepts besides canonical base64; line breaks are always skipped. The
// defaults: padding optional, ASCII whitespace ignored.
struct Base64Decoding {
  bool require_padding = false;  // the text is whole groups of 4 characters, '=' included
  bool skip_blanks = true;       // ' ' and '\t' are skipped like line breaks
  bool loose_padding = true;     // up to two '=' even where they do not complete the last group
  bool loose_tail = false;       // the unused bits of a partial last group may be set
};

// Go's encoding/base64.StdEncoding, which the Kubernetes API server decodes with.
inline constexpr Base64Decoding kGoStdBase64{
    .require_padding = true, .skip_blanks = false, .loose_padding = false, .loose_tail = true};

// nullopt on input `rules` do not allow.
std::optional<std::string> DecodeBase64(std::string_view text, const Base64Decoding& rules = {});

}  // namespace syncbus
