package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// listQuery is one filtered, paged listing of a table ordered by (key,
// id): sandboxes (by started_at) and snapshots (by created_at) share it.
// Paging is by keyset, not offset: a page starts just after the position of
// the last row seen, so rows made or removed between pages never shift
// another row into or out of the next page.
type listQuery struct {
	table, kind, cols string // kind names the rows in messages ("sandbox")
	key               string // the time column rows are ordered by; "" = created_at
	desc              bool   // newest first
	where             []string
	args              []any
	after             string // an id or Cursor() to start after
	limit             int    // 0 = no limit
}

// querier runs queries: a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs a query and scans every row it returns with scan; what
// names the query in errors ("list templates").
func queryAll[T any](ctx context.Context, db querier, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, dbErr(err))
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, dbErr(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, dbErr(err))
	}
	return out, nil
}

// runList runs q and scans every row with scan.
func runList[T any](ctx context.Context, s *conns, q listQuery, scan func(scanner) (T, error)) ([]T, error) {
	if q.key == "" {
		q.key = "created_at"
	}
	cmp, dir := ">", ""
	if q.desc {
		cmp, dir = "<", " DESC"
	}
	if q.after != "" {
		at, id, err := s.resolveCursor(ctx, q, q.after)
		if err != nil {
			return nil, err
		}
		q.where = append(q.where, `(`+q.key+`, id) `+cmp+` (?, ?)`)
		q.args = append(q.args, at, id)
	}
	if q.limit < 0 {
		return nil, fmt.Errorf("list limit %d is negative: %w", q.limit, errdefs.ErrInvalid)
	}
	sql := `SELECT ` + q.cols + ` FROM ` + q.table
	if len(q.where) > 0 {
		sql += ` WHERE ` + strings.Join(q.where, ` AND `)
	}
	sql += ` ORDER BY ` + q.key + dir + `, id` + dir
	if q.limit > 0 {
		sql += ` LIMIT ?`
		q.args = append(q.args, q.limit)
	}
	return queryAll(ctx, s.r, "list "+q.table, scan, sql, q.args...)
}

// resolveCursor turns a filter's After into the (q.key, id) position to
// start after. q's kind names the rows ("sandbox"), its table and key
// (constants, never user input) hold them.
func (s *conns) resolveCursor(ctx context.Context, q listQuery, after string) (int64, string, error) {
	kind := q.kind
	if ns, id, ok := strings.Cut(after, "."); ok {
		n, err := strconv.ParseInt(ns, 10, 64)
		if err != nil || ids.Validate("cursor", id) != nil {
			return 0, "", fmt.Errorf("page cursor %q is malformed; pass the id or Cursor() of the last %s listed: %w", after, kind, errdefs.ErrInvalid)
		}
		return n, id, nil
	}
	var at int64
	err := s.r.QueryRowContext(ctx, `SELECT `+q.key+` FROM `+q.table+` WHERE id = ?`, after).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("page cursor: %s %s no longer exists; list again from the start or page with Cursor(): %w", kind, after, errdefs.ErrInvalid)
	}
	if err != nil {
		return 0, "", fmt.Errorf("page cursor %s: %w", after, dbErr(err))
	}
	return at, after, nil
}
