// docs/openapi.yaml, the REST API's published description: it must parse as YAML (it once did
// not, unnoticed: an unquoted ": " in a description), and the schemas of the resources whose
// fields grow most often must list every field of their protobuf message, by its JSON name.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "gpupool/v1/billing.pb.h"
#include "gpupool/v1/pools.pb.h"

namespace gpupool {
namespace {

YAML::Node LoadSpec() {
  try {
    return YAML::LoadFile(GPUPOOL_OPENAPI);
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << GPUPOOL_OPENAPI << ": " << e.what();
    return YAML::Node();
  }
}

void ExpectEveryField(const YAML::Node& spec, const google::protobuf::Descriptor* message) {
  const YAML::Node properties = spec["components"]["schemas"][message->name()]["properties"];
  ASSERT_TRUE(properties.IsMap()) << "no schema " << message->name();
  for (int i = 0; i < message->field_count(); ++i) {
    const std::string json = message->field(i)->json_name();
    EXPECT_TRUE(properties[json].IsDefined())
        << message->name() << "." << json << " is missing from docs/openapi.yaml";
  }
}

TEST(OpenApiTest, ParsesAndListsEveryFieldOfPoolAndNode) {
  const YAML::Node spec = LoadSpec();
  ASSERT_TRUE(spec.IsMap());
  EXPECT_TRUE(spec["openapi"].IsDefined());
  EXPECT_TRUE(spec["paths"].IsMap());
  ExpectEveryField(spec, v1::Pool::descriptor());
  ExpectEveryField(spec, v1::Node::descriptor());
}

TEST(OpenApiTest, ListsEveryFieldOfABudget) {
  const YAML::Node spec = LoadSpec();
  ASSERT_TRUE(spec.IsMap());
  ExpectEveryField(spec, v1::Budget::descriptor());
  EXPECT_TRUE(spec["paths"]["/v1/budgets/{tenant}"]["put"].IsDefined());
}

}  // namespace
}  // namespace gpupool
