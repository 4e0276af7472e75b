package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestOpenPragmasModesAndMigrations(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cbth.db")
	s, err := Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	j, sync, busy, err := s.Pragmas(ctx)
	if err != nil || j != "wal" || sync != 2 || busy < 1000 {
		t.Fatalf("pragmas journal=%s synchronous=%d busy=%d %v", j, sync, busy, err)
	}
	if v, _ := s.Version(ctx); v != LatestVersion() {
		t.Fatalf("version %d", v)
	}
	if err := s.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO threads(source_thread_id, updated_at) VALUES ('x','y')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p, p + "-wal", p + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v (umask 0)", f, fi.Mode(), err)
		}
	}
	s.Close()
	s, err = Open(ctx, p) // reopening applies nothing twice
	if err != nil {
		t.Fatal(err)
	}
	var n int
	s.DB.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n)
	if n != LatestVersion() {
		t.Errorf("%d version rows", n)
	}
	s.DB.Exec(`INSERT INTO schema_version(version, applied_at) VALUES (99, 'x')`)
	s.Close()
	if _, err := Open(ctx, p); abi.CodeOf(err) != abi.EPROTO {
		t.Errorf("newer schema: %v", err)
	}
}

func TestTxRollsBackOnError(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boom := abi.Errorf(abi.EINVAL, "boom")
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		tx.Exec(`INSERT INTO threads(source_thread_id, updated_at) VALUES ('x','y')`)
		return boom
	})
	var n int
	s.DB.QueryRow(`SELECT COUNT(*) FROM threads`).Scan(&n)
	if err != boom || n != 0 {
		t.Errorf("err %v rows %d", err, n)
	}
}

func TestSchemaChecksRefuseBadStates(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "cbth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := []string{
		`INSERT INTO batches(batch_id, seq, source_thread_id, target_kind, state, first_ready_at, last_ready_at,
			max_delivery_attempts, created_at, updated_at) VALUES ('b',1,'t','cli','armed','x','x',3,'x','x')`,
		`INSERT INTO batches(batch_id, seq, source_thread_id, target_kind, state, first_ready_at, last_ready_at,
			max_delivery_attempts, created_at, updated_at, close_reason) VALUES ('b',1,'t','cli','closed','x','x',3,'x','x','done')`,
		`INSERT INTO batches(batch_id, seq, source_thread_id, target_kind, state, first_ready_at, last_ready_at,
			max_delivery_attempts, created_at, updated_at) VALUES ('b',1,'t','cli','closed','x','x',3,'x','x')`,
	}
	for _, q := range bad {
		if _, err := s.DB.Exec(q); err == nil {
			t.Errorf("schema accepted: %s", q)
		}
	}
}
