// The authorization matrix: every RPC of gpupool.v1 and every authenticated REST route, called
// by each role (viewer, member, tenant-admin — all scoped to tenant "acme" — and admin) on the
// caller's own subtree, on another tenant's, and on admin-only objects, against a real gpupoold
// (secure default: TLS, API keys in its embedded PostgreSQL) over loopback.
//
// One table drives it. The RPCs are enumerated from the service descriptors and the routes from
// the REST gateway itself, so a new RPC or route without a row fails the test.
//
// "Allow" means the call was not refused for who the caller is (any code but PERMISSION_DENIED
// and UNAUTHENTICATED: an allowed call may still fail for other reasons, e.g. a node that does
// not exist). "Deny" means PERMISSION_DENIED — or NOT_FOUND where the row says the object is
// hidden (another subtree's API key) — and for REST 403 (404).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <functional>
#include <future>
#include <map>
#include <set>

#include "api/auth.h"
#include "api/rest/routes.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/audit.grpc.pb.h"
#include "gpupool/v1/billing.grpc.pb.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/keys.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/services.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "gpupool/v1/usage.grpc.pb.h"
#include "gpupool/v1/webhooks.grpc.pb.h"
#include "gpupool/v1/whatif.grpc.pb.h"
#include "tests/api/fake_api_service.h"
#include "tests/support/daemon_process.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using google::protobuf::Message;
using testing::DaemonProcess;

enum RoleIdx { kViewer = 0, kMember = 1, kTenantAdmin = 2, kAdmin = 3 };
constexpr const char* kRoleNames[] = {"viewer", "member", "tenant-admin", "admin"};

// The objects a call is aimed at, made fresh for each call where the call would consume them.
struct World;
struct Target {
  std::unique_ptr<Message> request;  // gRPC request
  std::string rest_method;           // "GET"
  std::string rest_target;           // "/v1/jobs/7"
  std::string rest_body;             // JSON, or empty
};
using Make = std::function<Target(World&)>;

struct Row {
  std::string rpc;         // "gpupool.v1.JobService/GetJob"
  std::string rest_route;  // "GET /v1/jobs/{job_id}", or "" when the RPC has no route
  std::string on;          // "own", "other", "admin", "root" (the caller's own scope node),
                           // "sibling" (another member's object in the caller's tenant)
  std::string expect;      // per role, viewer member tenant-admin admin: A allow, D deny
  Make make;
  bool hidden = false;  // deny may be NOT_FOUND
  bool stream = false;
};

// Agent-facing RPCs, authenticated by join tokens and node certificates, not API credentials
// (their rules are tested in tests/api/node_identity_test.cc); listed so that they have a row.
const std::set<std::string> kNotApiCredentialRpcs = {"gpupool.v1.AgentService/Connect",
                                                     "gpupool.v1.NodeEnrollService/Join",
                                                     "gpupool.v1.NodeEnrollService/Renew"};

std::string Json(const Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string Enc(const std::string& path) {
  std::string out;
  for (char c : path) out += c == '/' ? std::string("%2F") : std::string(1, c);
  return out;
}

template <typename T>
std::unique_ptr<Message> Box(T m) {
  return std::make_unique<T>(std::move(m));
}

// The fixture objects and the admin's helpers that make fresh ones.
struct World {
  std::shared_ptr<grpc::Channel> channel;
  std::string admin_token;
  int counter = 0;
  std::map<std::string, std::string> job;  // "own"/"other" → job id
  std::string caller;   // the credential of the role being checked (set before each make)
  std::string sibling;  // another member key of the callers' tenant "acme"

  std::string Fresh(const std::string& prefix) { return prefix + std::to_string(++counter); }

  std::unique_ptr<grpc::ClientContext> AdminCall() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + admin_token);
    return c;
  }
  std::string Tenant(const std::string& on) { return on == "own" ? "acme/team" : "globex/team"; }
  void CreateTenant(const std::string& path) {
    v1::CreateTenantRequest req;
    req.mutable_tenant()->set_path(path);
    v1::Tenant resp;
    auto c = AdminCall();
    grpc::Status st = v1::TenantService::NewStub(channel)->CreateTenant(c.get(), req, &resp);
    ASSERT_TRUE(st.ok() || st.error_code() == grpc::StatusCode::ALREADY_EXISTS)
        << path << ": " << st.error_message();
  }
  v1::Quota Quota(const std::string& tenant) {
    v1::Quota q;
    q.set_tenant(tenant);
    q.set_pool("pub");
    q.mutable_limit()->set_devices(1);
    return q;
  }
  void SetQuota(const std::string& tenant) {
    v1::SetQuotaRequest req;
    *req.mutable_quota() = Quota(tenant);
    v1::Quota resp;
    auto c = AdminCall();
    grpc::Status st = v1::TenantService::NewStub(channel)->SetQuota(c.get(), req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  v1::SubmitJobRequest Submit(const std::string& tenant) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant(tenant);
    s->set_pool("pub");
    s->set_task_count(1);
    s->mutable_template_()->add_command("/bin/true");
    s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
    return req;
  }
  std::string SubmitJob(const std::string& tenant) {
    v1::SubmitJobResponse resp;
    auto c = AdminCall();
    grpc::Status st = v1::JobService::NewStub(channel)->SubmitJob(c.get(), Submit(tenant), &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }
  // A job submitted with `credential`; "" when that credential may not submit.
  std::string SubmitJobAs(const std::string& tenant, const std::string& credential) {
    v1::SubmitJobResponse resp;
    grpc::ClientContext c;
    c.AddMetadata("authorization", "Bearer " + credential);
    grpc::Status st = v1::JobService::NewStub(channel)->SubmitJob(&c, Submit(tenant), &resp);
    return st.ok() ? resp.job_id() : "";
  }
  void CreatePool(const std::string& name) {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name(name);
    req.mutable_pool()->set_visibility(v1::VISIBILITY_PUBLIC);
    v1::Pool resp;
    auto c = AdminCall();
    grpc::Status st = v1::PoolService::NewStub(channel)->CreatePool(c.get(), req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  v1::PricePlan Plan(const std::string& name) {
    v1::PricePlan p;
    p.set_name(name);
    p.set_currency("USD");
    v1::PriceRate* r = p.add_rates();
    r->set_unit("tflops-hour");
    r->set_price("0.45");
    return p;
  }
  void CreatePricePlan(const std::string& name) {
    v1::CreatePricePlanRequest req;
    *req.mutable_plan() = Plan(name);
    v1::PricePlan resp;
    auto c = AdminCall();
    grpc::Status st = v1::BillingService::NewStub(channel)->CreatePricePlan(c.get(), req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  // A new registry credential of `tenant`; returns its name.
  std::string CreateRegistryCredential(const std::string& tenant) {
    v1::CreateRegistryCredentialRequest req;
    req.mutable_credential()->set_name(Fresh("cred"));
    req.mutable_credential()->set_tenant(tenant);
    req.mutable_credential()->set_registry("registry.acme.example");
    req.mutable_credential()->set_username("robot");
    req.mutable_credential()->set_secret("s3cret");
    v1::RegistryCredential resp;
    auto c = AdminCall();
    grpc::Status st =
        v1::KeyService::NewStub(channel)->CreateRegistryCredential(c.get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.name();
  }
  // A new webhook of `tenant` (to an endpoint that never answers); returns its id.
  int64_t CreateWebhook(const std::string& tenant) {
    v1::CreateWebhookRequest req;
    req.mutable_webhook()->set_tenant(tenant);
    req.mutable_webhook()->set_url("https://hooks.acme.invalid/gpupool");
    v1::CreateWebhookResponse resp;
    auto c = AdminCall();
    grpc::Status st = v1::WebhookService::NewStub(channel)->CreateWebhook(c.get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.webhook().id();
  }
  // A service of `tenant` with no replicas (min 0), created by an admin; returns its name.
  static v1::Service ServiceOf(const std::string& tenant, const std::string& name) {
    v1::Service sv;
    sv.set_name(name);
    sv.set_tenant(tenant);
    sv.set_pool("pub");
    sv.set_max_replicas(1);
    sv.mutable_template_()->add_command("/bin/true");
    sv.mutable_template_()->add_ports()->set_port(8080);
    auto* f = sv.mutable_template_()->mutable_resources()->mutable_fractional();
    f->set_milli_tflops(1000);
    f->set_vram_mib(1024);
    sv.set_port(8080);
    return sv;
  }
  std::string CreateService(const std::string& tenant) {
    v1::CreateServiceRequest req;
    *req.mutable_service() = ServiceOf(tenant, Fresh("svc"));
    v1::Service resp;
    auto c = AdminCall();
    grpc::Status st = v1::ServiceService::NewStub(channel)->CreateService(c.get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.name();
  }
  // A new key; returns {id, secret}.
  std::pair<std::string, std::string> CreateKey(const std::string& tenant,
                                                const std::string& role) {
    v1::CreateApiKeyRequest req;
    req.mutable_key()->set_name(Fresh("k"));
    req.mutable_key()->set_tenant(tenant);
    req.mutable_key()->set_role(role);
    v1::CreateApiKeyResponse resp;
    auto c = AdminCall();
    grpc::Status st = v1::KeyService::NewStub(channel)->CreateApiKey(c.get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return {resp.key().id(), resp.secret()};
  }
};

std::vector<Row> Table() {
  std::vector<Row> rows;
  auto add = [&](std::string rpc, std::string route, std::string on, std::string expect, Make m,
                 bool hidden = false, bool stream = false) {
    rows.push_back({"gpupool.v1." + rpc, std::move(route), std::move(on), std::move(expect),
                    std::move(m), hidden, stream});
  };
  // ---- JobService ----
  for (const std::string on : {"own", "other"}) {
    const bool own = on == "own";
    add("JobService/SubmitJob", "POST /v1/jobs", on, own ? "DAAA" : "DDDA", [on](World& w) {
      v1::SubmitJobRequest r = w.Submit(w.Tenant(on));
      return Target{Box(r), "POST", "/v1/jobs", Json(r)};
    });
    add("JobService/GetJob", "GET /v1/jobs/{job_id}", on, own ? "AAAA" : "DDDA", [on](World& w) {
      v1::GetJobRequest r;
      r.set_job_id(w.job[on]);
      return Target{Box(r), "GET", "/v1/jobs/" + w.job[on], ""};
    });
    add("JobService/ListJobs", "GET /v1/jobs", on, own ? "AAAA" : "DDDA", [on](World& w) {
      v1::ListJobsRequest r;
      r.set_tenant(w.Tenant(on));
      return Target{Box(r), "GET", "/v1/jobs?tenant=" + Enc(w.Tenant(on)), ""};
    });
    // "own": a job the caller submitted itself (a viewer cannot submit: the admin's job).
    add("JobService/CancelJob", "POST /v1/jobs/{job_id}:cancel", on, own ? "DAAA" : "DDDA",
        [on](World& w) {
          std::string id = on == "own" ? w.SubmitJobAs(w.Tenant(on), w.caller) : "";
          if (id.empty()) id = w.SubmitJob(w.Tenant(on));
          v1::CancelJobRequest r;
          r.set_job_id(id);
          return Target{Box(r), "POST", "/v1/jobs/" + id + ":cancel", "{}"};
        });
    add(
        "JobService/WatchJob", "GET /v1/jobs/{job_id}:watch", on, own ? "AAAA" : "DDDA",
        [on](World& w) {
          v1::WatchJobRequest r;
          r.set_job_id(w.job[on]);
          return Target{Box(r), "GET", "/v1/jobs/" + w.job[on] + ":watch", ""};
        },
        false, true);
    add(
        "JobService/GetTaskLogs", "GET /v1/tasks/{task_id}/logs", on, own ? "AAAA" : "DDDA",
        [on](World& w) {
          v1::GetTaskLogsRequest r;
          r.set_task_id(w.job[on] + ".0");
          return Target{Box(r), "GET", "/v1/tasks/" + w.job[on] + ".0/logs", ""};
        },
        false, true);
  }
  // A job of the callers' own tenant submitted by another member: a member may cancel only the
  // jobs it submitted, a tenant-admin any job of its subtree.
  add("JobService/CancelJob", "POST /v1/jobs/{job_id}:cancel", "sibling", "DDAA", [](World& w) {
    const std::string id = w.SubmitJobAs(w.Tenant("own"), w.sibling);
    v1::CancelJobRequest r;
    r.set_job_id(id);
    return Target{Box(r), "POST", "/v1/jobs/" + id + ":cancel", "{}"};
  });
  // ---- PoolService, NodeService, CatalogService: admin objects ----
  add("PoolService/CreatePool", "POST /v1/pools", "admin", "DDDA", [](World& w) {
    v1::CreatePoolRequest r;
    r.mutable_pool()->set_name(w.Fresh("p"));
    r.mutable_pool()->set_visibility(v1::VISIBILITY_PUBLIC);
    return Target{Box(r), "POST", "/v1/pools", Json(r)};
  });
  add("PoolService/GetPool", "GET /v1/pools/{name}", "admin", "AAAA", [](World&) {
    v1::GetPoolRequest r;
    r.set_name("pub");
    return Target{Box(r), "GET", "/v1/pools/pub", ""};
  });
  add("PoolService/ListPools", "GET /v1/pools", "admin", "AAAA", [](World&) {
    return Target{Box(v1::ListPoolsRequest()), "GET", "/v1/pools", ""};
  });
  add("PoolService/UpdatePool", "PATCH /v1/pools/{pool.name}", "admin", "DDDA", [](World&) {
    v1::UpdatePoolRequest r;
    r.mutable_pool()->set_name("pub");
    r.mutable_pool()->set_compute_overcommit(1.0);
    return Target{Box(r), "PATCH", "/v1/pools/pub", Json(r)};
  });
  add("PoolService/DeletePool", "DELETE /v1/pools/{name}", "admin", "DDDA", [](World& w) {
    const std::string name = w.Fresh("d");
    w.CreatePool(name);
    v1::DeletePoolRequest r;
    r.set_name(name);
    return Target{Box(r), "DELETE", "/v1/pools/" + name, ""};
  });
  add("NodeService/ListNodes", "GET /v1/nodes", "admin", "DDDA", [](World&) {
    return Target{Box(v1::ListNodesRequest()), "GET", "/v1/nodes", ""};
  });
  add("NodeService/GetNode", "GET /v1/nodes/{name}", "admin", "DDDA", [](World&) {
    v1::GetNodeRequest r;
    r.set_name("n1");
    return Target{Box(r), "GET", "/v1/nodes/n1", ""};
  });
  for (const std::string verb : {"Cordon", "Uncordon", "Drain", "Fence"}) {
    std::string lower = verb;
    lower[0] = static_cast<char>(std::tolower(lower[0]));
    add("NodeService/" + verb + "Node", "POST /v1/nodes/{name}:" + lower, "admin", "DDDA",
        [lower](World&) {
          v1::NodeActionRequest r;
          r.set_name("n1");
          return Target{Box(r), "POST", "/v1/nodes/n1:" + lower, "{}"};
        });
  }
  add("NodeService/ClearDeviceFault", "POST /v1/nodes/{node}/devices/{device}:clear-fault", "admin",
      "DDDA", [](World&) {
        v1::ClearDeviceFaultRequest r;
        r.set_node("n1");
        r.set_device("GPU-0");
        return Target{Box(r), "POST", "/v1/nodes/n1/devices/GPU-0:clear-fault", "{}"};
      });
  add("NodeService/SetDeviceSlots", "POST /v1/nodes/{node}/devices/{device}:set-slots", "admin",
      "DDDA", [](World&) {
        v1::SetDeviceSlotsRequest r;
        r.set_node("n1");
        r.set_device("GPU-0");
        r.set_slots(2);
        return Target{Box(r), "POST", "/v1/nodes/n1/devices/GPU-0:set-slots", R"({"slots": 2})"};
      });
  add("NodeService/SetMigLayout", "POST /v1/nodes/{node}/gpus/{gpu}:set-mig-layout", "admin",
      "DDDA", [](World&) {
        v1::SetMigLayoutRequest r;
        r.set_node("n1");
        r.set_gpu("GPU-0");
        r.set_layout("7g.80gb@0");
        return Target{Box(r), "POST", "/v1/nodes/n1/gpus/GPU-0:set-mig-layout",
                      R"({"layout": "7g.80gb@0"})"};
      });
  add("CatalogService/ListGpuModels", "GET /v1/catalog", "admin", "AAAA", [](World&) {
    return Target{Box(v1::ListGpuModelsRequest()), "GET", "/v1/catalog", ""};
  });
  add("CatalogService/ListSkus", "GET /v1/skus", "admin", "AAAA", [](World&) {
    return Target{Box(v1::ListSkusRequest()), "GET", "/v1/skus", ""};
  });
  // A tenant sees the classes it (or a tenant below it) may use; another tenant's are refused.
  for (const std::string on : {"own", "other"}) {
    add("CatalogService/ListPriorityClasses", "GET /v1/priority-classes", on,
        on == "own" ? "AAAA" : "DDDA", [on](World& w) {
          v1::ListPriorityClassesRequest r;
          r.set_tenant(w.Tenant(on));
          return Target{Box(r), "GET", "/v1/priority-classes?tenant=" + Enc(w.Tenant(on)), ""};
        });
  }
  add("NodeEnrollService/RevokeNode", "", "admin", "DDDA", [](World&) {
    v1::RevokeNodeRequest r;
    r.set_node_name("n1");
    return Target{Box(r), "", "", ""};
  });
  // Join tokens: admins only (they buy node certificates).
  add("NodeEnrollService/CreateJoinToken", "", "admin", "DDDA", [](World&) {
    v1::CreateJoinTokenRequest r;
    r.set_ttl_seconds(60);
    r.set_max_uses(1);
    return Target{Box(r), "", "", ""};
  });
  add("NodeEnrollService/ListJoinTokens", "", "admin", "DDDA", [](World&) {
    return Target{Box(v1::ListJoinTokensRequest()), "", "", ""};
  });
  add("NodeEnrollService/RevokeJoinToken", "", "admin", "DDDA", [](World&) {
    v1::RevokeJoinTokenRequest r;
    r.set_id("000000000000");  // unknown: an admin gets NOT_FOUND, which the matrix counts allowed
    return Target{Box(r), "", "", ""};
  });
  // ---- TenantService ----
  for (const std::string on : {"own", "other", "root"}) {
    const std::string t = on == "own" ? "acme/team" : on == "other" ? "globex/team" : "acme";
    const std::string read = on == "other" ? "DDDA" : "AAAA";
    const std::string change = on == "own" ? "DDAA" : "DDDA";
    add("TenantService/CreateTenant", "POST /v1/tenants", on, change, [t](World& w) {
      v1::CreateTenantRequest r;
      r.mutable_tenant()->set_path(t == "acme" ? w.Fresh("newroot") : t + "/" + w.Fresh("c"));
      return Target{Box(r), "POST", "/v1/tenants", Json(r)};
    });
    add("TenantService/GetTenant", "GET /v1/tenants/{path}", on, read, [t](World&) {
      v1::GetTenantRequest r;
      r.set_path(t);
      return Target{Box(r), "GET", "/v1/tenants/" + Enc(t), ""};
    });
    add("TenantService/ListTenants", "GET /v1/tenants", on, read, [t](World&) {
      v1::ListTenantsRequest r;
      r.set_prefix(t);
      return Target{Box(r), "GET", "/v1/tenants?prefix=" + Enc(t), ""};
    });
    add("TenantService/DeleteTenant", "DELETE /v1/tenants/{path}", on, change, [t](World& w) {
      // A fresh leaf: below t, or for the scope root a fresh top-level tenant (not below acme).
      const std::string leaf = t == "acme" ? w.Fresh("gone") : t + "/" + w.Fresh("gone");
      w.CreateTenant(leaf);
      v1::DeleteTenantRequest r;
      r.set_path(leaf);
      return Target{Box(r), "DELETE", "/v1/tenants/" + Enc(leaf), ""};
    });
    add("TenantService/SetQuota", "PUT /v1/quotas/{quota.tenant}/{quota.pool}", on, change,
        [t](World& w) {
          v1::SetQuotaRequest r;
          *r.mutable_quota() = w.Quota(t);
          return Target{Box(r), "PUT", "/v1/quotas/" + Enc(t) + "/pub", Json(r)};
        });
    add("TenantService/GetQuota", "GET /v1/quotas/{tenant}/{pool}", on, read, [t](World&) {
      v1::GetQuotaRequest r;
      r.set_tenant(t);
      r.set_pool("pub");
      return Target{Box(r), "GET", "/v1/quotas/" + Enc(t) + "/pub", ""};
    });
    add("TenantService/ListQuotas", "GET /v1/quotas", on, read, [t](World&) {
      v1::ListQuotasRequest r;
      r.set_tenant_prefix(t);
      return Target{Box(r), "GET", "/v1/quotas?tenantPrefix=" + Enc(t), ""};
    });
    add("TenantService/DeleteQuota", "DELETE /v1/quotas/{tenant}/{pool}", on, change,
        [t](World& w) {
          w.SetQuota(t);
          v1::DeleteQuotaRequest r;
          r.set_tenant(t);
          r.set_pool("pub");
          return Target{Box(r), "DELETE", "/v1/quotas/" + Enc(t) + "/pub", ""};
        });
  }
  // ---- AuditService: a tenant-admin reads its own subtree's records (the scope is implied) ----
  add("AuditService/ListAuditRecords", "GET /v1/audit", "own", "DDAA", [](World&) {
    v1::ListAuditRecordsRequest r;
    return Target{Box(r), "GET", "/v1/audit", ""};
  });
  // ---- UsageService: every role reads its own subtree's usage; another's only an admin ----
  for (const std::string on : {"own", "other"}) {
    add("UsageService/GetUsage", "GET /v1/usage", on, on == "own" ? "AAAA" : "DDDA",
        [on](World& w) {
          v1::GetUsageRequest r;
          r.set_tenant(w.Tenant(on));
          return Target{Box(r), "GET", "/v1/usage?tenant=" + Enc(w.Tenant(on)), ""};
        });
  }
  // ---- WhatIfService: admins only (it replays every tenant's recent workload) ----
  add("WhatIfService/Compare", "POST /v1/whatif", "admin", "DDDA", [](World&) {
    v1::CompareWhatIfRequest r;
    r.set_pool("pub");
    r.set_window("1h");
    return Target{Box(r), "POST", "/v1/whatif", Json(r)};
  });
  // ---- KeyService ----
  for (const std::string on : {"own", "other"}) {
    const bool own = on == "own";
    add("KeyService/CreateApiKey", "POST /v1/apikeys", on, own ? "DDAA" : "DDDA", [on](World& w) {
      v1::CreateApiKeyRequest r;
      r.mutable_key()->set_name(w.Fresh("n"));
      r.mutable_key()->set_tenant(w.Tenant(on));
      r.mutable_key()->set_role("member");
      return Target{Box(r), "POST", "/v1/apikeys", Json(r)};
    });
    add("KeyService/ListApiKeys", "GET /v1/apikeys", on, own ? "DDAA" : "DDDA", [on](World& w) {
      v1::ListApiKeysRequest r;
      r.set_tenant(w.Tenant(on));
      return Target{Box(r), "GET", "/v1/apikeys?tenant=" + Enc(w.Tenant(on)), ""};
    });
    add(
        "KeyService/RevokeApiKey", "POST /v1/apikeys/{id}:revoke", on, own ? "DDAA" : "DDDA",
        [on](World& w) {
          const std::string id = w.CreateKey(w.Tenant(on), "viewer").first;
          v1::RevokeApiKeyRequest r;
          r.set_id(id);
          return Target{Box(r), "POST", "/v1/apikeys/" + id + ":revoke", "{}"};
        },
        /*hidden=*/true);
  }
  // Registry credentials: kept by a tenant-admin for its subtree; names listed to its users.
  for (const std::string on : {"own", "other"}) {
    const bool own = on == "own";
    add("KeyService/CreateRegistryCredential", "POST /v1/registrycredentials", on,
        own ? "DDAA" : "DDDA", [on](World& w) {
          v1::CreateRegistryCredentialRequest r;
          r.mutable_credential()->set_name(w.Fresh("cred"));
          r.mutable_credential()->set_tenant(w.Tenant(on));
          r.mutable_credential()->set_registry("registry.acme.example");
          r.mutable_credential()->set_username("robot");
          r.mutable_credential()->set_secret("s3cret");
          return Target{Box(r), "POST", "/v1/registrycredentials", Json(r)};
        });
    // Another subtree's are filtered out of the answer rather than refused.
    add("KeyService/ListRegistryCredentials", "GET /v1/registrycredentials", on, "AAAA",
        [on](World& w) {
          v1::ListRegistryCredentialsRequest r;
          r.set_tenant(w.Tenant(on));
          return Target{Box(r), "GET", "/v1/registrycredentials?tenant=" + Enc(w.Tenant(on)), ""};
        });
    add(
        "KeyService/DeleteRegistryCredential", "DELETE /v1/registrycredentials/{tenant}/{name}", on,
        own ? "DDAA" : "DDDA",
        [on](World& w) {
          v1::DeleteRegistryCredentialRequest r;
          r.set_tenant(w.Tenant(on));
          r.set_name(w.CreateRegistryCredential(r.tenant()));
          return Target{Box(r), "DELETE",
                        "/v1/registrycredentials/" + Enc(r.tenant()) + "/" + r.name(), ""};
        },
        /*hidden=*/true);
  }
  // Webhooks: a tenant-admin's for its subtree, another subtree's hidden.
  for (const std::string on : {"own", "other"}) {
    const bool own = on == "own";
    const std::string expect = own ? "DDAA" : "DDDA";
    add("WebhookService/CreateWebhook", "POST /v1/webhooks", on, expect, [on](World& w) {
      v1::CreateWebhookRequest r;
      r.mutable_webhook()->set_tenant(w.Tenant(on));
      r.mutable_webhook()->set_url("https://hooks.acme.invalid/gpupool");
      return Target{Box(r), "POST", "/v1/webhooks", Json(r)};
    });
    add("WebhookService/ListWebhooks", "GET /v1/webhooks", on, expect, [on](World& w) {
      v1::ListWebhooksRequest r;
      r.set_tenant(w.Tenant(on));
      return Target{Box(r), "GET", "/v1/webhooks?tenant=" + Enc(w.Tenant(on)), ""};
    });
    add(
        "WebhookService/GetWebhook", "GET /v1/webhooks/{id}", on, expect,
        [on](World& w) {
          v1::GetWebhookRequest r;
          r.set_id(std::to_string(w.CreateWebhook(w.Tenant(on))));
          return Target{Box(r), "GET", "/v1/webhooks/" + r.id(), ""};
        },
        /*hidden=*/true);
    add(
        "WebhookService/DeleteWebhook", "DELETE /v1/webhooks/{id}", on, expect,
        [on](World& w) {
          v1::DeleteWebhookRequest r;
          r.set_id(std::to_string(w.CreateWebhook(w.Tenant(on))));
          return Target{Box(r), "DELETE", "/v1/webhooks/" + r.id(), ""};
        },
        /*hidden=*/true);
    add(
        "WebhookService/EnableWebhook", "POST /v1/webhooks/{id}:enable", on, expect,
        [on](World& w) {
          v1::EnableWebhookRequest r;
          r.set_id(std::to_string(w.CreateWebhook(w.Tenant(on))));
          return Target{Box(r), "POST", "/v1/webhooks/" + r.id() + ":enable", Json(r)};
        },
        /*hidden=*/true);
  }
  // Services: members create them in their subtree and change the ones they created (these are
  // an admin's: a member may not), tenant-admins any of their subtree's; anyone in it reads.
  for (const std::string on : {"own", "other"}) {
    const bool own = on == "own";
    add("ServiceService/CreateService", "POST /v1/services", on, own ? "DAAA" : "DDDA",
        [on](World& w) {
          v1::CreateServiceRequest r;
          *r.mutable_service() = World::ServiceOf(w.Tenant(on), w.Fresh("svc"));
          return Target{Box(r), "POST", "/v1/services", Json(r)};
        });
    add(
        "ServiceService/GetService", "GET /v1/services/{tenant}/{name}", on, own ? "AAAA" : "DDDA",
        [on](World& w) {
          v1::GetServiceRequest r;
          r.set_tenant(w.Tenant(on));
          r.set_name(w.CreateService(r.tenant()));
          return Target{Box(r), "GET", "/v1/services/" + Enc(r.tenant()) + "/" + r.name(), ""};
        },
        /*hidden=*/true);
    add("ServiceService/ListServices", "GET /v1/services", on, own ? "AAAA" : "DDDA",
        [on](World& w) {
          v1::ListServicesRequest r;
          r.set_tenant(w.Tenant(on));
          return Target{Box(r), "GET", "/v1/services?tenant=" + Enc(w.Tenant(on)), ""};
        });
    add(
        "ServiceService/UpdateService", "PUT /v1/services/{service.tenant}/{service.name}", on,
        own ? "DDAA" : "DDDA",
        [on](World& w) {
          v1::UpdateServiceRequest r;
          *r.mutable_service() = World::ServiceOf(w.Tenant(on), w.CreateService(w.Tenant(on)));
          r.mutable_service()->set_max_replicas(2);
          return Target{Box(r), "PUT",
                        "/v1/services/" + Enc(r.service().tenant()) + "/" + r.service().name(),
                        Json(r)};
        },
        /*hidden=*/true);
    add(
        "ServiceService/RollbackService", "POST /v1/services/{tenant}/{name}:rollback", on,
        own ? "DDAA" : "DDDA",
        [on](World& w) {
          v1::RollbackServiceRequest r;
          r.set_tenant(w.Tenant(on));
          r.set_name(w.CreateService(r.tenant()));
          return Target{Box(r), "POST",
                        "/v1/services/" + Enc(r.tenant()) + "/" + r.name() + ":rollback", "{}"};
        },
        /*hidden=*/true);
    add(
        "ServiceService/DeleteService", "DELETE /v1/services/{tenant}/{name}", on,
        own ? "DDAA" : "DDDA",
        [on](World& w) {
          v1::DeleteServiceRequest r;
          r.set_tenant(w.Tenant(on));
          r.set_name(w.CreateService(r.tenant()));
          return Target{Box(r), "DELETE", "/v1/services/" + Enc(r.tenant()) + "/" + r.name(), ""};
        },
        /*hidden=*/true);
  }
  // No escalation: a key with more reach than its creator.
  add("KeyService/CreateApiKey", "POST /v1/apikeys", "root", "DDDA", [](World& w) {
    v1::CreateApiKeyRequest r;
    r.mutable_key()->set_name(w.Fresh("n"));
    r.mutable_key()->set_tenant("");
    r.mutable_key()->set_role("admin");
    return Target{Box(r), "POST", "/v1/apikeys", Json(r)};
  });
  // ---- BillingService: plans are the admins'; invoices and the feed a tenant-admin's subtree ----
  add("BillingService/CreatePricePlan", "POST /v1/priceplans", "admin", "DDDA", [](World& w) {
    v1::CreatePricePlanRequest r;
    *r.mutable_plan() = w.Plan(w.Fresh("plan"));
    return Target{Box(r), "POST", "/v1/priceplans", Json(r)};
  });
  add("BillingService/UpdatePricePlan", "PUT /v1/priceplans/{plan.name}", "admin", "DDDA",
      [](World& w) {
        const std::string name = w.Fresh("plan");
        w.CreatePricePlan(name);
        v1::UpdatePricePlanRequest r;
        *r.mutable_plan() = w.Plan(name);
        return Target{Box(r), "PUT", "/v1/priceplans/" + name, Json(r)};
      });
  add("BillingService/ListPricePlans", "GET /v1/priceplans", "own", "DDAA", [](World&) {
    return Target{Box(v1::ListPricePlansRequest()), "GET", "/v1/priceplans", ""};
  });
  for (const std::string on : {"own", "other"}) {
    const std::string expect = on == "own" ? "DDAA" : "DDDA";
    for (const std::string rpc : {"ListInvoices", "ExportInvoices"}) {
      const std::string path = rpc == "ListInvoices" ? "/v1/invoices" : "/v1/invoices.csv";
      add("BillingService/" + rpc, "GET " + path, on, expect, [on, path](World& w) {
        v1::ListInvoicesRequest r;
        r.set_tenant(w.Tenant(on));
        r.set_period("2026-11");
        return Target{Box(r), "GET", path + "?tenant=" + Enc(w.Tenant(on)) + "&period=2026-11", ""};
      });
    }
    for (const std::string rpc : {"GetUsageFeed", "ExportUsageFeed"}) {
      const std::string path = rpc == "GetUsageFeed" ? "/v1/usage-feed" : "/v1/usage-feed.csv";
      add("BillingService/" + rpc, "GET " + path, on, expect, [on, path](World& w) {
        v1::GetUsageFeedRequest r;
        r.set_tenant(w.Tenant(on));
        r.set_period("2026-11");
        return Target{Box(r), "GET", path + "?tenant=" + Enc(w.Tenant(on)) + "&period=2026-11", ""};
      });
    }
    // Budgets: as the invoices, a tenant-admin's for its own subtree.
    add("BillingService/SetBudget", "PUT /v1/budgets/{budget.tenant}", on, expect, [on](World& w) {
      v1::SetBudgetRequest r;
      r.mutable_budget()->set_tenant(w.Tenant(on));
      r.mutable_budget()->set_amount("100");
      return Target{Box(r), "PUT", "/v1/budgets/" + Enc(w.Tenant(on)), Json(r)};
    });
    add("BillingService/ListBudgets", "GET /v1/budgets", on, expect, [on](World& w) {
      v1::ListBudgetsRequest r;
      r.set_tenant(w.Tenant(on));
      return Target{Box(r), "GET", "/v1/budgets?tenant=" + Enc(w.Tenant(on)), ""};
    });
    add("BillingService/DeleteBudget", "DELETE /v1/budgets/{tenant}", on, expect, [on](World& w) {
      v1::DeleteBudgetRequest r;
      r.set_tenant(w.Tenant(on));
      return Target{Box(r), "DELETE", "/v1/budgets/" + Enc(w.Tenant(on)), ""};
    });
  }
  return rows;
}

// ---- calling ----

grpc::Status CallGrpc(const std::shared_ptr<grpc::Channel>& channel, const std::string& rpc,
                      const Message& req, const std::string& credential, bool stream) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + credential);
  // An allowed stream stays open: its deadline passing is "not refused".
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(stream ? 3 : 30));
  std::string bytes;
  req.SerializeToString(&bytes);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer in(&slice, 1), out;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/" + rpc, grpc::StubOptions(), &in, &out,
                 [&done](grpc::Status st) { done.set_value(std::move(st)); });
  return done.get_future().get();
}

// The HTTP status of one REST call over TLS (only the head is read: a stream answers 200 once
// its first line is written).
int CallRest(int port, const std::string& ca_pem, const Target& t, const std::string& credential) {
  net::io_context ioc;
  net::ssl::context ctx(net::ssl::context::tls_client);
  ctx.add_certificate_authority(net::buffer(ca_pem));
  ctx.set_verify_mode(net::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> s(ioc, ctx);
  beast::get_lowest_layer(s).expires_after(std::chrono::seconds(30));
  beast::get_lowest_layer(s).connect(
      net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  s.handshake(net::ssl::stream_base::client);
  http::request<http::string_body> req{http::string_to_verb(t.rest_method), t.rest_target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::authorization, "Bearer " + credential);
  if (!t.rest_body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = t.rest_body;
  }
  req.prepare_payload();
  http::write(s, req);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  http::read_header(s, buf, parser);
  return static_cast<int>(parser.get().result_int());
}

bool Denied(grpc::StatusCode c, bool hidden) {
  return c == grpc::StatusCode::PERMISSION_DENIED || (hidden && c == grpc::StatusCode::NOT_FOUND);
}
bool Refused(grpc::StatusCode c) {
  return c == grpc::StatusCode::PERMISSION_DENIED || c == grpc::StatusCode::UNAUTHENTICATED;
}

class AuthzMatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start({.data_dir = "", .extra_args = {}, .secure = true});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    world_.channel = daemon_->Channel();
    world_.admin_token = daemon_->admin_token();
    world_.CreatePool("pub");
    for (const char* t : {"acme", "acme/team", "globex", "globex/team"}) world_.CreateTenant(t);
    world_.SetQuota("acme");
    world_.job["own"] = world_.SubmitJob("acme/team");
    world_.job["other"] = world_.SubmitJob("globex/team");
    for (int r = kViewer; r <= kTenantAdmin; ++r) {
      credential_[r] = world_.CreateKey("acme", kRoleNames[r]).second;
    }
    credential_[kAdmin] = world_.admin_token;
    world_.sibling = world_.CreateKey("acme", "member").second;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  World world_;
  std::string credential_[4];
};

TEST_F(AuthzMatrix, EveryRpcAndRouteHasARow) {
  const std::vector<Row> rows = Table();
  std::set<std::string> rpcs_with_rows, routes_with_rows;
  for (const Row& r : rows) {
    rpcs_with_rows.insert(r.rpc);
    if (!r.rest_route.empty()) routes_with_rows.insert(r.rest_route);
  }
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const char* file :
       {"gpupool/v1/jobs.proto", "gpupool/v1/pools.proto", "gpupool/v1/tenants.proto",
        "gpupool/v1/keys.proto", "gpupool/v1/agent.proto", "gpupool/v1/audit.proto",
        "gpupool/v1/billing.proto", "gpupool/v1/usage.proto", "gpupool/v1/whatif.proto",
        "gpupool/v1/services.proto", "gpupool/v1/webhooks.proto"}) {
    const auto* f = pool->FindFileByName(file);
    ASSERT_NE(f, nullptr) << file;
    for (int s = 0; s < f->service_count(); ++s) {
      for (int m = 0; m < f->service(s)->method_count(); ++m) {
        const std::string rpc = f->service(s)->full_name() + "/" + f->service(s)->method(m)->name();
        EXPECT_TRUE(rpcs_with_rows.count(rpc) || kNotApiCredentialRpcs.count(rpc))
            << rpc << " has no row in the authorization matrix";
      }
    }
  }
  api::testing::FakeApiService fake;
  api::Authenticator off;
  api::rest::RestApi rest(fake, off, nullptr);
  for (const std::string& route : rest.AuthenticatedRoutes()) {
    EXPECT_TRUE(routes_with_rows.count(route)) << route << " has no row in the matrix";
  }
}

TEST_F(AuthzMatrix, EachRoleIsAllowedExactlyWhatTheTableSays) {
  const std::string ca = daemon_->ca_pem();
  int checked = 0;
  for (const Row& row : Table()) {
    for (int role = kViewer; role <= kAdmin; ++role) {
      const bool allow = row.expect[role] == 'A';
      SCOPED_TRACE(row.rpc + " on " + row.on + " as " + kRoleNames[role]);
      world_.caller = credential_[role];
      {
        Target t = row.make(world_);
        const grpc::Status st =
            CallGrpc(world_.channel, row.rpc, *t.request, credential_[role], row.stream);
        if (allow) {
          EXPECT_FALSE(Refused(st.error_code()))
              << "gRPC refused: " << st.error_code() << " " << st.error_message();
        } else {
          EXPECT_TRUE(Denied(st.error_code(), row.hidden))
              << "gRPC not denied: " << st.error_code() << " " << st.error_message();
        }
        ++checked;
      }
      if (row.rest_route.empty()) continue;
      Target t = row.make(world_);
      const int code = CallRest(daemon_->http_port(), ca, t, credential_[role]);
      if (allow) {
        EXPECT_TRUE(code != 401 && code != 403) << "REST " << t.rest_target << ": " << code;
      } else {
        EXPECT_TRUE(code == 403 || (row.hidden && code == 404))
            << "REST " << t.rest_method << " " << t.rest_target << ": " << code;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

// A member cancels only the jobs it submitted: the job records its submitter (shown on GetJob),
// a sibling member of the same tenant is PERMISSION_DENIED naming why and audited as itself, the
// submitter and a tenant-admin succeed.
TEST_F(AuthzMatrix, AMemberCancelsOnlyTheJobsItSubmitted) {
  const auto [alice_id, alice] = world_.CreateKey("acme", "member");
  const auto [bob_id, bob] = world_.CreateKey("acme", "member");
  auto call = [&](const std::string& credential) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + credential);
    return c;
  };
  auto jobs = v1::JobService::NewStub(world_.channel);
  const std::string first = world_.SubmitJobAs("acme/team", alice);
  const std::string second = world_.SubmitJobAs("acme/team", alice);
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());

  v1::GetJobRequest get;
  get.set_job_id(first);
  v1::Job job;
  auto c = call(bob);  // a sibling member reads it (its subtree) and sees who submitted it
  ASSERT_TRUE(jobs->GetJob(c.get(), get, &job).ok());
  EXPECT_EQ(job.submitted_by(), "key:" + alice_id);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(first);
  c = call(bob);
  grpc::Status st = jobs->CancelJob(c.get(), cancel, &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(), "job " + first + " was submitted by 'key:" + alice_id +
                                    "', not by this caller ('key:" + bob_id +
                                    "'): a member may cancel only the jobs it submitted; ask a "
                                    "tenant-admin of 'acme/team'");
  Target rest{nullptr, "POST", "/v1/jobs/" + first + ":cancel", "{}"};
  EXPECT_EQ(CallRest(daemon_->http_port(), daemon_->ca_pem(), rest, bob), 403);

  // The refusal is audited with the sibling as the actor.
  auto audit = v1::AuditService::NewStub(world_.channel);
  v1::ListAuditRecordsRequest q;
  q.set_verb("CancelJob");
  q.set_resource("job/" + first);
  q.set_outcome("PERMISSION_DENIED");
  std::vector<v1::AuditRecord> denied;  // both faces' refusals ("job/3" would also match "job/30")
  EXPECT_TRUE(testing::WaitFor([&] {
    v1::ListAuditRecordsResponse records;
    auto a = world_.AdminCall();
    if (!audit->ListAuditRecords(a.get(), q, &records).ok()) return false;
    denied.clear();
    for (const v1::AuditRecord& r : records.records()) {
      if (r.resource() == "job/" + first) denied.push_back(r);
    }
    return denied.size() == 2;
  }));
  for (const v1::AuditRecord& r : denied) {
    EXPECT_EQ(r.key_id(), "key:" + bob_id);
    EXPECT_EQ(r.tenant(), "acme");
  }

  c = call(alice);
  st = jobs->CancelJob(c.get(), cancel, &job);
  EXPECT_TRUE(st.ok()) << st.error_message();
  cancel.set_job_id(second);
  c = call(credential_[kTenantAdmin]);
  st = jobs->CancelJob(c.get(), cancel, &job);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(job.submitted_by(), "key:" + alice_id);
}

// Credentials that are wrong in every way get the same answer, with nothing echoed.
TEST_F(AuthzMatrix, BadCredentialsAreUnauthenticatedWithoutDetail) {
  const auto [id, secret] = world_.CreateKey("acme", "member");
  v1::ListPoolsRequest req;
  // Used first, so the daemon has it in its verified-key cache: the revocation must still count
  // from the very next call.
  ASSERT_TRUE(
      CallGrpc(world_.channel, "gpupool.v1.PoolService/ListPools", req, secret, false).ok());
  {
    v1::RevokeApiKeyRequest r;
    r.set_id(id);
    v1::ApiKey resp;
    auto c = world_.AdminCall();
    ASSERT_TRUE(v1::KeyService::NewStub(world_.channel)->RevokeApiKey(c.get(), r, &resp).ok());
  }
  for (const std::string& bad :
       {secret, std::string("gpk_zz"), std::string("no-such-token"), credential_[kMember] + "x"}) {
    const grpc::Status st =
        CallGrpc(world_.channel, "gpupool.v1.PoolService/ListPools", req, bad, false);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << bad;
    EXPECT_EQ(st.error_message(), "invalid bearer token");
    Target t{nullptr, "GET", "/v1/pools", ""};
    EXPECT_EQ(CallRest(daemon_->http_port(), daemon_->ca_pem(), t, bad), 401);
  }
}

}  // namespace
}  // namespace gpupool
