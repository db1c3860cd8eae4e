// The ServiceStore conformance suite (scheduler/service.h), against the memory implementation and
// PostgreSQL: every field round-trips through Create and List; a name is unique per tenant; a
// scaling change keeps the revision, a change to generation + 1 adds one and the old one becomes
// `previous`; a change from a stale generation is ABORTED and of two racing changes one wins;
// unknown ids are NOT_FOUND; a deleted service's revisions go with it and its id is not reused;
// malformed records are refused with nothing written. Then PostgreSQL alone: only the newest
// kServiceRevisionsKept revisions stay in service_revisions, a delete leaves none, and a job
// marked as a service's replica round-trips through PgStore.
#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

#include "store/memory_services.h"
#include "store/pg_services.h"
#include "store/pg_store.h"
#include "store/validate.h"
#include "tests/store/port_harness.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

using Factory = PortFactory<ServiceStore>;

// A revision with every template field set (quotes, backslashes and non-ASCII text included),
// `image` telling revisions apart.
ServiceRevision Revision(const std::string& image) {
  ServiceRevision r;
  TaskTemplate& t = r.task_template;
  t.command = {"python3", "-m", "serve", "--greeting=héllo, 世界", ""};
  t.env = {{"MODEL", "llama"}, {"QUOTE", "it's \"x\" \\ y"}};
  t.image = image;
  t.registry_credential = "hub";
  t.entrypoint = {"/bin/sh", "-c"};
  t.working_dir = "/srv/o'brien";
  t.volumes = {{"/models", "llama-3-8b"}, {"/scratch", ""}};
  t.ports = {{"http", 8080, "tcp"}, {"metrics", 9090, "tcp"}, {"", 5353, "udp"}};
  ResourceRequest& q = t.resources;
  q.shape = RequestShape::kFractional;
  q.fractional = Resources{12'500, 20'480};  // 12.5 TFLOPS, 20 GiB of one GPU
  q.gpu_count = 2;
  q.models = {"H100-SXM", "A100-80GB"};
  q.mig_profile = "1g.10gb";
  q.sku = "medium";
  q.cpu_milli = 1500;
  q.memory_mib = 6144;
  r.port = 8080;
  r.readiness_path = "/healthz?probe=1";
  return r;
}

// A service with every field set to something other than its default.
ServiceRecord Service(const std::string& tenant, const std::string& name) {
  ServiceRecord s;
  ServiceSpec& p = s.spec;
  p.tenant = tenant;
  p.name = name;
  p.pool = "gpu-a";
  p.priority_class = "high";
  p.preemptible = false;
  p.revision = Revision("registry.example:5000/team/serve:v1");
  p.min_replicas = 2;
  p.max_replicas = 7;
  p.target_in_flight = 3;
  p.idle_ms = 120'000;
  p.max_surge = 2;
  p.max_unavailable = 1;
  p.created_by = "key:0123456789ab";
  s.create_ms = s.update_ms = 1'000;
  return s;
}

class ServiceConformanceTest : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    ASSERT_OK(harness_->NewTable());
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
  }
  std::unique_ptr<ServiceStore> OpenStore() {
    Result<std::unique_ptr<ServiceStore>> s = harness_->Open();
    EXPECT_OK(s.status());
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::vector<ServiceRecord> All(ServiceStore* store = nullptr) {
    Result<std::vector<ServiceRecord>> r = (store ? store : store_.get())->List();
    EXPECT_OK(r.status());
    return r.ok() ? *r : std::vector<ServiceRecord>{};
  }
  // The one stored service.
  ServiceRecord Only() {
    std::vector<ServiceRecord> all = All();
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? ServiceRecord{} : all[0];
  }
  ServiceRecord MustCreate(const ServiceRecord& s) {
    Result<ServiceRecord> r = store_->Create(s);
    EXPECT_OK(r.status());
    return r.ok() ? *r : ServiceRecord{};
  }
  // `s` at the next generation with a revision running `image`.
  static ServiceRecord Rollout(ServiceRecord s, const std::string& image) {
    ++s.generation;
    s.spec.revision = Revision(image);
    s.update_ms += 1'000;
    return s;
  }

  std::unique_ptr<PortHarness<ServiceStore>> harness_;
  std::unique_ptr<ServiceStore> store_;
};

TEST_P(ServiceConformanceTest, EveryFieldRoundTripsThroughCreateAndList) {
  EXPECT_TRUE(All().empty());
  ServiceRecord in = Service("acme/ml", "web");
  in.id = 77;         // assigned by the store, whatever the caller says
  in.generation = 5;  // always 1 for a new service
  in.previous = Revision("ignored");
  ASSERT_OK_AND_ASSIGN(ServiceRecord web, store_->Create(in));
  EXPECT_GT(web.id, 0);
  EXPECT_EQ(web.generation, 1);
  EXPECT_FALSE(web.previous.has_value());
  ServiceRecord want = Service("acme/ml", "web");
  want.id = web.id;
  EXPECT_EQ(web, want);

  ServiceRecord api = Service("acme/ml", "api");
  api.spec.preemptible = true;
  api.spec.priority_class = "";
  api.spec.revision.readiness_path = "";
  api.spec.revision.task_template = {};  // a plain command, no image, nothing else
  api.spec.revision.task_template.command = {"./serve"};
  api.spec.revision.task_template.ports = {{"", 8000, "tcp"}};
  api.spec.revision.port = 8000;
  ASSERT_OK_AND_ASSIGN(api, store_->Create(api));
  EXPECT_GT(api.id, web.id);

  // By id, whole, from this handle and from another (a second replica).
  std::unique_ptr<ServiceStore> other = OpenStore();
  ASSERT_NE(other, nullptr);
  for (ServiceStore* s : {store_.get(), other.get()}) {
    EXPECT_EQ(All(s), (std::vector<ServiceRecord>{web, api}));
  }
}

TEST_P(ServiceConformanceTest, ANameIsUniquePerTenant) {
  const ServiceRecord web = MustCreate(Service("acme/ml", "web"));
  ServiceRecord again = Service("acme/ml", "web");
  again.spec.pool = "gpu-b";
  Result<ServiceRecord> dup = store_->Create(again);
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.status().message(), "service 'web' of tenant 'acme/ml' already exists");
  EXPECT_EQ(Only(), web);  // the refused one changed nothing

  // Another tenant (a child of the first included) may use the name.
  ASSERT_OK(store_->Create(Service("globex", "web")).status());
  ASSERT_OK(store_->Create(Service("acme/ml/vision", "web")).status());
  EXPECT_EQ(All().size(), 3u);
}

TEST_P(ServiceConformanceTest, AScalingChangeKeepsTheRevision) {
  const ServiceRecord web = MustCreate(Service("acme/ml", "web"));
  ServiceRecord next = web;
  next.spec.min_replicas = 0;
  next.spec.max_replicas = 40;
  next.spec.target_in_flight = 16;
  next.spec.idle_ms = 600'000;
  next.spec.max_surge = 0;
  next.spec.max_unavailable = 3;
  next.spec.priority_class = "low";
  next.spec.preemptible = true;
  next.update_ms = 9'000;
  // What a scaling change does not change, whatever `next` says: who owns it, its pool, who made
  // it and when, and (at the same generation) its revision.
  ServiceRecord sent = next;
  sent.spec.tenant = "globex";
  sent.spec.name = "other";
  sent.spec.pool = "gpu-z";
  sent.spec.created_by = "key:ffffffffffff";
  sent.create_ms = 5;
  sent.spec.revision = Revision("not-stored:v9");
  ASSERT_OK(store_->Update(sent, 1));
  EXPECT_EQ(Only(), next);
  EXPECT_EQ(Only().generation, 1);
  EXPECT_FALSE(Only().previous.has_value());
}

TEST_P(ServiceConformanceTest, ANewGenerationAddsARevisionAndTheOldOneBecomesPrevious) {
  const ServiceRecord v1 = MustCreate(Service("acme/ml", "web"));
  ServiceRecord v2 = Rollout(v1, "registry.example:5000/team/serve:v2");
  v2.spec.max_replicas = 9;  // scaling may change with it
  ASSERT_OK(store_->Update(v2, 1));
  ServiceRecord got = Only();
  EXPECT_EQ(got.generation, 2);
  EXPECT_EQ(got.spec.revision, v2.spec.revision);
  EXPECT_EQ(got.spec.max_replicas, 9);
  ASSERT_TRUE(got.previous.has_value());
  EXPECT_EQ(*got.previous, v1.spec.revision);
  EXPECT_EQ(got.create_ms, v1.create_ms);
  EXPECT_EQ(got.update_ms, v2.update_ms);

  // A scaling change at generation 2 keeps both.
  ServiceRecord scaled = got;
  scaled.spec.min_replicas = 1;
  ASSERT_OK(store_->Update(scaled, 2));
  EXPECT_EQ(Only(), scaled);

  // A rollback is a new generation with the previous revision's content.
  ServiceRecord v3 = scaled;
  v3.generation = 3;
  v3.spec.revision = *scaled.previous;
  ASSERT_OK(store_->Update(v3, 2));
  got = Only();
  EXPECT_EQ(got.generation, 3);
  EXPECT_EQ(got.spec.revision, v1.spec.revision);
  ASSERT_TRUE(got.previous.has_value());
  EXPECT_EQ(*got.previous, v2.spec.revision);
}

TEST_P(ServiceConformanceTest, AStaleGenerationIsAbortedAndChangesNothing) {
  const ServiceRecord v1 = MustCreate(Service("acme/ml", "web"));
  ASSERT_OK(store_->Update(Rollout(v1, "serve:v2"), 1));
  const ServiceRecord now = Only();

  // From a second handle, as another replica that read generation 1.
  std::unique_ptr<ServiceStore> other = OpenStore();
  ASSERT_NE(other, nullptr);
  Status st = other->Update(Rollout(v1, "serve:v2-other"), 1);
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_EQ(st.message(), "service " + std::to_string(v1.id) + " changed meanwhile (generation 2)");
  ServiceRecord scaled = v1;
  scaled.spec.max_replicas = 1;
  EXPECT_EQ(other->Update(scaled, 1).code(), StatusCode::kAborted);
  EXPECT_EQ(Only(), now);
}

TEST_P(ServiceConformanceTest, OfTwoChangesFromOneGenerationOneWins) {
  const ServiceRecord v1 = MustCreate(Service("acme/ml", "web"));
  constexpr int kRacers = 4;
  std::vector<std::unique_ptr<ServiceStore>> handles;
  for (int i = 0; i < kRacers; ++i) handles.push_back(OpenStore());
  std::atomic<int> won{0}, aborted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      Status st = handles[i]->Update(Rollout(v1, "serve:racer-" + std::to_string(i)), 1);
      if (st.ok()) ++won;
      if (st.code() == StatusCode::kAborted) ++aborted;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(aborted.load(), kRacers - 1);
  const ServiceRecord got = Only();
  EXPECT_EQ(got.generation, 2);
  ASSERT_TRUE(got.previous.has_value());
  EXPECT_EQ(*got.previous, v1.spec.revision);
}

TEST_P(ServiceConformanceTest, UnknownIdsAreNotFound) {
  ServiceRecord ghost = Service("acme/ml", "web");
  ghost.id = 4242;
  Status st = store_->Update(ghost, 1);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), "service 4242 does not exist");
  EXPECT_EQ(store_->Update(Rollout(ghost, "serve:v2"), 1).code(), StatusCode::kNotFound);
  st = store_->Delete(4242);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), "service 4242 does not exist");
  EXPECT_TRUE(All().empty());
}

TEST_P(ServiceConformanceTest, DeleteRemovesTheServiceWithItsRevisionsAndItsIdIsNotReused) {
  const ServiceRecord web = MustCreate(Service("acme/ml", "web"));
  const ServiceRecord api = MustCreate(Service("acme/ml", "api"));
  ASSERT_OK(store_->Update(Rollout(web, "serve:v2"), 1));
  ASSERT_OK(store_->Delete(web.id));
  EXPECT_EQ(All(), std::vector<ServiceRecord>{api});
  EXPECT_EQ(store_->Delete(web.id).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Update(Rollout(web, "serve:v3"), 2).code(), StatusCode::kNotFound);

  // The name is free again; the new service starts over at generation 1, with no revision of
  // the old one before it, under a new id.
  const ServiceRecord again = MustCreate(Service("acme/ml", "web"));
  EXPECT_GT(again.id, api.id);
  std::vector<ServiceRecord> all = All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1], again);
  EXPECT_FALSE(all[1].previous.has_value());
}

TEST_P(ServiceConformanceTest, ManyRolloutsKeepTheNewestRevisionsInOrder) {
  ServiceRecord s = MustCreate(Service("acme/ml", "web"));
  for (int g = 2; g <= kServiceRevisionsKept + 5; ++g) {
    ServiceRecord next = Rollout(s, "serve:v" + std::to_string(g));
    ASSERT_OK(store_->Update(next, s.generation));
    s = next;
  }
  const ServiceRecord got = Only();
  EXPECT_EQ(got.generation, kServiceRevisionsKept + 5);
  EXPECT_EQ(got.spec.revision.task_template.image,
            "serve:v" + std::to_string(kServiceRevisionsKept + 5));
  ASSERT_TRUE(got.previous.has_value());
  EXPECT_EQ(got.previous->task_template.image,
            "serve:v" + std::to_string(kServiceRevisionsKept + 4));
}

TEST_P(ServiceConformanceTest, MalformedRecordsAreRefusedWithNothingWritten) {
  ServiceRecord bad = Service("acme/ml", "web");
  bad.spec.revision.task_template.secret_env = {{"TOKEN", "s3cret"}};
  Status st = store_->Create(bad).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("secret_env"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("s3cret"), std::string::npos) << st.message();

  bad = Service("acme/ml", "web");
  bad.spec.revision.task_template.env["BAD"] = std::string("a\0b", 3);
  st = store_->Create(bad).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("service.template.env"), std::string::npos) << st.message();

  bad = Service("acme/ml", "web");
  bad.spec.revision.task_template.ports = {{"", 80, "sctp"}};
  st = store_->Create(bad).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("service.template.ports[0].protocol"), std::string::npos)
      << st.message();

  bad = Service("", "web");
  EXPECT_EQ(store_->Create(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(All().empty());

  // Update: a generation neither the expected one nor the next, or a template it cannot keep.
  const ServiceRecord web = MustCreate(Service("acme/ml", "web"));
  ServiceRecord skip = Rollout(Rollout(web, "serve:v2"), "serve:v3");
  st = store_->Update(skip, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  ServiceRecord back = web;
  back.generation = 0;
  EXPECT_EQ(store_->Update(back, 1).code(), StatusCode::kInvalidArgument);
  ServiceRecord secret = Rollout(web, "serve:v2");
  secret.spec.revision.task_template.secret_env = {{"TOKEN", "s3cret"}};
  EXPECT_EQ(store_->Update(secret, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Only(), web);
}

INSTANTIATE_TEST_SUITE_P(All, ServiceConformanceTest,
                         ::testing::Values(MemoryPort<ServiceStore, MemoryServices>("memory"),
                                           PgPort<ServiceStore, PgServices>("pg")),
                         PortName<ServiceStore>);

// PostgreSQL alone: what the tables hold.

Result<std::string> NewDatabase() {
  GPUPOOL_ASSIGN_OR_RETURN(std::string uri, CreateTestDatabase());
  PgStoreOptions o;
  o.uri = uri;
  GPUPOOL_RETURN_IF_ERROR(PgStore::Open(o).status());
  return uri;
}

std::vector<int64_t> StoredGenerations(const std::string& uri) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  std::vector<int64_t> out;
  for (const auto& r :
       n.exec("SELECT generation FROM service_revisions ORDER BY service_id, generation")) {
    out.push_back(r[0].as<int64_t>());
  }
  return out;
}

TEST(PgServicesTest, OnlyTheNewestRevisionsAreKeptAndADeleteLeavesNone) {
  ASSERT_OK_AND_ASSIGN(std::string uri, NewDatabase());
  ASSERT_OK_AND_ASSIGN(auto store, PgServices::Open(uri));
  ASSERT_OK_AND_ASSIGN(ServiceRecord s, store->Create(Service("acme/ml", "web")));
  EXPECT_EQ(StoredGenerations(uri), std::vector<int64_t>{1});
  constexpr int64_t kLast = kServiceRevisionsKept + 3;
  for (int64_t g = 2; g <= kLast; ++g) {
    ServiceRecord next = s;
    next.generation = g;
    next.spec.revision = Revision("serve:v" + std::to_string(g));
    ASSERT_OK(store->Update(next, g - 1));
    s = next;
  }
  // A scaling change adds none.
  s.spec.max_replicas = 3;
  ASSERT_OK(store->Update(s, kLast));
  std::vector<int64_t> want;
  for (int64_t g = kLast - kServiceRevisionsKept + 1; g <= kLast; ++g) want.push_back(g);
  EXPECT_EQ(StoredGenerations(uri), want);

  ASSERT_OK(store->Delete(s.id));
  EXPECT_TRUE(StoredGenerations(uri).empty());
}

TEST(PgServicesTest, TheDatabaseUnreachableIsUnavailable) {
  ASSERT_OK_AND_ASSIGN(auto store, PgServices::Open("postgresql://gpupool@127.0.0.1:1/none"));
  EXPECT_EQ(store->List().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store->Create(Service("acme/ml", "web")).status().code(), StatusCode::kUnavailable);
}

// A replica is a job marked with its service, the service's name and the generation it runs: the
// columns round-trip through PgStore (and are found by the partial index on service_id).
TEST(PgServicesTest, AReplicaJobKeepsItsServiceAndGeneration) {
  ASSERT_OK_AND_ASSIGN(std::string uri, NewDatabase());
  PgStoreOptions o;
  o.uri = uri;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStore> pg, PgStore::Open(o));
  ASSERT_OK(pg->AcquireLeadership().status());
  JobRecord replica = SampleJob(5, 1);
  replica.spec.service_id = 12;
  replica.spec.service_generation = 3;
  replica.spec.service_name = "chat";
  const JobRecord plain = SampleJob(6, 1);
  ASSERT_OK(ApplyAndWait(
      *pg, {UpsertPool{SamplePool(replica.spec.pool)}, InsertJob{replica}, InsertJob{plain}}));
  ASSERT_OK_AND_ASSIGN(RecoveredState state, pg->Recover());
  ASSERT_EQ(state.jobs.size(), 2u);
  EXPECT_EQ(state.jobs[0], replica);
  EXPECT_EQ(state.jobs[1], plain);
  EXPECT_EQ(state.jobs[1].spec.service_id, 0);

  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT id FROM jobs WHERE service_id = 12 AND service_generation = 3").size(),
            1u);
  EXPECT_EQ(n.exec("SELECT 1 FROM pg_indexes WHERE indexname = 'jobs_service_idx' AND "
                   "indexdef LIKE '%WHERE (service_id <> 0)%'")
                .size(),
            1u);

  JobRecord negative = SampleJob(7, 1);
  negative.spec.service_generation = -1;
  EXPECT_EQ(ApplyAndWait(*pg, {InsertJob{negative}}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupool::testing
