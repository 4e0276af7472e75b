package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Group commit. With WAL and synchronous=FULL every COMMIT costs one
// fsync of the -wal file, and the fsync, not the SQL, is what bounds a
// durable write path. Callers that arrive while a commit is in flight
// therefore queue, and the first of them (the leader) runs everything
// queued behind it in ONE transaction: each caller's function in its own
// SAVEPOINT, then a single COMMIT. Only after that COMMIT returned is any
// caller in the group answered, so the promise of Tx is unchanged: when
// it returns nil, the caller's writes are durable; when it returns an
// error, none of them are. A function that fails rolls back to its
// savepoint and undoes only its own writes. A lone caller pays nothing
// extra: nobody is queued, so it leads a group of one, without savepoints.
// This is the writer queue of LevelDB and the group commit of databases
// generally; what is new here is only that the unit of work is a Go
// function run inside the shared transaction.

// maxGroup bounds one transaction: a group stops growing at this many
// functions (a bulk caller's rest goes into the next group).
const maxGroup = 1024

// entry is one function waiting to run in a group.
type entry struct {
	ctx      context.Context
	fn       func(*sql.Tx) error
	w        *waiter
	running  bool // taken by a leader: no longer cancellable
	done     bool
	err      error
	panicked any
}

// waiter is one caller of Tx or TxEach, waiting for its entries.
type waiter struct {
	wake    chan struct{} // capacity 1: a state change to look at
	entries []*entry
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// CommitStats reports how many COMMITs (one fsync each) this store made and
// how many functions they made durable.
func (s *Store) CommitStats() (commits, functions int64) { return s.commits.Load(), s.grouped.Load() }

// Tx runs fn in a BEGIN IMMEDIATE transaction, possibly shared with
// concurrent callers (see group commit above), and returns once the
// transaction is durable: nil means fn's writes are committed; an error is
// fn's own (its writes were undone) or the commit's (nothing of the group
// was committed). Every read-then-write goes through here. fn must not
// call Tx itself, and should do nothing but SQL: it may run on another
// goroutine than the caller's.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.TxEach(ctx, []func(*sql.Tx) error{fn})[0]
}

// TxEach runs every fn as if by its own Tx (each in its own savepoint, so
// one failing undoes only itself) but waits for all of them together: a
// bulk caller's functions commit in as few transactions (and fsyncs) as
// maxGroup allows. errs[i] is fn[i]'s outcome.
func (s *Store) TxEach(ctx context.Context, fns []func(tx *sql.Tx) error) (errs []error) {
	if len(fns) == 0 {
		return nil
	}
	w := &waiter{wake: make(chan struct{}, 1)}
	for _, fn := range fns {
		w.entries = append(w.entries, &entry{ctx: ctx, fn: fn, w: w})
	}
	s.gmu.Lock()
	s.queue = append(s.queue, w.entries...)
	if s.queue[0].w == w {
		w.signal()
	}
	s.gmu.Unlock()
	cancel := ctx.Done()
	for {
		select {
		case <-w.wake:
		case <-cancel:
			cancel = nil
			s.withdraw(w, ctx.Err())
		}
		s.gmu.Lock()
		finished, lead := true, false
		for _, e := range w.entries {
			finished = finished && e.done
		}
		if !finished && len(s.queue) > 0 && s.queue[0].w == w && !s.queue[0].running {
			lead = true
		}
		s.gmu.Unlock()
		if finished {
			break
		}
		if lead {
			s.runGroup()
		}
	}
	errs = make([]error, len(w.entries))
	for i, e := range w.entries {
		if e.panicked != nil {
			panic(e.panicked)
		}
		errs[i] = e.err
	}
	return errs
}

// withdraw takes a cancelled caller's entries that no leader has taken
// out of the queue; they never ran. Entries already running are waited
// for: their outcome is not known until their commit returns.
func (s *Store) withdraw(w *waiter, why error) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	kept := s.queue[:0:0]
	for _, e := range s.queue {
		if e.w == w && !e.running {
			e.done, e.err = true, abi.Errorf(abi.ECANCELED, "store: not run: %v", why)
			continue
		}
		kept = append(kept, e)
	}
	s.queue = kept
	w.signal()
	if len(s.queue) > 0 && !s.queue[0].running {
		s.queue[0].w.signal()
	}
}

// runGroup is run by the leader: it takes the queue's head (up to
// maxGroup entries), runs them in one transaction and commits, then
// answers every waiter of the group and wakes the next leader.
func (s *Store) runGroup() {
	s.gmu.Lock()
	n := min(len(s.queue), maxGroup)
	group := append([]*entry(nil), s.queue[:n]...)
	for _, e := range group {
		e.running = true
	}
	s.gmu.Unlock()

	s.writes.Lock()
	s.execute(group)
	s.writes.Unlock()

	s.gmu.Lock()
	s.queue = append(s.queue[:0:0], s.queue[n:]...)
	for _, e := range group {
		e.done = true
		e.w.signal()
	}
	if len(s.queue) > 0 {
		s.queue[0].w.signal()
	}
	s.gmu.Unlock()
}

// execute runs a group to its outcome. The common case costs one pass
// without savepoints: a savepoint is cheap to open but makes SQLite copy
// every page the function changes into its statement journal, which
// doubles the cost of a small insert. Only when some function fails does
// the group run again with a savepoint around each, so the failure undoes
// its own writes only; and if the shared transaction itself breaks, each
// function runs once more on its own.
func (s *Store) execute(group []*entry) {
	if len(group) == 1 {
		s.commitGroup(group, modeAlone)
		return
	}
	if s.commitGroup(group, modeOptimistic) == nil {
		return
	}
	if s.commitGroup(group, modeSavepoints) == nil {
		return
	}
	for _, e := range group {
		if e.panicked == nil {
			s.commitGroup([]*entry{e}, modeAlone)
		}
	}
}

type groupMode int

const (
	modeAlone      groupMode = iota // one function: its error rolls back
	modeOptimistic                  // no savepoints: any error rolls everything back
	modeSavepoints                  // each function in its own savepoint
)

// errRetry says a pass ended without a commit and the group must run again
// in the next mode (nothing of it was written).
var errRetry = errors.New("store: group must run again")

// commitGroup runs the group's functions in one transaction and commits.
// It returns errRetry (or the reason) when the transaction ended without
// COMMIT for a reason the next mode handles; every other outcome is in the
// entries' err.
func (s *Store) commitGroup(group []*entry, mode groupMode) error {
	conn, err := s.DB.Conn(context.Background())
	if err != nil {
		setAll(group, abi.Errorf(abi.EBUSY, "store: cannot begin: %v", err))
		return nil
	}
	defer conn.Close()
	tx, err := conn.BeginTx(context.Background(), nil)
	if err != nil {
		setAll(group, abi.Errorf(abi.EBUSY, "store: cannot begin: %v", err))
		return nil
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	applied := 0
	for _, e := range group {
		if e.panicked != nil {
			continue // never run again
		}
		if err := e.ctx.Err(); err != nil {
			e.err = abi.Errorf(abi.ECANCELED, "store: not run: %v", err)
			continue
		}
		if mode == modeSavepoints {
			if _, err := tx.Exec(`SAVEPOINT g`); err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
		}
		e.err, e.panicked = call(e.fn, tx)
		if e.panicked == nil && !inTransaction(conn) {
			// fn ended the transaction (COMMIT or ROLLBACK of its own):
			// what follows would run unprotected.
			if mode == modeAlone {
				e.err = abi.Errorf(abi.EIO, "store: a transaction function ended its transaction")
				return nil
			}
			return errors.New("a grouped function ended the transaction")
		}
		switch {
		case e.panicked != nil && mode == modeAlone:
			return nil
		case e.panicked != nil:
			// The transaction may be in any state; the others run again.
			return fmt.Errorf("panic in a grouped transaction: %v", e.panicked)
		case e.err != nil && mode == modeAlone:
			return nil // the deferred rollback undoes it
		case e.err != nil && mode == modeOptimistic:
			return errRetry
		case mode == modeSavepoints:
			if e.err != nil {
				if _, err := tx.Exec(`ROLLBACK TO g`); err != nil {
					return fmt.Errorf("rollback to savepoint: %w", err)
				}
			}
			if _, err := tx.Exec(`RELEASE g`); err != nil {
				return fmt.Errorf("release savepoint: %w", err)
			}
		}
		if e.err == nil {
			applied++
		}
	}
	if applied == 0 {
		return nil // nothing to commit
	}
	committed = true
	if err := tx.Commit(); err != nil {
		// Not retried: a COMMIT that failed may still have reached the
		// -wal file, so running a function again could apply it twice.
		err = abi.Errorf(abi.EIO, "store: commit: %v", err)
		for _, e := range group {
			if e.err == nil && e.panicked == nil {
				e.err = err
			}
		}
		return nil
	}
	s.commits.Add(1)
	s.grouped.Add(int64(applied))
	return nil
}

// inTransaction reports whether conn is still inside its transaction
// (SQLite's autocommit flag is off).
func inTransaction(conn *sql.Conn) bool {
	in := false
	conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		in = ok && !c.AutoCommit()
		return nil
	})
	return in
}

func setAll(group []*entry, err error) {
	for _, e := range group {
		e.err = err
	}
}

// call runs fn, turning a panic into a value the caller re-raises in its
// own goroutine.
func call(fn func(*sql.Tx) error, tx *sql.Tx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return fn(tx), nil
}
