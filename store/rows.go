package store

import (
	"context"
	"strconv"
	"strings"
)

// rowChunks are the row counts of the multi-row statements execRows runs:
// a few fixed sizes, so that each statement has at most four texts for the
// databases to prepare (and the statement cache to keep).
var rowChunks = [...]int{64, 16, 4, 1}

// execRows writes rows with head + "(…), (…)" + tail, width arguments per
// row, in as few statements as the chunk sizes allow (a success that makes
// hundreds of members ready writes hundreds of rows), through execLater.
func (t cachedTx) execRows(ctx context.Context, head, tail string, width int, rows [][]any) error {
	for len(rows) > 0 {
		n := 1
		for _, c := range rowChunks {
			if len(rows) >= c {
				n = c
				break
			}
		}
		args := make([]any, 0, n*width)
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if err := t.execLater(ctx, head+valuesList(n, width)+tail, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// valuesList is "($1, $2), ($3, $4)" for n rows of width placeholders.
func valuesList(n, width int) string {
	var b strings.Builder
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range width {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(r*width + c + 1))
		}
		b.WriteByte(')')
	}
	return b.String()
}
