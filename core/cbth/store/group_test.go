package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cbth.db")
	s, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

func insertThread(id string) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO threads(source_thread_id, updated_at) VALUES (?, 'x')`, id)
		return err
	}
}

// committed reads from a fresh connection to the file: what a restarted
// daemon would see.
func committed(t *testing.T, path string) map[string]bool {
	t.Helper()
	got, err := readCommitted(path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func readCommitted(path string) (map[string]bool, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query(`SELECT source_thread_id FROM threads`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		got[id] = true
	}
	return got, rows.Err()
}

// waitQueued waits until n entries are queued behind a running group.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.gmu.Lock()
		q := len(s.queue)
		s.gmu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdFirst starts a Tx whose function blocks until release is closed, so
// that callers arriving meanwhile queue behind it as one group.
func holdFirst(t *testing.T, s *Store) (release chan struct{}, done chan error) {
	release, done = make(chan struct{}), make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- s.Tx(context.Background(), func(tx *sql.Tx) error {
			close(started)
			<-release
			return insertThread("first")(tx)
		})
	}()
	<-started
	return release, done
}

func TestGroupCommitSharesOneTransaction(t *testing.T) {
	s, path := openTemp(t)
	release, first := holdFirst(t, s)
	const n = 40
	errs := make(chan error, n)
	var answered sync.WaitGroup
	for i := range n {
		answered.Add(1)
		go func() {
			defer answered.Done()
			id := fmt.Sprintf("t%d", i)
			err := s.Tx(context.Background(), insertThread(id))
			if err == nil {
				var got map[string]bool
				if got, err = readCommitted(path); err == nil && !got[id] {
					err = fmt.Errorf("%s answered before it was committed", id)
				}
			}
			errs <- err
		}()
	}
	waitQueued(t, s, n+1) // the held one is still the queue's head
	before := s.commits.Load()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	answered.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(committed(t, path)); got != n+1 {
		t.Errorf("%d rows committed, want %d", got, n+1)
	}
	// The held transaction is one commit; everyone queued behind it is
	// the next group: one more commit for all n.
	if c := s.commits.Load() - before; c != 2 {
		t.Errorf("%d commits for %d queued writers, want 2 (the held one and one group)", c, n)
	}
}

func TestGroupCommitFailureUndoesOnlyItsOwnWrites(t *testing.T) {
	s, path := openTemp(t)
	release, first := holdFirst(t, s)
	boom := abi.Errorf(abi.EINVAL, "boom")
	var wg sync.WaitGroup
	results := make([]error, 3)
	fns := []func(*sql.Tx) error{
		insertThread("a"),
		func(tx *sql.Tx) error { // writes, then fails: its row must go
			if err := insertThread("b")(tx); err != nil {
				return err
			}
			return boom
		},
		insertThread("a"), // a constraint error of its own (a exists by then)
	}
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Tx(context.Background(), fn)
		}()
		waitQueued(t, s, i+2) // keep the order a, b, a
	}
	before := s.commits.Load()
	close(release)
	<-first
	wg.Wait()
	got := committed(t, path)
	if c := s.commits.Load() - before; c != 2 {
		t.Errorf("%d commits, want 2: the failures are undone by savepoints, the rest commits together", c)
	}
	if results[0] != nil || results[1] != boom || results[2] == nil {
		t.Fatalf("results %v", results)
	}
	if !got["a"] || got["b"] || !got["first"] || len(got) != 2 {
		t.Fatalf("committed %v, want first and a only", got)
	}
}

func TestGroupCommitBrokenTransactionRetriesOthersAlone(t *testing.T) {
	s, path := openTemp(t)
	release, first := holdFirst(t, s)
	var wg sync.WaitGroup
	results := make([]error, 3)
	fns := []func(*sql.Tx) error{
		insertThread("x"),
		func(tx *sql.Tx) error { // ends the shared transaction under everyone
			_, err := tx.Exec(`ROLLBACK`)
			return err
		},
		insertThread("y"),
	}
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Tx(context.Background(), fn)
		}()
		waitQueued(t, s, i+2)
	}
	close(release)
	<-first
	wg.Wait()
	got := committed(t, path)
	if results[0] != nil || results[2] != nil || !got["x"] || !got["y"] {
		t.Fatalf("results %v, committed %v: the others must commit when run alone", results, got)
	}
	if results[1] == nil {
		t.Errorf("the function that rolled back the transaction reported success")
	}
}

func TestGroupCommitPanicReachesItsCaller(t *testing.T) {
	s, path := openTemp(t)
	release, first := holdFirst(t, s)
	var wg sync.WaitGroup
	var other error
	var recovered any
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer func() { recovered = recover() }()
		s.Tx(context.Background(), func(tx *sql.Tx) error { panic("kaboom") })
	}()
	waitQueued(t, s, 2)
	go func() {
		defer wg.Done()
		other = s.Tx(context.Background(), insertThread("z"))
	}()
	waitQueued(t, s, 3)
	close(release)
	<-first
	wg.Wait()
	if recovered != "kaboom" {
		t.Errorf("the panicking caller recovered %v", recovered)
	}
	if other != nil || !committed(t, path)["z"] {
		t.Errorf("the other caller: %v", other)
	}
}

func TestGroupCommitCancelledWhileQueuedNeverRuns(t *testing.T) {
	s, path := openTemp(t)
	release, first := holdFirst(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	res := make(chan error, 1)
	go func() {
		res <- s.Tx(ctx, func(tx *sql.Tx) error {
			ran = true
			return insertThread("late")(tx)
		})
	}()
	waitQueued(t, s, 2)
	cancel()
	err := <-res
	if abi.CodeOf(err) != abi.ECANCELED {
		t.Errorf("cancelled while queued: %v", err)
	}
	close(release)
	<-first
	if ran || committed(t, path)["late"] {
		t.Errorf("a withdrawn function ran")
	}
	// The queue still works after a withdrawal.
	if err := s.Tx(context.Background(), insertThread("after")); err != nil {
		t.Fatal(err)
	}
}

func TestTxEachBulk(t *testing.T) {
	s, path := openTemp(t)
	const n = maxGroup + 200 // two groups
	fns := make([]func(*sql.Tx) error, n)
	for i := range fns {
		fns[i] = insertThread(fmt.Sprintf("b%d", i))
	}
	fns[7] = insertThread("b3") // a duplicate: fails alone
	before := s.commits.Load()
	errs := s.TxEach(context.Background(), fns)
	for i, err := range errs {
		if (err != nil) != (i == 7) {
			t.Errorf("line %d: %v", i, err)
		}
	}
	if got := len(committed(t, path)); got != n-1 {
		t.Errorf("%d committed, want %d", got, n-1)
	}
	if c := s.commits.Load() - before; c != 2 {
		t.Errorf("%d commits for %d functions, want 2", c, n)
	}
}
