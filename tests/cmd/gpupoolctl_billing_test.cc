// End to end: price plans from gpupoold's YAML and from `gpupoolctl priceplans create|update`,
// as a script sees them — the real gpupoolctl against a real gpupoold on embedded PostgreSQL.
// A configured plan is stored once (a restart with the same config adds no version, a changed
// one adds exactly one); only admins write plans; a tenant-admin lists the plans that rate it;
// invoices without a usage ledger say so (exit 4).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"

namespace gpupool::ctltest {
namespace {

using gpupool::testing::DaemonProcess;

constexpr const char* kAdminToken = "admin-token-0123456789";
constexpr const char* kAcmeAdminToken = "acme-admin-token-0123456789";

std::string Config(const std::string& tflops_price) {
  return std::string("auth:\n  api_tokens:\n") + "    - {token: " + kAdminToken +
         ", principal: ops, admin: true}\n" + "    - {token: " + kAcmeAdminToken +
         ", principal: acme, role: tenant-admin}\n" +
         "tenants:\n  - {path: acme}\n"
         "price_plans:\n"
         "  - name: default\n"
         "    currency: USD\n"
         "    rates:\n"
         "      - {unit: tflops-hour, price: " +
         tflops_price +
         "}\n"
         "      - {unit: device-hour, pool: h100, price: 2.50}\n"
         "    priority_multipliers: {high: 1.5}\n";
}

class GpupoolctlBilling : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = gpupool::testing::MakeTempDir("gpupoolctl-billing");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    config_ = dir_ + "/gpupoold.yaml";
    std::ofstream(config_) << Config("0.45");
    Result<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", config_}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  Outcome Ctl(const std::string& token, std::vector<std::string> args) {
    std::vector<std::string> full = {"--server", daemon_->grpc_address(), "--token", token};
    full.insert(full.end(), args.begin(), args.end());
    return RunCtl(full);
  }

  std::string dir_, config_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(GpupoolctlBilling, ConfiguredPlansAreStoredOnceAndVersionedOnChange) {
  Outcome o = Ctl(kAdminToken, {"priceplans", "show", "default"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("Plan default v1 (USD)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("tflops-hour   -      -       -             0.45"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("multipliers: high=x1.5"), std::string::npos) << o.out;

  // Same config: no new version. Changed price: exactly one more.
  daemon_->Stop();
  ASSERT_TRUE(daemon_->Restart().ok());
  o = Ctl(kAdminToken, {"priceplans", "list", "--all-versions"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.find("default   2"), std::string::npos) << o.out;
  daemon_->Stop();
  std::ofstream(config_) << Config("0.50");
  ASSERT_TRUE(daemon_->Restart().ok());
  o = Ctl(kAdminToken, {"priceplans", "show", "default", "--all-versions"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("Plan default v1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Plan default v2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("0.5\n"), std::string::npos) << o.out;
}

TEST_F(GpupoolctlBilling, AdminsWritePlansTenantAdminsReadThemInvoicesComeFromTheLedger) {
  const std::string file = dir_ + "/acme.yaml";
  std::ofstream(file) << "name: acme-deal\ncurrency: USD\ntenants: [acme]\n"
                         "rates:\n  - {unit: tflops-hour, price: 0.40}\n";
  Outcome o = Ctl(kAcmeAdminToken, {"priceplans", "create", "-f", file});
  EXPECT_EQ(o.exit, 6) << Dump(o);  // denied
  o = Ctl(kAdminToken, {"priceplans", "create", "-f", file});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("price plan acme-deal version 1"), std::string::npos) << o.out;
  o = Ctl(kAdminToken, {"priceplans", "create", "-f", file});
  EXPECT_EQ(o.exit, 7) << Dump(o);  // already exists
  o = Ctl(kAdminToken, {"priceplans", "update", "-f", file});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("version 2"), std::string::npos) << o.out;

  std::ofstream(file) << "name: acme-deal\ncurrency: USD\nrates:\n  - {unit: gpu-hour, price: 1}\n";
  o = Ctl(kAdminToken, {"priceplans", "update", "-f", file});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_NE(o.err.find("plan.rates[0].unit"), std::string::npos) << Dump(o);
  std::ofstream(file) << "name: acme-deal\ncurrency: USD\nrates:\n  - {unit: tflops-hour}\n";
  o = Ctl(kAdminToken, {"priceplans", "update", "-f", file});
  EXPECT_EQ(o.exit, 2) << Dump(o);  // caught locally, naming file, line and key
  EXPECT_NE(o.err.find("acme.yaml:4: rates[0].price: missing required key"), std::string::npos)
      << Dump(o);

  o = Ctl(kAcmeAdminToken, {"priceplans", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("acme-deal"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("default"), std::string::npos) << o.out;

  // The daemon rates invoices from its usage ledger (cmd/daemon/ledger_usage_source.h); nothing
  // ran, so acme's November invoice has no lines and totals of zero.
  o = Ctl(kAcmeAdminToken, {"invoices", "--period", "2026-11"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("Invoice acme  2026-11-01T00:00:00Z .. 2026-12-01T00:00:00Z"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("total 0.00"), std::string::npos) << o.out;
  o = Ctl(kAcmeAdminToken, {"invoices", "--period", "november"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_NE(o.err.find("YYYY-MM"), std::string::npos) << Dump(o);
  o = Ctl(kAcmeAdminToken, {"invoices", "--format", "xml"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
}

TEST_F(GpupoolctlBilling, BudgetsAreSetListedAndDeletedWithinTheCallersSubtree) {
  Outcome o = Ctl(kAcmeAdminToken,
                  {"budgets", "set", "acme", "--amount", "250", "--alert", "90", "--alert", "50"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "budget of acme: 250 USD a month, alerts at 50,90%\n");
  o = Ctl(kAcmeAdminToken, {"budgets", "set", "globex", "--amount", "1"});
  EXPECT_EQ(o.exit, 6) << Dump(o);  // another subtree
  o = Ctl(kAcmeAdminToken, {"budgets", "set", "acme", "--amount", "5", "--currency", "EUR"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_NE(o.err.find("budget.currency: 'EUR' but 'acme' is rated in USD (plan 'default')"),
            std::string::npos)
      << Dump(o);
  o = Ctl(kAcmeAdminToken, {"budgets", "set", "acme", "--amount", "5", "--alert", "most"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  o = Ctl(kAcmeAdminToken, {"budgets", "set", "acme"});
  EXPECT_EQ(o.exit, 2) << Dump(o);

  o = Ctl(kAcmeAdminToken, {"budgets", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("TENANT"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("acme"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("50,90"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("0.00"), std::string::npos) << o.out;  // nothing ran this month
  o = Ctl(kAcmeAdminToken, {"budgets", "list", "-o", "json"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("\"percentUsed\": \"0.00\""), std::string::npos) << o.out;

  o = Ctl(kAcmeAdminToken, {"budgets", "delete", "acme"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "budget of acme deleted\n");
  o = Ctl(kAcmeAdminToken, {"budgets", "delete", "acme"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
}

}  // namespace
}  // namespace gpupool::ctltest
