#include "tests/kubesim/media_type.h"

#include <doctest/doctest.h>

namespace syncbus::kubesim {
namespace {

Outcome<ResponseForm> Negotiate(const std::string& accept) {
  return NegotiateForm(accept.empty() ? http::Headers{} : http::Headers{{"Accept", accept}});
}

ResponseForm::Kind KindOf(const std::string& accept) {
  auto form = Negotiate(accept);
  REQUIRE_MESSAGE(form.ok(), accept << ": " << form.error().message);
  return form->kind;
}

TEST_CASE("the Accept header picks the object or its metadata, by q and then by order") {
  using Kind = ResponseForm::Kind;
  CHECK(KindOf("") == Kind::kObject);
  CHECK(KindOf("application/json") == Kind::kObject);
  CHECK(KindOf("*/*") == Kind::kObject);
  CHECK(KindOf("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1") ==
        Kind::kMetadataList);
  CHECK(KindOf("application/json; as=PartialObjectMetadata; g=meta.k8s.io; v=v1") ==
        Kind::kMetadata);
  CHECK(KindOf("*/*;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1") == Kind::kMetadataList);
  // client-go's metadata client (JSON only): the form first, the object as the fallback.
  CHECK(
      KindOf("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json") ==
      Kind::kMetadataList);
  CHECK(KindOf("application/json;q=0.5, "
               "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1") ==
        Kind::kMetadataList);
  CHECK(KindOf(
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;q=0, application/json") ==
        Kind::kObject);
  // Forms the simulator does not serve (Table) are passed over for the next range.
  CHECK(KindOf("application/json;as=Table;g=meta.k8s.io;v=v1,application/json") == Kind::kObject);
  auto beta = Negotiate("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1");
  REQUIRE(beta.ok());
  CHECK(beta->ApiVersion() == "meta.k8s.io/v1beta1");
}

TEST_CASE("nothing acceptable is 406, as is a list asked for as one object and the reverse") {
  for (const char* accept : {"text/html", "application/json;as=PartialObjectMetadataList;v=v1",
                             "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2"}) {
    CAPTURE(accept);
    auto form = Negotiate(accept);
    REQUIRE_FALSE(form.ok());
    CHECK(form.error().code == 406);
    CHECK(form.error().reason == "NotAcceptable");
  }
  ResourceType secrets;
  secrets.kind = "Secret";
  ResourceType widgets;
  widgets.group = "example.com";
  widgets.kind = "Widget";
  widgets.custom = true;
  ResourceType leases;
  leases.group = "coordination.k8s.io";
  leases.kind = "Lease";
  ResponseForm one{ResponseForm::Kind::kMetadata};
  ResponseForm list{ResponseForm::Kind::kMetadataList};
  CHECK_FALSE(FormMismatch(one, secrets, false));
  CHECK_FALSE(FormMismatch(list, secrets, true));
  CHECK(
      FormMismatch(one, secrets, true)->message ==
      "you requested PartialObjectMetadata, but the requested object is a list (*core.SecretList)");
  CHECK(FormMismatch(list, widgets, false)->message ==
        "you requested PartialObjectMetadataList, but the requested object is not a list "
        "(*unstructured.Unstructured)");
  CHECK(FormMismatch(one, leases, true)->message.find("(*coordination.LeaseList)") !=
        std::string::npos);
}

}  // namespace
}  // namespace syncbus::kubesim
