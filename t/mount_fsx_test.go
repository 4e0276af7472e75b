package t

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMountFsx drives random stat, lstat, readdir, read and readlink
// sequences through a system projection and against the durable tree, as
// root and as a second user, between random changes of the durable tree,
// and requires the same answer from both: the same errno, attributes,
// names, bytes and link targets. After a change the projection must catch
// up (invalidation); a generous deadline keeps load from failing the test.
//
// CORTEXFS_FSX_SEED replays a run; CORTEXFS_FSX_OPS sets its length.
func TestMountFsx(t *testing.T) {
	needRoot(t)
	u := ensureUser(t, "ctxt12b")
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CORTEXFS_FSX_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	ops := 2000
	if s := os.Getenv("CORTEXFS_FSX_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (CORTEXFS_FSX_SEED=%d replays this run), %d operations", seed, seed, ops)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	root := publicRoot(t)
	x := &fsx{t: t, rng: rng, root: root, user: u}
	for range 40 {
		x.mutate()
	}
	m := startMount(t, root)
	x.mnt = m.mp
	for i := range ops {
		if rng.IntN(12) == 0 {
			x.mutate()
			continue
		}
		x.compare(i)
	}
	t.Logf("%d operations compared, %d skipped (their path resolves outside the tree)", x.compared, x.skipped)
	if x.compared < ops/2 {
		t.Fatalf("only %d of %d operations were compared", x.compared, ops)
	}
}

type fsx struct {
	t        *testing.T
	rng      *rand.Rand
	root     string
	mnt      string
	user     testUser
	lastMut  string
	mutation int

	compared, skipped int
}

// paths lists every durable path (relative; "" is the root).
func (x *fsx) paths() []string {
	var out []string
	filepath.WalkDir(x.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(x.root, p)
		if rel == "." {
			rel = ""
		}
		out = append(out, rel)
		return nil
	})
	return out
}

func (x *fsx) pick() string {
	ps := x.paths()
	p := ps[x.rng.IntN(len(ps))]
	if x.rng.IntN(10) == 0 {
		p = filepath.Join(p, "nope") // a missing name, maybe under a file
	}
	return p
}

func (x *fsx) pickDir() string {
	for {
		p := x.pick()
		if fi, err := os.Lstat(filepath.Join(x.root, p)); err == nil && fi.IsDir() {
			return p
		}
	}
}

var fsxModes = []os.FileMode{0o755, 0o750, 0o700, 0o711, 0o644, 0o640, 0o600, 0o604, 0o000, 0o705}

// mutate changes the durable tree the way its users and daemons do.
func (x *fsx) mutate() {
	x.mutation++
	dir := filepath.Join(x.root, x.pickDir())
	name := fmt.Sprintf("f%d", x.rng.IntN(30))
	p := filepath.Join(dir, name)
	var what string
	switch x.rng.IntN(10) {
	case 0, 1:
		size := []int{0, 1, 100, 4095, 4096, 4097, 70000, 200000}[x.rng.IntN(8)]
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(x.rng.IntN(256))
		}
		what = fmt.Sprintf("write %d bytes to %s", size, p)
		// O_NONBLOCK: a FIFO at p fails (ENXIO) instead of waiting.
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, fsxModes[x.rng.IntN(len(fsxModes))]); err == nil {
			f.Write(data)
			f.Close()
		}
	case 2:
		what = "append to " + p
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0); err == nil {
			f.WriteString("appended line\n")
			f.Close()
		}
	case 3:
		what = "mkdir " + p
		os.Mkdir(p, 0o755)
	case 4:
		target := x.pick()
		if x.rng.IntN(2) == 0 {
			target = filepath.Join(x.root, target)
		} else if r, err := filepath.Rel(dir, filepath.Join(x.root, target)); err == nil {
			target = r
		}
		what = "symlink " + p + " -> " + target
		os.Symlink(target, p)
	case 5:
		q := filepath.Join(x.root, x.pick())
		mode := fsxModes[x.rng.IntN(len(fsxModes))]
		if q == x.root {
			return
		}
		what = fmt.Sprintf("chmod %04o %s", mode, q)
		os.Chmod(q, mode)
	case 6:
		q := filepath.Join(x.root, x.pick())
		if q == x.root {
			return
		}
		uid := []int{0, x.user.UID}[x.rng.IntN(2)]
		what = fmt.Sprintf("chown %d %s", uid, q)
		os.Lchown(q, uid, uid)
	case 7:
		q := filepath.Join(x.root, x.pick())
		if q == x.root {
			return
		}
		what = "remove " + q
		os.Remove(q)
	case 8:
		q := filepath.Join(x.root, x.pick())
		if q == x.root || strings.HasPrefix(p, q+"/") {
			return
		}
		what = "rename " + q + " " + p
		os.Rename(q, p)
	case 9:
		what = "mkfifo " + p
		unix.Mkfifo(p, 0o644)
	}
	x.lastMut = what
}

// outcome is what one operation answered, comparable across the two trees.
type outcome struct {
	err  syscall.Errno
	desc string
}

func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if err != nil {
		return syscall.EIO
	}
	return 0
}

func statDesc(fi os.FileInfo) string {
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("mode=%v uid=%d gid=%d size=%d nlink=%d mtime=%d.%09d ctime=%d.%09d",
		fi.Mode(), st.Uid, st.Gid, st.Size, st.Nlink, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

// op runs one operation on the tree at base.
func op(kind int, base, rel string, off int64, n int) outcome {
	p := filepath.Join(base, rel)
	if kind == 2 || kind == 3 {
		// Opening a FIFO for reading waits for a writer (os.ReadDir opens
		// without O_DIRECTORY); the comparison of FIFOs is stat's.
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			return outcome{desc: "fifo (not opened)"}
		}
	}
	switch kind {
	case 0:
		fi, err := os.Stat(p)
		if err != nil {
			return outcome{err: errnoOf(err)}
		}
		return outcome{desc: statDesc(fi)}
	case 1:
		fi, err := os.Lstat(p)
		if err != nil {
			return outcome{err: errnoOf(err)}
		}
		return outcome{desc: statDesc(fi)}
	case 2:
		es, err := os.ReadDir(p)
		if err != nil {
			return outcome{err: errnoOf(err)}
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name()+":"+e.Type().String())
		}
		slices.Sort(names)
		return outcome{desc: strings.Join(names, ",")}
	case 3:
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return outcome{err: errnoOf(err)}
		}
		defer f.Close()
		buf := make([]byte, n)
		m, err := f.ReadAt(buf, off)
		if err != nil && m == 0 && !errors.Is(err, io.EOF) {
			return outcome{err: errnoOf(err)}
		}
		return outcome{desc: fmt.Sprintf("%d bytes %x", m, buf[:m])}
	default:
		l, err := os.Readlink(p)
		if err != nil {
			return outcome{err: errnoOf(err)}
		}
		return outcome{desc: l}
	}
}

// compare runs one random operation on both trees, as root or as the
// second user, until they agree.
func (x *fsx) compare(i int) {
	kind := x.rng.IntN(5)
	rel := x.pick()
	off := []int64{0, 0, 1, 4095, 4096, 65536, 199999}[x.rng.IntN(7)]
	n := []int{1, 100, 4096, 131072, 300000}[x.rng.IntN(5)]
	asUser := x.rng.IntN(2) == 0
	if x.escapes(rel) {
		// A relative symlink moved by a rename (or a directory holding
		// one) can point above the root: through the durable tree it then
		// names the root's parent, through the mount the mount point's.
		// Those are different host directories, not a projection error.
		x.skipped++
		return
	}
	x.compared++
	deadline := time.Now().Add(10 * time.Second)
	for {
		var d, m outcome
		run := func() {
			d = op(kind, x.root, rel, off, n)
			m = op(kind, x.mnt, rel, off, n)
		}
		if asUser {
			x.asUser(run)
		} else {
			run()
		}
		if d == m {
			return
		}
		if time.Now().After(deadline) {
			who := "root"
			if asUser {
				who = x.user.String()
			}
			x.t.Fatalf("op %d (kind %d on %q off %d len %d as %s) after mutation %d (%s):\n durable:    %v %s\n projection: %v %s",
				i, kind, rel, off, n, who, x.mutation, x.lastMut, d.err, trunc(d.desc), m.err, trunc(m.desc))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// escapes reports whether resolving rel in the durable tree leaves it.
func (x *fsx) escapes(rel string) bool {
	real, err := filepath.EvalSymlinks(filepath.Join(x.root, rel))
	if err != nil {
		// Resolve what exists of it: a missing leaf below an escaping
		// link escapes too.
		real, err = filepath.EvalSymlinks(filepath.Join(x.root, filepath.Dir(rel)))
		if err != nil {
			return false
		}
	}
	root, err := filepath.EvalSymlinks(x.root)
	if err != nil {
		return false
	}
	r, err := filepath.Rel(root, real)
	return err != nil || !filepath.IsLocal(r) && r != "."
}

func trunc(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// asUser runs f on one OS thread whose filesystem credentials are the
// second user's: setfsuid/setfsgid/setgroups as raw syscalls change only
// the calling thread (Linux credentials are per thread; the libc and Go
// wrappers broadcast to all threads, these do not). FUSE requests carry
// the thread's fsuid and fsgid. If restoring fails the thread is left
// locked, so the runtime discards it instead of reusing it.
func (x *fsx) asUser(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		groups := []uint32{uint32(x.user.GID)}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 1, uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
			x.t.Errorf("setgroups: %v", e)
			return
		}
		syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(x.user.GID), 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(x.user.UID), 0, 0)
		f()
		syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSGID, 0, 0, 0)
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return // stay locked: the thread dies with the goroutine
		}
		if prev, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0); prev != 0 {
			return
		}
		runtime.UnlockOSThread()
	}()
	<-done
}
