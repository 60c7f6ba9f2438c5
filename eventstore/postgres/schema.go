package postgres

import (
	"github.com/casebook/casebook/internal/sqldb"
)

// The (stream, revision) constraint is declared before the id constraint so that, when two appends
// race with the same event ids, the loser sees the revision conflict (index order is creation order).
var migrations = []sqldb.Migration{{Version: 1, Postgres: `
CREATE TABLE events (
	seq         bigserial   NOT NULL,
	xid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
	stream      text        NOT NULL,
	revision    bigint      NOT NULL CHECK (revision >= 0),
	id          text        NOT NULL,
	type        text        NOT NULL,
	data        bytea       NOT NULL,
	metadata    bytea       NOT NULL,
	recorded_at timestamptz NOT NULL,
	CONSTRAINT events_position_pkey PRIMARY KEY (xid, seq),
	CONSTRAINT events_stream_revision_key UNIQUE (stream, revision),
	CONSTRAINT events_id_key UNIQUE (id)
)`}, {Version: 2, Postgres: claimsMigration}}

// claimsMigration creates eventstore.ClaimsTable and claims the earlier inquiry streams (see there).
const claimsMigration = `
CREATE TABLE stream_claims (
	name   text NOT NULL PRIMARY KEY,
	stream text NOT NULL
);
INSERT INTO stream_claims (name, stream)
	SELECT stream, stream FROM events WHERE revision = 0 AND starts_with(stream, 'inquiry-')`

const (
	constraintStreamRevision = "events_stream_revision_key"
	constraintID             = "events_id_key"
)
