// RAII owners for libcurl handles (CURL*, CURLM*, CURLSH*, curl_slist*, CURLU*). Move-only;
// thread-compatible (libcurl handles are used by one thread at a time).
#pragma once

#include <memory>
#include <string>

#include <curl/curl.h>

namespace syncbus::http {

struct CurlEasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct CurlMultiDeleter {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
struct CurlShareDeleter {
  void operator()(CURLSH* share) const { curl_share_cleanup(share); }
};
struct CurlSlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
struct CurlUrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};

using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;
using CurlMulti = std::unique_ptr<CURLM, CurlMultiDeleter>;
using CurlShare = std::unique_ptr<CURLSH, CurlShareDeleter>;
using CurlUrl = std::unique_ptr<CURLU, CurlUrlDeleter>;

// A curl_slist built by appending; curl keeps a pointer to it while a transfer runs.
class CurlSlist {
 public:
  // False when libcurl could not allocate.
  bool Append(const std::string& line) {
    curl_slist* head = list_.release();
    curl_slist* next = curl_slist_append(head, line.c_str());  // null: `head` is unchanged
    list_.reset(next != nullptr ? next : head);
    return next != nullptr;
  }
  curl_slist* get() const { return list_.get(); }

 private:
  std::unique_ptr<curl_slist, CurlSlistDeleter> list_;
};

}  // namespace syncbus::http
