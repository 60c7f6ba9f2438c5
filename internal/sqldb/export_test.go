package sqldb

import "database/sql"

// HandAtCommit hands q to conn's driver connection as Tx.commit does just before database/sql
// commits, and reports whether the connection takes such statements.
func HandAtCommit(conn *sql.Conn, q string) bool {
	handed := false
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*pipeConn); ok {
			c.atCommit, handed = []atCommit{{query: q}}, true
		}
		return nil
	})
	return handed
}

// PostgresConns exposes postgresConns.
func PostgresConns(procs int) int32 { return postgresConns(procs) }
