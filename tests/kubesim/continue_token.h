// Continue tokens of paged lists as kube-apiserver 1.26 writes and reads them
// (k8s.io/apiserver/pkg/storage): {"v":"meta.k8s.io/v1","rv":N,"start":KEY} in URL-safe base64
// without padding. A token that does not decode is refused in the server's words, Go's base64
// and encoding/json error texts included. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

struct ContinueToken {
  int64_t rv = 0;     // below 0 (-1 in the token of a 410): continue at the latest state
  std::string start;  // the store key the next page starts after
};

std::string EncodeContinue(int64_t rv, const std::string& start);
// The token, or the 400 BadRequest "invalid continue token: continue key is not valid: ...".
Outcome<ContinueToken> DecodeContinue(std::string_view text);

}  // namespace syncbus::kubesim
