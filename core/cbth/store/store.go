// Package store opens cbth's SQLite database (WAL, synchronous=FULL,
// busy_timeout, BEGIN IMMEDIATE for every transaction), applies the schema
// migrations recorded in a version table, and runs write transactions.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/cortexfs/cortexfs/core/abi"
)

// TimeFormat is RFC 3339 in UTC with a fixed-width fraction, so stored
// times compare correctly as text.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// TS formats t for the store and for JSON output.
func TS(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTS parses a stored time.
func ParseTS(s string) (time.Time, error) { return time.Parse(TimeFormat, s) }

// Store is an open cbth database.
type Store struct {
	DB *sql.DB
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// writes serialises this process's transactions so they queue in Go
	// instead of spinning on SQLITE_BUSY; busy_timeout covers other processes.
	writes sync.Mutex
	// gmu guards queue: the functions waiting for a group commit (group.go).
	gmu   sync.Mutex
	queue []*entry
	// commits and grouped count COMMITs and the functions they made
	// durable, for the daemon's status and make bench.
	commits, grouped atomic.Int64
}

// Open opens (creating with mode 0600) the database at path and migrates it
// to the latest schema.
func Open(ctx context.Context, path string) (*Store, error) {
	// SQLite gives -wal and -shm the mode of the main file, so creating it
	// 0600 first keeps all three private.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "store: cannot open %s: %v", path, err)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "store: %v", err)
	}
	// A corrupt store is refused before anything writes to it (opening it
	// read-write would set the journal mode, migrate, checkpoint): the file
	// is kept as it is for the operator.
	if fi.Size() > 0 {
		if err := checkReadOnly(ctx, path); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "1")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, abi.Errorf(abi.EIO, "store: %v", err)
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(0)
	s := &Store{DB: db, Now: time.Now}
	if fi.Size() > 0 {
		var res string
		if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil || res != "ok" {
			db.Close()
			if err != nil {
				return nil, corrupt(path, err.Error())
			}
			return nil, corrupt(path, res)
		}
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// checkReadOnly runs PRAGMA quick_check on a read-only connection.
func checkReadOnly(ctx context.Context, path string) error {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_query_only=1"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return abi.Errorf(abi.EIO, "store: %v", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		if corruptErr(err) {
			return corrupt(path, err.Error())
		}
		// Not provably corrupt (a read-only view of a WAL store can need
		// recovery first): the read-write open below checks again.
		return nil
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return corrupt(path, err.Error())
		}
		if s != "ok" && len(problems) < 5 {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		if corruptErr(err) {
			return corrupt(path, err.Error())
		}
		return nil
	}
	if len(problems) > 0 {
		return corrupt(path, strings.Join(problems, "; "))
	}
	return nil
}

func corruptErr(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB)
}

func corrupt(path, why string) error {
	return abi.Errorf(abi.EIO, "store %s is corrupt (%s); nothing was written to it: keep it for inspection, "+
		"restore a backup or move it away to start afresh", path, why)
}

// Close closes the database.
func (s *Store) Close() error { return s.DB.Close() }

// Version returns the applied schema version.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.DB.QueryRowContext(ctx, `SELECT COALESCE(MAX(version),0) FROM schema_version`).Scan(&v)
	return v, err
}

// LatestVersion is the schema version this binary writes.
func LatestVersion() int { return len(migrations) }

func (s *Store) migrate(ctx context.Context) error {
	return s.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version),0) FROM schema_version`).Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return abi.Errorf(abi.EPROTO, "store: schema version %d is newer than this binary's %d", v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("store: migration %d: %w", i+1, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version, applied_at) VALUES (?, ?)`,
				i+1, TS(s.Now())); err != nil {
				return err
			}
		}
		return nil
	})
}

// Integrity runs PRAGMA integrity_check and returns its verdict ("ok").
func (s *Store) Integrity(ctx context.Context) (string, error) {
	var r string
	err := s.DB.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&r)
	return r, err
}

// Pragmas reports the effective journal mode, synchronous level and busy
// timeout, for doctor and tests.
func (s *Store) Pragmas(ctx context.Context) (journal string, synchronous, busy int, err error) {
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return "", 0, 0, err
	}
	defer conn.Close()
	if err = conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		return
	}
	if err = conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&synchronous); err != nil {
		return
	}
	err = conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
	return
}

// IsNoRows reports sql.ErrNoRows.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// NullTS returns a stored time or nil for the zero time.
func NullTS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return TS(t)
}
