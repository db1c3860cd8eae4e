// libFuzzer target: REST routing end to end without sockets — RestApi::Handle (router, percent
// decoding, query parsing, the Authorization header, the request build) in front of a recording
// ApiService. Input: "METHOD TARGET\nAUTHORIZATION\nBODY".
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "api/auth.h"
#include "api/rest/routes.h"
#include "tests/api/fake_api_service.h"

namespace {

class NullResponder final : public gpupool::api::rest::Responder {
 public:
  void SetRoute(std::string) override {}
  void Reply(int status, std::string, std::string, gpupool::api::rest::Headers) override {
    if (status < 100 || status > 599) __builtin_trap();
  }
  void StreamLine(std::string) override {}
  void StreamEnd(const gpupool::Status&) override {}
  void SetCancel(gpupool::api::Cancel cancel) override {
    if (cancel) cancel();
  }
};

struct World {
  World()
      : auth(gpupool::api::Authenticator::Create(
                 {{"admin-token-0123456789", "ops", true}, {"tenant-token-0123", "acme", false}})
                 .value()),
        api(service, auth, nullptr) {}
  gpupool::api::testing::FakeApiService service;
  gpupool::api::Authenticator auth;
  gpupool::api::rest::RestApi api;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // one for the whole run, like a server
  std::string in(reinterpret_cast<const char*>(data), size);
  gpupool::api::rest::HttpRequestIn req;
  const size_t space = in.find(' ');
  const size_t nl1 = in.find('\n');
  if (space == std::string::npos || nl1 == std::string::npos || space > nl1) return 0;
  req.method = in.substr(0, space);
  req.target = in.substr(space + 1, nl1 - space - 1);
  const size_t nl2 = in.find('\n', nl1 + 1);
  req.authorization =
      in.substr(nl1 + 1, nl2 == std::string::npos ? std::string::npos : nl2 - nl1 - 1);
  if (nl2 != std::string::npos) req.body = in.substr(nl2 + 1);
  world->api.Handle(req, std::make_shared<NullResponder>());
  (void)world->api.RouteOf(req.method, req.target);
  return 0;
}
