package projections

import (
	"context"
	"strings"

	"github.com/casebook/casebook/internal/sqldb"
)

// maxRowsPerStatement bounds the rows of one multi-row statement (a power of two).
const maxRowsPerStatement = 256

// RowCounts splits n rows into statements of power-of-two row counts, at most max (a power of
// two) each: every full max, then the binary digits of the rest, largest first. On SQLite a
// statement text is prepared once and kept, so a few texts then serve every batch size instead of
// one text (parsed anew) per row count.
func RowCounts(n, max int) []int {
	var out []int
	for ; n >= max; n -= max {
		out = append(out, max)
	}
	for c := max / 2; c >= 1; c /= 2 {
		if n >= c {
			out = append(out, c)
			n -= c
		}
	}
	return out
}

// ExecRows writes rows with multi-row statements in the batch's transaction: head + " VALUES " +
// one (?, …) group of width marks per row + tail, in row counts from RowCounts on SQLite and in
// statements of up to 256 rows on Postgres. args holds the rows' values one row after the other
// (width each).
//
// On SQLite a head "INSERT INTO …" runs as INSERT OR FAIL: a row that breaks a constraint fails
// the statement without undoing the rows before it, which spares SQLite the statement journal (a
// copy, written to a temporary file, of each page the statement changes that the transaction had
// already changed). The failed statement fails Apply, and the runtime rolls back the batch's
// transaction (or, applying events one by one, the event's savepoint), rows and all.
func (b *Batch) ExecRows(ctx context.Context, head, tail string, width int, args []any) error {
	if b.DB.Dialect == sqldb.SQLite {
		if rest, ok := strings.CutPrefix(head, "INSERT INTO "); ok {
			head = "INSERT OR FAIL INTO " + rest
		}
	}
	n := len(args) / width
	limit := maxRowsPerStatement
	for limit > 1 && limit*width > 32766 { // SQLite's default bound on a statement's parameters
		limit /= 2
	}
	group := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	counts := RowCounts(n, limit)
	if b.DB.Dialect == sqldb.Postgres {
		// pgx prepares each text anew on a connection too, but a round trip per statement
		// costs more there than a text per row count: one statement per limit rows.
		counts = counts[:0]
		for rest := n; rest > 0; rest -= min(rest, limit) {
			counts = append(counts, min(rest, limit))
		}
	}
	i := 0
	for _, c := range counts {
		q := head + " VALUES " + strings.TrimSuffix(strings.Repeat(group+", ", c), ", ") + tail
		if err := b.Exec(ctx, q, args[i*width:(i+c)*width]...); err != nil {
			return err
		}
		i += c
	}
	return nil
}
