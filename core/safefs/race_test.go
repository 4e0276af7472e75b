package safefs

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSymlinkSwapRace plays a user who owns a directory on the way and
// swaps it for a symlink to a directory they must not reach, in a loop,
// while a privileged worker creates directories, chowns and chmods them,
// writes, appends and removes beneath the root. Whatever interleaving the
// scheduler picks, nothing outside may change: not an entry, not a mode,
// not an owner.
func TestSymlinkSwapRace(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		must(t, os.Chmod(fx.outside, 0o755))
		owner := Keep
		if os.Geteuid() == 0 {
			owner = Owner{UID: 4242, GID: 4242}
		}
		user := filepath.Join(fx.root, "home", "u")
		must(t, os.MkdirAll(filepath.Join(user, "session"), 0o755))
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()

		var stop atomic.Bool
		var wg sync.WaitGroup
		swaps := 0
		// The attacker: flip session/ (a middle component) and
		// session/m (the last component MkdirAll creates) between a real
		// directory and a symlink to outside.
		wg.Go(func() {
			sess := filepath.Join(user, "session")
			for !stop.Load() {
				_ = os.Rename(sess, sess+".real")
				_ = os.Symlink(fx.outside, sess)
				time.Sleep(time.Microsecond)
				_ = os.Remove(sess)
				_ = os.Rename(sess+".real", sess)
				m := filepath.Join(sess, "m")
				_ = os.RemoveAll(m)
				_ = os.Symlink(fx.outside, m)
				time.Sleep(time.Microsecond)
				_ = os.Remove(m)
				swaps++
			}
		})
		ok := 0
		deadline := time.Now().Add(time.Second)
		for i := 0; time.Now().Before(deadline) || i < 200; i++ {
			leaf, err := d.MkdirAll("home/u/session/m/s", 0o700, owner)
			if err != nil {
				continue
			}
			if leaf.Chmod(0o700) == nil && leaf.Chown(owner) == nil &&
				leaf.WriteFile("events.jsonl", []byte("x\n"), 0o600, owner) == nil {
				if f, err := leaf.OpenFile("events.jsonl", os.O_WRONLY|os.O_APPEND, 0); err == nil {
					f.WriteString("y\n")
					f.Close()
					ok++
				}
			}
			_ = d.RemoveAll("home/u/session/m/s/events.jsonl")
			leaf.Close()
			_ = d.WriteFile("home/u/session/secret", []byte("w"), 0o644, owner)
			if f, err := d.OpenFile("home/u/session/secret", os.O_WRONLY|os.O_TRUNC, 0); err == nil {
				f.Close()
			}
			_ = d.Remove("home/u/session/secret")
		}
		stop.Store(true)
		wg.Wait()
		t.Logf("%d swaps, %d complete privileged rounds", swaps, ok)
		fx.outsideUntouched(t)
		fi, err := os.Lstat(fx.outside)
		must(t, err)
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("outside mode changed to %v", fi.Mode())
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
			t.Errorf("outside now owned by %d", st.Uid)
		}
	})
}
