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
	return b.execRows(ctx, head, tail, width, args, b.Exec)
}

// ExecRowsAtCommit is ExecRows with its statements run by ExecAtCommit: for rows Apply does not
// read back.
func (b *Batch) ExecRowsAtCommit(ctx context.Context, head, tail string, width int, args []any) error {
	return b.execRows(ctx, head, tail, width, args, b.ExecAtCommit)
}

func (b *Batch) execRows(ctx context.Context, head, tail string, width int, args []any, exec func(context.Context, string, ...any) error) error {
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
		if err := exec(ctx, q, args[i*width:(i+c)*width]...); err != nil {
			return err
		}
		i += c
	}
	return nil
}

// SizeClass is the power of two at or above n (n ≥ 1). Multi-row statements on SQLite are written
// for these sizes only: a statement text per row count would be parsed anew for most batches (the
// kept statements are per text, and at most a few hundred), while a few texts stay prepared.
func SizeClass(n int) int {
	c := 1
	for c < n {
		c *= 2
	}
	return c
}

// ByKeys returns a FROM clause that reads table's rows for each (tenant, id) pair of tenants and
// ids, with one probe of the table's key (tenantCol, idCol) per pair on both backends, and its
// arguments, for a statement with no other parameters. A list of tenants and a list of ids
// (tenant IN (…) AND id IN (…)) would probe every pair of the two instead, each tenant's id list
// over again.
//
// On Postgres the pairs are two arrays joined through unnest. On SQLite they are a constant list
// that the statement walks (a co-routine; CROSS JOIN keeps it the outer loop), each joined to its
// row; the list is padded to a power of two with NULL pairs, which match nothing and are not
// probed, so the text takes few forms and stays prepared.
func (b *Batch) ByKeys(table, tenantCol, idCol string, tenants, ids []string) (string, []any) {
	if b.DB.Dialect == sqldb.Postgres {
		return table + ` JOIN unnest(?::text[], ?::text[]) AS k(t, i) ON ` + tenantCol + ` = k.t AND ` + idCol + ` = k.i`,
			[]any{tenants, ids}
	}
	n := SizeClass(len(ids))
	args := make([]any, 0, 2*n)
	for j := range ids {
		args = append(args, tenants[j], ids[j])
	}
	for len(args) < 2*n {
		args = append(args, nil, nil)
	}
	return `(VALUES ` + strings.TrimSuffix(strings.Repeat("(?, ?), ", n), ", ") + `) AS k CROSS JOIN ` + table +
		` ON ` + tenantCol + ` = k.column1 AND ` + idCol + ` = k.column2`, args
}
