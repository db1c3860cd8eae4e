// Versioned schema migrations for the PostgreSQL store.
//
// Each migration is a version number, a name and SQL. Migrate() brings a database up to the
// newest version: it takes a session advisory lock (so two daemons starting at once take turns),
// creates schema_migrations if missing, and applies each missing version in its own transaction
// together with its schema_migrations row. Applied versions are never edited; a change to the
// schema is a new version appended to the list in migrations.cc.
//
// Thread safety: Migrate() uses the connection it is given and nothing else.
#pragma once

#include <pqxx/connection>
#include <span>
#include <string_view>

#include "base/status.h"

namespace gpupool {

struct Migration {
  int version;
  std::string_view name;
  std::string_view sql;
};

// Every migration. Versions are unique; gaps are allowed (each engineer's range), and a database
// gets every version it lacks.
std::span<const Migration> Migrations();

// Applies what is missing. FAILED_PRECONDITION when the database has a version this build does
// not know (a newer gpupoold migrated it); UNAVAILABLE when the connection fails.
Status Migrate(pqxx::connection& conn, const std::string& display);

}  // namespace gpupool
