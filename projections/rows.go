package projections

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/casebook/casebook/internal/sqldb"
)

// maxRowsPerStatement bounds the rows of one multi-row VALUES statement on SQLite (a power of two);
// on Postgres the rows of a batch go in one statement whatever their count.
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

// ExecRows writes rows in the batch's transaction: head ("INSERT INTO t (a, b, …)") + the rows +
// tail. types names each column's Postgres type, in head's order: "text" or "bigint" (which also
// fills an INTEGER column). args holds the rows' values one row after the other, len(types) each;
// a value is a string for text, an integer for bigint, or nil (NULL). head and tail take no
// parameters.
//
// On Postgres the rows travel as one array per column, in one statement of one text whatever the
// row count (head + UnnestSelect(types) + tail): a text per row count would be prepared anew on
// each connection and planned at every run (a plan is kept only after five runs of one text),
// which cost Postgres more than writing the rows.
//
// On SQLite they go in multi-row VALUES statements of row counts from RowCounts, and a head
// "INSERT INTO …" runs as INSERT OR FAIL: a row that breaks a constraint fails the statement
// without undoing the rows before it, which spares SQLite the statement journal (a copy, written
// to a temporary file, of each page the statement changes that the transaction had already
// changed). The failed statement fails Apply, and the runtime rolls back the batch's transaction
// (or, applying events one by one, the event's savepoint), rows and all.
func (b *Batch) ExecRows(ctx context.Context, head, tail string, types []string, args []any) error {
	return b.rows(ctx, head, tail, types, args, b.Exec)
}

// ExecRowsAtCommit is ExecRows with its statements run by ExecAtCommit: for rows Apply does not
// read back.
func (b *Batch) ExecRowsAtCommit(ctx context.Context, head, tail string, types []string, args []any) error {
	return b.rows(ctx, head, tail, types, args, b.ExecAtCommit)
}

// rows writes the statements of ExecRows and runs each with exec.
func (b *Batch) rows(ctx context.Context, head, tail string, types []string, args []any, exec func(context.Context, string, ...any) error) error {
	width := len(types)
	if width == 0 || len(args)%width != 0 {
		return fmt.Errorf("projections: %d values for rows of %d columns", len(args), width)
	}
	if len(args) == 0 {
		return nil
	}
	if b.DB.Dialect == sqldb.Postgres {
		q, arrays, err := unnestRows(types, args)
		if err != nil {
			return fmt.Errorf("projections: %s: %w", head, err)
		}
		return exec(ctx, head+q+tail, arrays...)
	}
	if rest, ok := strings.CutPrefix(head, "INSERT INTO "); ok {
		head = "INSERT OR FAIL INTO " + rest
	}
	n := len(args) / width
	limit := maxRowsPerStatement
	for limit > 1 && limit*width > 32766 { // SQLite's default bound on a statement's parameters
		limit /= 2
	}
	group := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	i := 0
	for _, c := range RowCounts(n, limit) {
		q := head + " VALUES " + strings.TrimSuffix(strings.Repeat(group+", ", c), ", ") + tail
		if err := exec(ctx, q, args[i*width:(i+c)*width]...); err != nil {
			return err
		}
		i += c
	}
	return nil
}

// Columns splits a column list written with Postgres types ("tenant_id text, version bigint")
// into the names, comma-separated for an INSERT's column list, and the types, for ExecRows. It
// panics on a column without a type or of a type ExecRows cannot send: declared at package level,
// such a mistake stops the program at start-up on either backend.
func Columns(decl string) (names string, types []string) {
	var ns []string
	for col := range strings.SplitSeq(decl, ",") {
		f := strings.Fields(col)
		if len(f) != 2 || f[1] != "text" && f[1] != "bigint" {
			panic(fmt.Sprintf("projections: column %q is not a name and a type, text or bigint", col))
		}
		ns = append(ns, f[0])
		types = append(types, f[1])
	}
	return strings.Join(ns, ", "), types
}

// UnnestSelect is the SELECT that reads rows from one array per column, the arrays being the
// statement's parameters $1… in types' order (Postgres): what ExecRows writes there after the head.
func UnnestSelect(types []string) string {
	var q strings.Builder
	q.WriteString(" SELECT * FROM unnest(")
	for c, typ := range types {
		if c > 0 {
			q.WriteString(", ")
		}
		q.WriteString("$" + strconv.Itoa(c+1) + "::" + typ + "[]")
	}
	q.WriteString(")")
	return q.String()
}

// unnestRows returns UnnestSelect(types) and its arrays: []string or []int64, or []*string or
// []*int64 for a column that holds a NULL.
func unnestRows(types []string, args []any) (string, []any, error) {
	width, n := len(types), len(args)/len(types)
	arrays := make([]any, width)
	for c, typ := range types {
		var err error
		switch typ {
		case "text":
			arrays[c], err = column(args, c, width, n, stringOf)
		case "bigint":
			arrays[c], err = column(args, c, width, n, int64Of)
		default:
			err = fmt.Errorf("column %d: type %q is neither text nor bigint", c+1, typ)
		}
		if err != nil {
			return "", nil, err
		}
	}
	return UnnestSelect(types), arrays, nil
}

// column gathers column c of the rows in args: a []T, or a []*T when a value is nil.
func column[T any](args []any, c, width, n int, as func(any) (T, bool)) (any, error) {
	vals := make([]T, n)
	var nulls []bool
	for r := range n {
		v := args[r*width+c]
		if v == nil {
			if nulls == nil {
				nulls = make([]bool, n)
			}
			nulls[r] = true
			continue
		}
		t, ok := as(v)
		if !ok {
			return nil, fmt.Errorf("row %d column %d: a %T for %T", r+1, c+1, v, vals[0])
		}
		vals[r] = t
	}
	if nulls == nil {
		return vals, nil
	}
	ptrs := make([]*T, n)
	for r := range n {
		if !nulls[r] {
			ptrs[r] = &vals[r]
		}
	}
	return ptrs, nil
}

// stringOf is v as a string: a string, or a value of a string kind (domain.TenantID).
func stringOf(v any) (string, bool) {
	if s, ok := v.(string); ok {
		return s, true
	}
	if r := reflect.ValueOf(v); r.Kind() == reflect.String {
		return r.String(), true
	}
	return "", false
}

// int64Of is v as an int64: a value of any integer kind that fits.
func int64Of(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int64(r.Uint()), r.Uint() <= math.MaxInt64
	}
	return 0, false
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
