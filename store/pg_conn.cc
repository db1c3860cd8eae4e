#include "store/pg_conn.h"

#include <libpq-fe.h>

#include <pqxx/pqxx>

#include "base/log.h"

namespace gpupool {
namespace {

constexpr std::chrono::milliseconds kMinBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{5000};

// libpq messages are multi-line ("ERROR:  x\nDETAIL:  y\n"); keep them on one line.
std::string OneLine(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' || c == '\t') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      if (!out.empty() && i + 1 < text.size()) out += "; ";
      continue;
    }
    out += c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  for (std::string_view prefix : {"ERROR:  ", "FATAL:  "}) {
    if (out.starts_with(prefix)) out.erase(0, prefix.size());
  }
  return out;
}

// "connection to server at "127.0.0.1", port 5432 failed: Connection refused; Is the server…"
// → "Connection refused".
std::string ConnectReason(std::string_view what) {
  std::string line = OneLine(what);
  if (auto pos = line.find("failed: "); pos != std::string::npos) line = line.substr(pos + 8);
  if (auto pos = line.find("; Is the server"); pos != std::string::npos) line.resize(pos);
  // libpqxx's words for a connection the server closed under it.
  if (line.find("not connected") != std::string::npos) line = "connection lost";
  return line;
}

void AppendOption(std::string* out, const char* key, const char* value) {
  if (!out->empty()) *out += ' ';
  *out += key;
  *out += "='";
  for (const char* p = value; *p != '\0'; ++p) {
    if (*p == '\'' || *p == '\\') *out += '\\';
    *out += *p;
  }
  *out += '\'';
}

}  // namespace

Result<PgTarget> ParsePgTarget(const std::string& uri) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err != nullptr ? OneLine(err) : "out of memory";
    if (err != nullptr) PQfreemem(err);
    return Status::InvalidArgument("database URI: " + msg);
  }
  PgTarget t;
  std::string host = "localhost", port = "5432", db, user;
  std::string options;
  bool has_timeout = false;
  bool has_keepalives = false;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    std::string_view key = o->keyword;
    if (key == "client_encoding") continue;  // we always speak UTF-8
    if (key == "options") {
      options = std::string(o->val) + " ";
      continue;
    }
    if (key == "connect_timeout") has_timeout = true;
    if (key.starts_with("keepalives")) has_keepalives = true;
    if (key == "host" || key == "hostaddr") host = o->val;
    if (key == "port") port = o->val;
    if (key == "dbname") db = o->val;
    if (key == "user") user = o->val;
    AppendOption(&t.conninfo, o->keyword, o->val);
  }
  PQconninfoFree(opts);
  if (!has_timeout) AppendOption(&t.conninfo, "connect_timeout", "5");
  if (!has_keepalives) {
    // Notice a server that vanished without closing the connection within about a minute.
    AppendOption(&t.conninfo, "keepalives_idle", "30");
    AppendOption(&t.conninfo, "keepalives_interval", "10");
    AppendOption(&t.conninfo, "keepalives_count", "3");
  }
  AppendOption(&t.conninfo, "client_encoding", "UTF8");
  options += "-c standard_conforming_strings=on";
  AppendOption(&t.conninfo, "options", options.c_str());
  t.display = host + ":" + port + "/" + (db.empty() ? user : db);
  return t;
}

Status PgErrorToStatus(const std::exception& e, const PgTarget& target) {
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) {
    return Status::Unavailable("database connection to " + target.display +
                               " lost during COMMIT; the outcome is unknown: " + OneLine(e.what()));
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    return Status::Unavailable("database unavailable: " + target.display + ": " +
                               ConnectReason(e.what()) + "; retrying");
  }
  const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
  if (sql == nullptr) return Status::Internal("database: " + OneLine(e.what()));
  const std::string& state = sql->sqlstate();
  std::string msg = OneLine(e.what());
  // CONTEXT lines name PL/pgSQL internals; our own errors are just their first line.
  if (auto pos = msg.find("; CONTEXT:"); pos != std::string::npos) msg.resize(pos);
  if (state.starts_with("GP"))
    msg = OneLine(std::string_view(e.what()).substr(0, std::string_view(e.what()).find('\n')));
  if (state == "GPF01") return Status::Aborted(msg);
  if (state == "GPN01") return Status::NotFound(msg);
  if (state == "GPA01") return Status::AlreadyExists(msg);
  if (state == "GPP01") return Status::FailedPrecondition(msg);
  if (state == "GPI01") return Status::InvalidArgument(msg);
  if (state == "23505") return Status::AlreadyExists(msg);
  if (state.starts_with("22")) return Status::InvalidArgument(msg);
  if (state.starts_with("08") || state.starts_with("57P") || state == "53300" ||
      state.starts_with("40")) {
    return Status::Unavailable("database unavailable: " + target.display + ": " + msg +
                               "; retrying");
  }
  return Status::Internal("database: " + msg + (state.empty() ? "" : " (SQLSTATE " + state + ")"));
}

bool IsConnectionLevel(const Status& status) { return status.code() == StatusCode::kUnavailable; }

void AppendQuoted(std::string* out, std::string_view text) {
  out->push_back('\'');
  for (char c : text) {
    if (c == '\'') out->push_back('\'');
    out->push_back(c);
  }
  out->push_back('\'');
}

PgConnection::PgConnection(PgTarget target, std::string role)
    : target_(std::move(target)), role_(std::move(role)) {}

PgConnection::~PgConnection() = default;

Result<pqxx::connection*> PgConnection::Get() {
  if (conn_ != nullptr && conn_->is_open()) return conn_.get();
  conn_.reset();
  auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt_ - now).count();
    return Status::Unavailable(last_error_.message() + " in " + std::to_string(ms) + " ms");
  }
  try {
    auto conn = std::make_unique<pqxx::connection>(target_.conninfo);
    pqxx::nontransaction n(*conn);
    // Durability is not negotiable: a server configured with synchronous_commit=off would
    // acknowledge commits that a crash can lose.
    auto r = n.exec("SHOW synchronous_commit");
    if (!r.empty() && std::string_view(r[0][0].c_str()) == "off") {
      n.exec("SET synchronous_commit = on");
    }
    conn_ = std::move(conn);
  } catch (const std::exception& e) {
    Status st = PgErrorToStatus(e, target_);
    if (st.code() != StatusCode::kUnavailable) {
      st = Status::Unavailable("database unavailable: " + target_.display + ": " +
                               ConnectReason(e.what()) + "; retrying");
    }
    Reset(st);
    return Status::Unavailable(
        last_error_.message() +
        (backoff_.count() > 0 ? " in " + std::to_string(backoff_.count()) + " ms" : std::string()));
  }
  if (was_down_) {
    LogInfo("store", "database connection restored", {{"role", role_}, {"db", target_.display}});
  }
  was_down_ = false;
  backoff_ = std::chrono::milliseconds{0};
  next_attempt_ = {};
  return conn_.get();
}

void PgConnection::Reset(const Status& why) {
  conn_.reset();
  if (!was_down_) {
    // It was working: the server may just have restarted, so the next Get() tries at once.
    backoff_ = std::chrono::milliseconds{0};
    next_attempt_ = {};
    LogWarn("store", "database connection lost",
            {{"role", role_}, {"db", target_.display}, {"error", why.message()}});
  } else {
    backoff_ = backoff_.count() == 0 ? kMinBackoff : std::min(backoff_ * 2, kMaxBackoff);
    next_attempt_ = std::chrono::steady_clock::now() + backoff_;
  }
  last_error_ = why;
  was_down_ = true;
}

}  // namespace gpupool
