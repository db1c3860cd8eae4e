// The REST face over loopback: real HTTP (a Beast client) against HttpServer with a recording
// FakeApiService. Checks routes → methods and fields, error codes → HTTP status and body,
// malformed input, auth, probes, metrics and streams.
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "api/auth.h"
#include "api/rest/http_server.h"
#include "api/utf8.h"
#include "tests/api/fake_api_service.h"
#include "tests/api/http_client.h"
#include "tests/support/wait_for.h"

namespace gpupool::api {
namespace {

using testing::FakeApiService;
using testing::HttpCall;
using testing::HttpClient;
using testing::HttpResult;
namespace http = testing::http;
using http::verb;

using ::gpupool::testing::WaitFor;  // shutdown and disconnects are asynchronous

class RestTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    server_ = std::make_unique<HttpServer>(fake_, auth_, registry_, "127.0.0.1:0", options);
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }
  void SetUp() override { StartServer(); }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  HttpResult Call(verb v, const std::string& target, const std::string& body = "",
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
    return HttpCall(port_, v, target, body, std::move(headers));
  }

  // The fake's last request equals `expected_text` (protobuf text format) of the same type.
  void ExpectLastRequest(const std::string& method, const std::string& expected_text) {
    const FakeApiService::Call call = fake_.last();
    ASSERT_EQ(call.method, method);
    ASSERT_NE(call.request, nullptr);
    std::unique_ptr<google::protobuf::Message> expected(call.request->New());
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(expected_text, expected.get()))
        << expected_text;
    std::string diff;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differ.Compare(*expected, *call.request))
        << method << ": " << diff << "\ngot: " << call.request->ShortDebugString();
  }

  FakeApiService fake_;
  Authenticator auth_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

struct RouteCase {
  verb method;
  std::string target;
  std::string body;
  std::string api_method;
  std::string request;  // text format
};

TEST_F(RestTest, EachRouteCallsItsMethodWithTheRightFields) {
  const RouteCase cases[] = {
      {verb::post, "/v1/jobs",
       R"({"spec": {"tenant": "acme/research/alice", "pool": "gpu-a", "priorityClass": "high",
           "taskCount": 2, "gang": true, "preemptible": true, "maxRuntime": "3600s",
           "labels": {"team": "nlp"}, "maxRetries": 3,
           "template": {"command": ["python", "train.py"], "env": {"EPOCHS": "3"},
                        "resources": {"fractional": {"milliTflops": "50000", "vramMib": 20480}}}}})",
       "SubmitJob",
       R"(spec { tenant: "acme/research/alice" pool: "gpu-a" priority_class: "high" task_count: 2
           gang: true preemptible: true max_runtime { seconds: 3600 }
           labels { key: "team" value: "nlp" } max_retries: 3
           template { command: "python" command: "train.py" env { key: "EPOCHS" value: "3" }
                      resources { fractional { milli_tflops: 50000 vram_mib: 20480 } } } })"},
      {verb::get,
       "/v1/jobs?tenant=acme&pool=gpu-a&state=JOB_STATE_RUNNING&page_size=10&pageToken=t1", "",
       "ListJobs",
       R"(tenant: "acme" pool: "gpu-a" state: JOB_STATE_RUNNING page_size: 10 page_token: "t1")"},
      {verb::get, "/v1/jobs?state=2", "", "ListJobs", "state: JOB_STATE_RUNNING"},
      {verb::get, "/v1/jobs", "", "ListJobs", ""},
      {verb::get, "/v1/jobs/j-17", "", "GetJob", R"(job_id: "j-17")"},
      {verb::post, "/v1/jobs/j-17:cancel", R"({"reason": "not needed"})", "CancelJob",
       R"(job_id: "j-17" reason: "not needed")"},
      {verb::post, "/v1/jobs/j-17:cancel", "", "CancelJob", R"(job_id: "j-17")"},
      {verb::get, "/v1/jobs/j-17:watch", "", "WatchJob", R"(job_id: "j-17")"},
      {verb::get, "/v1/tasks/j-17.0/logs?offset=100&follow=true", "", "GetTaskLogs",
       R"(task_id: "j-17.0" offset: 100 follow: true)"},
      {verb::post, "/v1/pools",
       R"({"pool": {"name": "gpu-a", "visibility": "VISIBILITY_PRIVATE", "allowedTenants": ["acme"],
           "placementStrategy": "best-fit", "computeOvercommit": 1.5, "memoryOvercommit": 1,
           "sharingMode": "SHARING_MODE_TIME_SLICED", "timeSliceReplicas": 4}})",
       "CreatePool",
       R"(pool { name: "gpu-a" visibility: VISIBILITY_PRIVATE allowed_tenants: "acme"
           placement_strategy: "best-fit" compute_overcommit: 1.5 memory_overcommit: 1
           sharing_mode: SHARING_MODE_TIME_SLICED time_slice_replicas: 4 })"},
      {verb::get, "/v1/pools", "", "ListPools", ""},
      {verb::get, "/v1/pools/gpu-a", "", "GetPool", R"(name: "gpu-a")"},
      {verb::get, "/v1/pools/gpu%20a", "", "GetPool", R"(name: "gpu a")"},
      {verb::patch, "/v1/pools/gpu-a?update_mask=computeOvercommit,allowedTenants",
       R"({"pool": {"computeOvercommit": 2, "allowedTenants": ["acme", "globex"]}})", "UpdatePool",
       R"(pool { name: "gpu-a" compute_overcommit: 2 allowed_tenants: "acme"
                 allowed_tenants: "globex" }
          update_mask { paths: "compute_overcommit" paths: "allowed_tenants" })"},
      {verb::patch, "/v1/pools/gpu-a", R"({"pool": {"name": "gpu-a"}, "updateMask": "visibility"})",
       "UpdatePool", R"(pool { name: "gpu-a" } update_mask { paths: "visibility" })"},
      {verb::delete_, "/v1/pools/gpu-a", "", "DeletePool", R"(name: "gpu-a")"},
      {verb::get, "/v1/nodes?pool=gpu-a", "", "ListNodes", R"(pool: "gpu-a")"},
      {verb::get, "/v1/nodes", "", "ListNodes", ""},
      {verb::get, "/v1/nodes/node-1", "", "GetNode", R"(name: "node-1")"},
      {verb::post, "/v1/nodes/node-1:cordon", "", "CordonNode", R"(name: "node-1")"},
      {verb::post, "/v1/nodes/node-1:uncordon", "{}", "UncordonNode", R"(name: "node-1")"},
      {verb::post, "/v1/nodes/node-1:drain", "", "DrainNode", R"(name: "node-1")"},
      {verb::post, "/v1/nodes/node-1/devices/GPU-ab-12:clear-fault", "", "ClearDeviceFault",
       R"(node: "node-1" device: "GPU-ab-12")"},
      {verb::post, "/v1/nodes/node-1/devices/GPU-ab-12:set-slots", R"({"slots": 4})",
       "SetDeviceSlots", R"(node: "node-1" device: "GPU-ab-12" slots: 4)"},
      {verb::post, "/v1/nodes/node-1/gpus/GPU-ab-12:set-mig-layout", R"({"layout": "7g.80gb@0"})",
       "SetMigLayout", R"(node: "node-1" gpu: "GPU-ab-12" layout: "7g.80gb@0")"},
      {verb::post, "/v1/nodes/node-1:fence", "", "FenceNode", R"(name: "node-1")"},
      {verb::get, "/v1/catalog", "", "ListGpuModels", ""},
      {verb::get, "/v1/priority-classes", "", "ListPriorityClasses", ""},
      {verb::get, "/v1/priority-classes?tenant=acme%2Fml", "", "ListPriorityClasses",
       R"(tenant: "acme/ml")"},
      {verb::get, "/v1/skus", "", "ListSkus", ""},
      {verb::post, "/v1/tenants", R"({"tenant": {"path": "acme/research"}})", "CreateTenant",
       R"(tenant { path: "acme/research" })"},
      {verb::get, "/v1/tenants", "", "ListTenants", ""},
      {verb::get, "/v1/tenants?prefix=acme%2Fresearch", "", "ListTenants",
       R"(prefix: "acme/research")"},
      {verb::get, "/v1/tenants/acme", "", "GetTenant", R"(path: "acme")"},
      {verb::get, "/v1/tenants/acme%2Fresearch%2Falice", "", "GetTenant",
       R"(path: "acme/research/alice")"},
      {verb::delete_, "/v1/tenants/acme%2fresearch", "", "DeleteTenant",
       R"(path: "acme/research")"},
      {verb::put, "/v1/quotas/acme%2Fresearch/gpu-a",
       R"({"quota": {"guaranteed": {"sku": "medium", "skuCount": 4},
                     "limit": {"resources": {"milliTflops": "400000", "vramMib": 81920},
                               "devices": 8}}})",
       "SetQuota",
       R"(quota { tenant: "acme/research" pool: "gpu-a"
                  guaranteed { sku: "medium" sku_count: 4 }
                  limit { resources { milli_tflops: 400000 vram_mib: 81920 } devices: 8 } })"},
      {verb::put, "/v1/quotas/acme/gpu-a",
       R"({"quota": {"tenant": "acme", "pool": "gpu-a", "limit": {"devices": 2}}})", "SetQuota",
       R"(quota { tenant: "acme" pool: "gpu-a" limit { devices: 2 } })"},
      {verb::get, "/v1/quotas", "", "ListQuotas", ""},
      {verb::get, "/v1/quotas?tenantPrefix=acme&pool=gpu-a", "", "ListQuotas",
       R"(tenant_prefix: "acme" pool: "gpu-a")"},
      {verb::get, "/v1/quotas/acme%2Fresearch/gpu-a", "", "GetQuota",
       R"(tenant: "acme/research" pool: "gpu-a")"},
      {verb::delete_, "/v1/quotas/acme%2Fresearch/gpu-a", "", "DeleteQuota",
       R"(tenant: "acme/research" pool: "gpu-a")"},
  };
  for (const RouteCase& c : cases) {
    SCOPED_TRACE(std::string(http::to_string(c.method)) + " " + c.target);
    const size_t before = fake_.call_count();
    const HttpResult r = Call(c.method, c.target, c.body);
    EXPECT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(fake_.call_count(), before + 1);
    ExpectLastRequest(c.api_method, c.request);
  }
}

TEST_F(RestTest, RepliesUseProtobufJsonMapping) {
  v1::Job job;
  job.set_id("j-1");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.mutable_spec()->set_tenant("acme");
  v1::Task* task = job.add_tasks();
  task->set_id("j-1.0");
  v1::Allocation* a = task->add_allocations();
  a->set_device_id("GPU-1");
  a->set_milli_tflops(494500);
  a->set_vram_mib(81559);
  fake_.SetReply("GetJob", job);

  const HttpResult r = Call(verb::get, "/v1/jobs/j-1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers[http::field::content_type], "application/json");
  // lowerCamelCase names, enums as names, int64 as strings, defaults printed.
  EXPECT_NE(r.body.find(R"("state":"JOB_STATE_RUNNING")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("milliTflops":"494500")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("vramMib":"81559")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("deviceId":"GPU-1")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("exitCode":0)"), std::string::npos) << r.body;
}

TEST_F(RestTest, Int64AcceptsNumbersAndStrings) {
  for (const std::string v : {"123456789012", "\"123456789012\""}) {
    const HttpResult r = Call(verb::post, "/v1/jobs",
                              R"({"spec": {"template": {"resources": {"fractional":
                                  {"milliTflops": )" +
                                  v + R"(, "vramMib": )" + v + "}}}}}");
    EXPECT_EQ(r.status, 200) << r.body;
    ExpectLastRequest("SubmitJob",
                      "spec { template { resources { fractional { milli_tflops: 123456789012 "
                      "vram_mib: 123456789012 } } } }");
  }
}

struct CodeCase {
  StatusCode code;
  int http;
};

TEST_F(RestTest, EachErrorCodeHasGrpcGatewaysHttpStatusAndBody) {
  const CodeCase cases[] = {
      {StatusCode::kCancelled, 499},          {StatusCode::kUnknown, 500},
      {StatusCode::kInvalidArgument, 400},    {StatusCode::kDeadlineExceeded, 504},
      {StatusCode::kNotFound, 404},           {StatusCode::kAlreadyExists, 409},
      {StatusCode::kPermissionDenied, 403},   {StatusCode::kResourceExhausted, 429},
      {StatusCode::kFailedPrecondition, 400}, {StatusCode::kAborted, 409},
      {StatusCode::kOutOfRange, 400},         {StatusCode::kUnimplemented, 501},
      {StatusCode::kInternal, 500},           {StatusCode::kUnavailable, 503},
      {StatusCode::kDataLoss, 500},           {StatusCode::kUnauthenticated, 401},
  };
  for (const CodeCase& c : cases) {
    SCOPED_TRACE(std::string(StatusCodeName(c.code)));
    fake_.FailWith(Status(c.code, "pool 'gpu-a': \"quoted\" reason"));
    const HttpResult r = Call(verb::get, "/v1/pools/gpu-a");
    EXPECT_EQ(r.status, c.http);
    EXPECT_EQ(r.headers[http::field::content_type], "application/json");
    EXPECT_EQ(r.body, "{\"code\":" + std::to_string(static_cast<int>(c.code)) +
                          R"(,"message":"pool 'gpu-a': \"quoted\" reason","details":[]})");
  }
}

struct BadCase {
  verb method;
  std::string target;
  std::string body;
  int http;
  std::string message_part;
};

TEST_F(RestTest, BadRequestsGetClearErrorsAndNeverReachTheService) {
  const BadCase cases[] = {
      {verb::post, "/v1/jobs", R"({"spec": {"tenant": )", 400, "request body: invalid JSON"},
      {verb::post, "/v1/jobs", R"([1, 2])", 400, "the body must be a JSON object"},
      {verb::post, "/v1/jobs", R"({"spec": {"tenant": "a", "bogus": 1}})", 400,
       "unknown field 'bogus' in 'spec'"},
      {verb::post, "/v1/jobs", R"({"jobSpec": {}})", 400, "unknown field 'jobSpec'"},
      {verb::post, "/v1/jobs", R"({"spec": {"taskCount": "many"}})", 400, "task_count"},
      // Issue 16: protobuf's parser took "yes" (and "t", "1") for true.
      {verb::post, "/v1/jobs", R"({"spec": {"tenant": "a", "gang": "yes"}})", 400,
       "request body: field 'spec.gang': expected true or false, got the string"},
      {verb::post, "/v1/jobs", R"({"spec": {"gang": "t"}})", 400,
       "field 'spec.gang': expected true or false"},
      {verb::post, "/v1/jobs", R"({"spec": {"gang": 1}})", 400, "spec.gang"},
      {verb::get, "/v1/jobs?colour=red", "", 400,
       "unknown query parameter 'colour'; this route accepts: tenant, pool, state, pageSize, "
       "pageToken"},
      {verb::get, "/v1/jobs?page_size=lots", "", 400, "query parameter 'pageSize'"},
      {verb::get, "/v1/jobs?state=JOB_STATE_NAPPING", "", 400, "query parameter 'state'"},
      {verb::get, "/v1/jobs?page_size=1&page_size=2", "", 400, "given more than once"},
      {verb::get, "/v1/jobs?tenant=%zz", "", 400, "bad percent-encoding"},
      {verb::get, "/v1/jobs/j-1?verbose=1", "", 400, "unknown query parameter 'verbose'"},
      {verb::get, "/v1/jobs/j-1", R"({"jobId": "x"})", 400, "this route takes no request body"},
      {verb::patch, "/v1/pools/gpu-a", R"({"pool": {"name": "gpu-b"}})", 400,
       "pool.name: the URL says 'gpu-a' but the body says 'gpu-b'"},
      {verb::get, "/v2/jobs", "", 404, "no route for GET /v2/jobs"},
      {verb::get, "/v1/jobs/j-1:explode", "", 404, "no route"},
      {verb::get, "/v1/jobs/", "", 404, "no route"},
      {verb::delete_, "/v1/jobs", "", 405,
       "method DELETE is not allowed on /v1/jobs; allowed: "
       "GET, POST"},
      {verb::put, "/v1/pools/gpu-a", "{}", 405, "allowed: DELETE, GET, PATCH"},
      {verb::get, "/v1/tenants/acme/research", "", 404,
       "no route for GET /v1/tenants/acme/research (send a tenant path as one segment with '/' "
       "encoded as %2F, e.g. /v1/tenants/acme%2Fresearch)"},
      {verb::put, "/v1/quotas/acme/research/gpu-a", "{}", 404, "encoded as %2F"},
      {verb::put, "/v1/quotas/acme/gpu-a", R"({"quota": {"pool": "gpu-b"}})", 400,
       "quota.pool: the URL says 'gpu-a' but the body says 'gpu-b'"},
      {verb::post, "/v1/quotas/acme/gpu-a", "{}", 405, "allowed: DELETE, GET, PUT"},
      {verb::get, "/v1/tenants?tenant=acme", "", 400,
       "unknown query parameter 'tenant'; this route accepts: prefix"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(std::string(http::to_string(c.method)) + " " + c.target + " " + c.body);
    const HttpResult r = Call(c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.http) << r.body;
    EXPECT_NE(r.body.find(c.message_part), std::string::npos) << r.body;
    EXPECT_EQ(r.body.rfind("{\"code\":", 0), 0u) << r.body;
  }
  EXPECT_EQ(fake_.call_count(), 0u);
  const HttpResult r = Call(verb::delete_, "/v1/jobs");
  EXPECT_EQ(r.headers["Allow"], "GET, POST");
}

// Issue 16: error bodies echoed the caller's bytes, invalid UTF-8 included, which made them
// invalid JSON for strict clients.
TEST_F(RestTest, ErrorBodiesNeverEchoInvalidUtf8) {
  fake_.FailWith(Status::NotFound("pool 'gpu-\xff\xfe' not found"));
  HttpResult r = Call(verb::get, "/v1/pools/gpu-%FF%FE");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(IsValidUtf8(r.body)) << r.body;
  EXPECT_NE(r.body.find("pool 'gpu-\xEF\xBF\xBD\xEF\xBF\xBD' not found"), std::string::npos)
      << r.body;
  r = Call(verb::post, "/v1/jobs", "{\"spec\": {\"tenant\": \"\xc3\x28\"}}");
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(IsValidUtf8(r.body)) << r.body;
  r = Call(verb::get, "/v2/\xff\xfe");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(IsValidUtf8(r.body)) << r.body;
}

TEST_F(RestTest, OversizedBodyIs413) {
  const HttpResult r =
      Call(verb::post, "/v1/jobs", R"({"spec": {"tenant": ")" + std::string(2 << 20, 'a') + "\"}}");
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("request body too large: the limit is 1048576 bytes"), std::string::npos)
      << r.body;
  EXPECT_EQ(fake_.call_count(), 0u);
}

TEST_F(RestTest, BodyAndHeaderLimitsAreConfigurable) {
  server_->Shutdown();
  HttpServerOptions options;
  options.max_body_bytes = 64;
  options.max_header_bytes = 1024;
  StartServer(options);
  EXPECT_EQ(Call(verb::post, "/v1/jobs", R"({"spec": {"tenant": "a"}})").status, 200);
  HttpResult r =
      Call(verb::post, "/v1/jobs", R"({"spec": {"tenant": ")" + std::string(100, 'a') + "\"}}");
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("the limit is 64 bytes"), std::string::npos) << r.body;
  r = Call(verb::get, "/v1/jobs", "", {{"X-Padding", std::string(2000, 'x')}});
  EXPECT_EQ(r.status, 431);
  EXPECT_NE(r.body.find("request header too large"), std::string::npos) << r.body;
}

TEST_F(RestTest, ExpectContinueIsAnsweredBeforeTheBody) {
  const std::string body = R"({"spec": {"tenant": "acme"}})";
  HttpClient c(port_);
  c.WriteRaw("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n");
  http::response_parser<http::empty_body> interim;
  http::read_header(c.stream(), c.buffer(), interim);
  EXPECT_EQ(interim.get().result_int(), 100u);
  c.WriteRaw(body);
  const HttpResult r = c.Read();
  EXPECT_EQ(r.status, 200) << r.body;
  ExpectLastRequest("SubmitJob", R"(spec { tenant: "acme" })");

  // Too large a Content-Length is refused before the body is sent.
  HttpClient big(port_);
  big.WriteRaw(
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: 5000000\r\n\r\n");
  EXPECT_EQ(big.Read().status, 413);
}

TEST_F(RestTest, MalformedHttpIs400) {
  HttpClient c(port_);
  c.WriteRaw("GARBAGE\r\n\r\n");
  const HttpResult r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("malformed HTTP request"), std::string::npos) << r.body;
}

TEST_F(RestTest, KeepAliveServesManyRequestsOnOneConnection) {
  HttpClient c(port_);
  for (int i = 0; i < 3; ++i) {
    const HttpResult r = c.Send(verb::get, "/v1/jobs/j-" + std::to_string(i));
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.keep_alive);
  }
  const HttpResult r = c.Send(verb::get, "/v1/nope");  // an error does not end the connection
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(c.Send(verb::get, "/v1/jobs/j-9").status, 200);
  ExpectLastRequest("GetJob", R"(job_id: "j-9")");
}

TEST_F(RestTest, IdleConnectionsAreClosed) {
  server_->Shutdown();
  HttpServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  HttpClient c(port_);
  EXPECT_EQ(c.Send(verb::get, "/healthz").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  testing::beast::error_code ec;
  char byte;
  c.stream().socket().read_some(testing::net::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, testing::net::error::eof);
}

// Issue 16: 1,100 idle connections from one client took REST down for everyone.
TEST_F(RestTest, OneClientCannotHoldMoreThanItsConnections) {
  server_->Shutdown();
  HttpServerOptions options;
  options.max_connections_per_client = 3;
  StartServer(options);
  std::vector<std::unique_ptr<HttpClient>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<HttpClient>(port_));
  // The server accepts in order, so the fourth is judged after the first three are counted.
  HttpClient extra(port_);
  testing::beast::error_code ec;
  char byte;
  extra.stream().socket().read_some(testing::net::buffer(&byte, 1), ec);
  EXPECT_TRUE(ec == testing::net::error::eof || ec == testing::net::error::connection_reset)
      << ec.message();
  EXPECT_EQ(idle[0]->Send(verb::get, "/healthz").status, 200);  // the held ones still serve
  idle.pop_back();  // a place frees up once the server sees the close
  EXPECT_TRUE(WaitFor(
      [&] {
        try {
          HttpClient c(port_);
          return c.Send(verb::get, "/healthz").status == 200;
        } catch (const std::exception&) {
          return false;
        }
      },
      std::chrono::seconds(30)));
}

// At its cap in all, the server makes room by closing the connection that has waited longest
// for a request, so idle connections cannot keep out a client with a request (issue 30).
TEST_F(RestTest, AtItsCapANewConnectionClosesTheOneIdleTheLongest) {
  server_->Shutdown();
  HttpServerOptions options;
  options.max_connections = 3;
  StartServer(options);
  std::vector<std::unique_ptr<HttpClient>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<HttpClient>(port_));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the first waits longest
  }
  HttpClient fresh(port_);
  EXPECT_EQ(fresh.Send(verb::get, "/healthz").status, 200);
  // The oldest was closed; the two others still serve.
  timeval bound{10, 0};  // a bound for a broken server, not the expectation
  setsockopt(idle[0]->stream().socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &bound,
             sizeof(bound));
  testing::beast::error_code ec;
  char byte;
  idle[0]->stream().socket().read_some(testing::net::buffer(&byte, 1), ec);
  EXPECT_TRUE(ec == testing::net::error::eof || ec == testing::net::error::connection_reset)
      << ec.message();
  EXPECT_EQ(idle[2]->Send(verb::get, "/healthz").status, 200);
}

TEST_F(RestTest, AsyncRepliesFromOtherThreads) {
  fake_.ReplyAsync(true);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(Call(verb::get, "/v1/nodes/n" + std::to_string(i)).status, 200);
  }
  fake_.FailWith(Status::NotFound("node 'n': not found"));
  EXPECT_EQ(Call(verb::get, "/v1/nodes/n").status, 404);
}

TEST_F(RestTest, AuthenticationWhenTokensAreConfigured) {
  server_->Shutdown();
  auto auth = Authenticator::Create(
      {{"alice-secret", "acme/research/alice", false}, {"root-secret", "ops", true}});
  ASSERT_TRUE(auth.ok());
  auth_ = std::move(auth).value();
  StartServer();

  struct AuthCase {
    std::string header;
    int http;
    std::string principal;
    bool admin;
  };
  const AuthCase cases[] = {
      {"", 401, "", false},
      {"Bearer wrong", 401, "", false},
      {"Basic YWxpY2U6eA==", 401, "", false},
      {"Bearer", 401, "", false},
      {"Bearer alice-secret", 200, "acme/research/alice", false},
      {"bearer   root-secret ", 200, "", true},
  };
  for (const AuthCase& c : cases) {
    SCOPED_TRACE(c.header);
    std::vector<std::pair<std::string, std::string>> headers;
    if (!c.header.empty()) headers.emplace_back("Authorization", c.header);
    const size_t before = fake_.call_count();
    const HttpResult r = Call(verb::get, "/v1/jobs/j-1", "", headers);
    EXPECT_EQ(r.status, c.http) << r.body;
    if (c.http == 401) {
      EXPECT_EQ(fake_.call_count(), before);
      EXPECT_EQ(r.headers[http::field::www_authenticate], "Bearer realm=\"gpupool\"");
      EXPECT_EQ(r.body.rfind("{\"code\":16,", 0), 0u) << r.body;
      EXPECT_EQ(r.body.find("secret"), std::string::npos) << "tokens never echo: " << r.body;
    } else {
      EXPECT_EQ(fake_.last().ctx.scope, c.principal);
      EXPECT_EQ(fake_.last().ctx.admin(), c.admin);
    }
  }
  // Probes need no token.
  EXPECT_EQ(Call(verb::get, "/healthz").status, 200);
  EXPECT_EQ(Call(verb::get, "/readyz").status, 200);
  EXPECT_EQ(Call(verb::get, "/metrics").status, 200);
}

TEST_F(RestTest, NoTokensMeansEveryoneIsAnAdmin) {
  EXPECT_EQ(Call(verb::get, "/v1/jobs/j-1", "", {{"Authorization", "Bearer anything"}}).status,
            200);
  EXPECT_EQ(fake_.last().ctx.scope, "");
  EXPECT_TRUE(fake_.last().ctx.admin());
}

TEST_F(RestTest, HealthReadinessAndMetrics) {
  HttpResult r = Call(verb::get, "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");

  EXPECT_EQ(Call(verb::get, "/readyz").status, 200);
  fake_.SetReady(Status::Unavailable("database: connection refused"));
  r = Call(verb::get, "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("database: connection refused"), std::string::npos) << r.body;
  EXPECT_EQ(Call(verb::get, "/healthz").status, 200);  // alive, though not ready

  prometheus::BuildCounter()
      .Name("test_things_total")
      .Help("t")
      .Register(*registry_)
      .Add({})
      .Increment(3);
  EXPECT_EQ(Call(verb::get, "/v1/jobs/j-1").status, 200);
  EXPECT_EQ(Call(verb::get, "/v1/nope").status, 404);
  r = Call(verb::get, "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("test_things_total 3"), std::string::npos) << r.body;
  EXPECT_NE(
      r.body.find(
          R"(gpupool_http_requests_total{code="200",method="GET",route="/v1/jobs/{job_id}"} 1)"),
      std::string::npos)
      << r.body;
  EXPECT_NE(
      r.body.find(R"(gpupool_http_requests_total{code="404",method="GET",route="unmatched"} 1)"),
      std::string::npos)
      << r.body;
  EXPECT_NE(
      r.body.find(
          R"(gpupool_http_request_duration_seconds_count{method="GET",route="/v1/jobs/{job_id}"} 1)"),
      std::string::npos)
      << r.body;
}

v1::JobEvent Event(const std::string& message, v1::JobState state) {
  v1::JobEvent e;
  e.set_message(message);
  e.mutable_job()->set_id("j-1");
  e.mutable_job()->set_state(state);
  return e;
}

TEST_F(RestTest, WatchJobStreamsNewlineDelimitedJson) {
  fake_.SetStream({Event("task j-1.0: RUNNING", v1::JOB_STATE_RUNNING),
                   Event("task j-1.0: SUCCEEDED", v1::JOB_STATE_SUCCEEDED)},
                  Status::Ok());
  HttpResult r = Call(verb::get, "/v1/jobs/j-1:watch");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers[http::field::content_type], "application/x-ndjson");
  EXPECT_EQ(r.headers[http::field::transfer_encoding], "chunked");
  ASSERT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 2) << r.body;
  EXPECT_EQ(r.body.rfind(R"({"result":{"job":{"id":"j-1")", 0), 0u) << r.body;
  EXPECT_NE(r.body.find(R"("message":"task j-1.0: SUCCEEDED")"), std::string::npos) << r.body;

  // A failure after items is a last line; before any item, a plain error response.
  fake_.SetStream({Event("task j-1.0: RUNNING", v1::JOB_STATE_RUNNING)},
                  Status::Unavailable("scheduler restarting"));
  r = Call(verb::get, "/v1/jobs/j-1:watch");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\n{\"error\":{\"code\":14,\"message\":\"scheduler restarting\","
                        "\"details\":[]}}\n"),
            std::string::npos)
      << r.body;
  fake_.SetStream({}, Status::NotFound("job 'j-404': not found"));
  r = Call(verb::get, "/v1/jobs/j-404:watch");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"code":5,"message":"job 'j-404': not found","details":[]})");
  fake_.SetStream({}, Status::Ok());
  r = Call(verb::get, "/v1/jobs/j-1:watch");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
}

TEST_F(RestTest, TaskLogsStreamBytesAsBase64) {
  v1::TaskLogChunk chunk;
  chunk.set_offset(0);
  chunk.set_data("hello\n");
  chunk.set_eof(true);
  fake_.SetLogChunks({chunk});
  const HttpResult r = Call(verb::get, "/v1/tasks/j-1.0/logs");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"result\":{\"offset\":\"0\",\"data\":\"aGVsbG8K\",\"eof\":true}}\n");
}

// The real service answers a stream later, from another thread. The REST face once cancelled
// every stream as it registered it, so logs sent no bytes at all and a watch answered only when
// its first event won the race.
TEST_F(RestTest, StreamsAnsweredLaterAreDeliveredAndNotCancelled) {
  fake_.ReplyAsync(true);
  fake_.SetStream({Event("task j-1.0: RUNNING", v1::JOB_STATE_RUNNING)}, Status::Ok());
  v1::TaskLogChunk chunk;
  chunk.set_data("hello\n");
  chunk.set_eof(true);
  fake_.SetLogChunks({chunk});
  for (int i = 0; i < 5; ++i) {
    HttpResult r = Call(verb::get, "/v1/jobs/j-1:watch");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body.rfind(R"({"result":{"job":{"id":"j-1")", 0), 0u) << r.body;
    r = Call(verb::get, "/v1/tasks/j-1.0/logs");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "{\"result\":{\"offset\":\"0\",\"data\":\"aGVsbG8K\",\"eof\":true}}\n");
  }
  fake_.SetStream({}, Status::NotFound("job 'j-404': not found"));
  const HttpResult r = Call(verb::get, "/v1/jobs/j-404:watch");
  EXPECT_EQ(r.status, 404) << r.body;
}

TEST_F(RestTest, ClientHangingUpCancelsTheStream) {
  fake_.SetStream({Event("task j-1.0: RUNNING", v1::JOB_STATE_RUNNING)}, Status::Ok(),
                  /*hold=*/true);
  {
    HttpClient c(port_);
    http::request<http::empty_body> req{verb::get, "/v1/jobs/j-1:watch", 11};
    http::write(c.stream(), req);
    http::response_parser<http::empty_body> parser;
    http::read_header(c.stream(), c.buffer(), parser);
    EXPECT_EQ(parser.get().result_int(), 200u);
  }  // hang up
  EXPECT_TRUE(WaitFor([&] { return fake_.cancels() == 1; }));
}

// Issue 30: a follow of a pending task's logs sent nothing at all, not even a status line.
TEST_F(RestTest, AStreamWithNothingToSendYetAnswersItsStatusLineAtOnce) {
  fake_.SetStream({}, Status::Ok(), /*hold=*/true);
  HttpClient c(port_);
  http::request<http::empty_body> req{verb::get, "/v1/jobs/j-1:watch", 11};
  http::write(c.stream(), req);
  c.stream().expires_after(std::chrono::seconds(3));
  http::response_parser<http::empty_body> parser;
  const auto start = std::chrono::steady_clock::now();
  http::read_header(c.stream(), c.buffer(), parser);
  EXPECT_EQ(parser.get().result_int(), 200u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500));
  EXPECT_EQ(parser.get()[http::field::content_type], "application/x-ndjson");
}

TEST_F(RestTest, ShutdownIsFastAndEndsOpenStreams) {
  fake_.SetStream({Event("task j-1.0: RUNNING", v1::JOB_STATE_RUNNING)}, Status::Ok(),
                  /*hold=*/true);
  HttpClient watcher(port_);
  http::request<http::empty_body> req{verb::get, "/v1/jobs/j-1:watch", 11};
  http::write(watcher.stream(), req);
  http::response_parser<http::empty_body> parser;
  http::read_header(watcher.stream(), watcher.buffer(), parser);
  HttpClient idle(port_);
  EXPECT_EQ(idle.Send(verb::get, "/healthz").status, 200);

  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(fake_.cancels(), 1);
  EXPECT_THROW(HttpCall(port_, verb::get, "/healthz"), std::exception);
}

TEST_F(RestTest, PortInUseIsAClearError) {
  HttpServer second(fake_, auth_, registry_, "127.0.0.1:" + std::to_string(port_));
  const Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("Address already in use"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(port_)), std::string::npos);
  HttpServer bad(fake_, auth_, registry_, "no-port-here");
  EXPECT_EQ(bad.Start().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupool::api
