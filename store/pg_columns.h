// Column lists of the PostgreSQL store's tables, in the order GroupSql writes values and the
// readers in pg_sql.h expect them. Internal to store/ (pg_sql.cc, pg_rows.cc).
#pragma once

// clang-format off
// A task template (TaskTemplate, less secret_env), as jobs and service_revisions both keep it:
// AppendTemplateValues and ReadTemplate (pg_sql.h) write and read these, in this order.
#define GP_TEMPLATE_COLS                                                                     \
  "command, env, req_shape, req_milli_tflops, req_vram_mib, req_gpu_count, req_models, "     \
  "req_mig_profile, req_sku, req_cpu_milli, req_memory_mib, image, registry_credential, "    \
  "entrypoint, working_dir, volumes, ports"
#define GP_JOB_COLS                                                                      \
  "id, tenant, pool, priority_class, task_count, gang, preemptible, max_runtime_ms, "    \
  "max_retries, labels, " GP_TEMPLATE_COLS ", state, reason, submit_us, finish_us, "     \
  "idempotency_key, request_digest, secret_env, submitted_by, service_id, "              \
  "service_generation, service_name"
#define GP_TASK_COLS                                                                     \
  "job_id, idx, state, node, attempt, exit_code, reason, scheduled_us, started_us, "     \
  "finished_us, stop_intent, preempted_by_job, preempted_by_idx, preempt_rule, "         \
  "preempt_reserved, usage_cpu_us, usage_peak_memory_bytes, usage_oom_kills, "          \
  "usage_spill_mib_seconds, endpoints"
#define GP_ALLOC_COLS "job_id, idx, pos, device_id, milli_tflops, vram_mib, slots, exclusive"
#define GP_EVENT_COLS "time_us, kind, subject, message, tenant"
#define GP_POOL_COLS                                                                           \
  "name, visibility, allowed_tenants, placement_strategy, compute_permille, memory_permille, " \
  "sharing_mode, time_slice_replicas, create_us, mps_tenant_isolation, required_capabilities, "  \
  "network, pinned_images, compute_fair, mig_relayout"
#define GP_NODE_COLS                                                                         \
  "name, pool, state, labels, cpu_milli, memory_mib, spill_budget_mib, last_heartbeat_us, " \
  "capabilities"
#define GP_DEVICE_COLS \
  "node, pos, id, model, idx, milli_tflops, vram_mib, mig_profile, parent_id, healthy, "     \
  "numa_node, time_slice_slots, mig_start, mig_enabled"
#define GP_LINK_COLS "node, pos, a, b, kind, bandwidth_gbps"
#define GP_QUOTA_COLS                                                                \
  "tenant, pool, guaranteed_milli_tflops, guaranteed_vram_mib, guaranteed_devices, " \
  "limit_milli_tflops, limit_vram_mib, limit_devices"
// clang-format on
