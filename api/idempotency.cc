#include "api/idempotency.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdio>

#include "api/convert.h"
#include "api/validate.h"

namespace gpupool::api {

Status ValidateIdempotencyKey(std::string_view key, std::string_view field) {
  if (key.empty() || key.size() > 128) {
    return Invalid(field, "must be 1 to 128 characters, got " + std::to_string(key.size()));
  }
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return Invalid(field, "may hold only letters, digits and . _ : -");
  }
  return Status::Ok();
}

std::string SpecDigest(const v1::JobSpec& spec) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);  // map entries in key order
    spec.SerializeToCodedStream(&out);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + hex;
}

Status ReplayOf(const JobRecord& prior, const std::string& digest, v1::SubmitJobResponse* out) {
  if (prior.spec.request_digest != digest) {
    return Status::AlreadyExists("idempotency_key: '" + prior.spec.idempotency_key +
                                 "' was already used by tenant '" + prior.spec.tenant +
                                 "' for a different request (job " + std::to_string(prior.id) +
                                 "); use a new key for a new job");
  }
  out->set_job_id(std::to_string(prior.id));
  ToProto(prior, out->mutable_job());
  return Status::Ok();
}

}  // namespace gpupool::api
