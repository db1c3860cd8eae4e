// join-tokens create|list|revoke: node join tokens kept by gpupoold (docs/security.md, "Join
// tokens"). The token is printed once, by `join-tokens create`; the server keeps its digest.
#include <charconv>
#include <ctime>

#include "cmd/ctl/app.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/agent.grpc.pb.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::NodeEnrollService::Stub> Stub(Ctx& ctx) {
  return v1::NodeEnrollService::NewStub(ctx.channel());
}

std::string FormatUnixMs(int64_t ms) {
  if (ms == 0) return "-";
  google::protobuf::Timestamp t;
  t.set_seconds(ms / 1000);
  return FormatTime(t);
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreateJoinTokenRequest req;
  req.set_note(a.Get("note"));
  if (auto ttl = a.Find("expires-in")) {
    Result<int64_t> ms = ParseDurationMs(*ttl);
    if (!ms.ok()) return ctx.Usage("--expires-in: " + ms.status().message());
    if (*ms < 1000) return ctx.Usage("--expires-in: at least 1s");
    req.set_ttl_seconds(*ms / 1000);
  }
  if (auto uses = a.Find("uses")) {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(uses->data(), uses->data() + uses->size(), n);
    if (ec != std::errc() || end != uses->data() + uses->size() || n < 1) {
      return ctx.Usage("--uses: a whole number of nodes, 1 or more, got '" + *uses + "'");
    }
    req.set_max_uses(n);
  }
  v1::CreateJoinTokenResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->CreateJoinToken(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  const v1::JoinToken& t = resp.join_token();
  ctx.out << "join token " << t.id() << " created: expires " << FormatUnixMs(t.expire_unix_ms())
          << ", "
          << (t.max_uses() == 0
                  ? std::string("unlimited uses")
                  : std::to_string(t.max_uses()) + (t.max_uses() == 1 ? " use" : " uses"))
          << ".\nIt is shown only now; give it to the agents (token_file:):\n"
          << resp.token() << "\n";
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs&) {
  v1::ListJoinTokensResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListJoinTokens(call.get(), v1::ListJoinTokensRequest(), &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.join_tokens_size() == 0) {
    ctx.err << "no join tokens (DATA_DIR/node.token and auth.node_tokens are not listed)\n";
    return kExitOk;
  }
  Table t({"ID", "STATE", "USES", "EXPIRES", "LAST NODE", "CREATED BY", "NOTE"});
  for (const v1::JoinToken& j : resp.join_tokens()) {
    t.AddRow({j.id(), j.state(),
              std::to_string(j.uses()) + "/" +
                  (j.max_uses() == 0 ? std::string("-") : std::to_string(j.max_uses())),
              j.expire_unix_ms() == 0 ? "never" : FormatUnixMs(j.expire_unix_ms()),
              j.last_node().empty() ? "-" : j.last_node(), j.created_by(),
              j.note().empty() ? "-" : j.note()});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Revoke(Ctx& ctx, const ParsedArgs& a) {
  v1::RevokeJoinTokenRequest req;
  req.set_id(a.positional[0]);
  v1::RevokeJoinTokenResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->RevokeJoinToken(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  ctx.out << "join token " << req.id()
          << " revoked; nodes it enrolled keep their certificates (nodes revoke NAME ends one)\n";
  return kExitOk;
}

}  // namespace

std::vector<Command> JoinTokenCommands() {
  return {
      {"join-tokens create",
       "[--expires-in DURATION] [--uses N] [--note TEXT]",
       "Create a node join token and print it (once) (admin)",
       "An agent given the token (token_file:) joins once for a node certificate and registers\n"
       "with that certificate from then on; each join uses the token once. It expires after\n"
       "--expires-in (default 24h, at most 365d) and enrols at most --uses nodes (default\n"
       "unlimited). The server keeps only a SHA-256 digest (docs/security.md, \"Join tokens\").",
       {{"expires-in", 0, FlagKind::kValue, "DURATION", "e.g. 2h, 7d (default 24h)"},
        {"uses", 0, FlagKind::kValue, "N", "nodes it may enrol (default unlimited)"},
        {"note", 0, FlagKind::kValue, "TEXT", "what it is for, shown in the list"}},
       "  gpupoolctl join-tokens create --expires-in 2h --uses 8 --note 'rack 12'\n",
       0,
       0,
       Create},
      {"join-tokens list",
       "",
       "List join tokens with their uses and state (never the tokens) (admin)",
       "State is usable, revoked, expired or used-up. DATA_DIR/node.token and auth.node_tokens\n"
       "are static and not listed.",
       {},
       "  gpupoolctl join-tokens list\n",
       0,
       0,
       List},
      {"join-tokens revoke",
       "ID",
       "Revoke a join token: no node joins with it from now on (admin)",
       "Nodes it already enrolled keep their certificates; `nodes revoke NAME` ends one.",
       {},
       "  gpupoolctl join-tokens revoke 3f9c0a1b2c4d\n",
       1,
       1,
       Revoke},
  };
}

}  // namespace gpupool::ctl
