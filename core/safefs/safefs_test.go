package safefs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// bothWalks runs f once with openat2 and once with the component walk that
// stands in for it on old kernels.
func bothWalks(t *testing.T, f func(t *testing.T)) {
	for _, walkOnly := range []bool{false, true} {
		name := "openat2"
		if walkOnly {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(walkOnly)
			t.Cleanup(func() { noOpenat2.Store(old) })
			f(t)
		})
	}
}

// fixture is a root with a real directory tree, an "outside" directory with
// a file, and symlinks that point out of the root.
//
//	base/root/a/b/file        "inside"
//	base/root/link -> ../outside
//	base/root/a/out -> base/outside (absolute)
//	base/root/a/self -> b
//	base/outside/secret       "secret"
type fixture struct{ base, root, outside string }

func newFixture(t *testing.T) fixture {
	t.Helper()
	base := t.TempDir()
	fx := fixture{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	must(t, os.MkdirAll(filepath.Join(fx.root, "a", "b"), 0o755))
	must(t, os.MkdirAll(fx.outside, 0o755))
	must(t, os.WriteFile(filepath.Join(fx.root, "a", "b", "file"), []byte("inside"), 0o644))
	must(t, os.WriteFile(filepath.Join(fx.outside, "secret"), []byte("secret"), 0o644))
	must(t, os.Symlink("../outside", filepath.Join(fx.root, "link")))
	must(t, os.Symlink(fx.outside, filepath.Join(fx.root, "a", "out")))
	must(t, os.Symlink("b", filepath.Join(fx.root, "a", "self")))
	return fx
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, what string, err error, code abi.Code) {
	t.Helper()
	if got := abi.CodeOf(err); got != code {
		t.Errorf("%s: err = %v (code %q), want %s", what, err, got, code)
	}
}

// outsideUntouched fails when anything under outside changed.
func (fx fixture) outsideUntouched(t *testing.T) {
	t.Helper()
	names, err := os.ReadDir(fx.outside)
	must(t, err)
	if len(names) != 1 || names[0].Name() != "secret" {
		t.Errorf("outside directory now holds %v", names)
	}
	b, err := os.ReadFile(filepath.Join(fx.outside, "secret"))
	if err != nil || string(b) != "secret" {
		t.Errorf("outside/secret now %q, %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(fx.outside, "secret"))
	if err == nil && fi.Mode().Perm() != 0o644 {
		t.Errorf("outside/secret mode now %v", fi.Mode())
	}
}

func TestOpenRootRefusesSymlinks(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		d.Close()
		_, err = OpenRoot(filepath.Join(fx.root, "link"))
		wantCode(t, "OpenRoot(link)", err, abi.ELOOP)
		_, err = OpenRoot(filepath.Join(fx.root, "link", "..", "root"))
		if err == nil {
			// filepath.Abs cleans "link/.." lexically: that names root
			// itself, which is fine; no symlink was walked.
			t.Log("link/.. cleaned lexically to root")
		}
		_, err = OpenRoot(filepath.Join(fx.root, "a", "b", "file"))
		if err == nil {
			t.Error("OpenRoot(file) succeeded")
		}
	})
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		op   func(d *Dir) error
		code abi.Code
	}{
		{"open through symlink dir", func(d *Dir) error { _, err := d.Open("link/secret"); return err }, abi.ELOOP},
		{"open absolute symlink dir", func(d *Dir) error { _, err := d.Open("a/out/secret"); return err }, abi.ELOOP},
		{"open relative symlink inside", func(d *Dir) error { _, err := d.Open("a/self/file"); return err }, abi.ELOOP},
		{"open dotdot", func(d *Dir) error { _, err := d.Open("a/../../outside/secret"); return err }, abi.EINVAL},
		{"open absolute", func(d *Dir) error { _, err := d.Open("/etc/passwd"); return err }, abi.EINVAL},
		{"open empty", func(d *Dir) error { _, err := d.Open(""); return err }, abi.EINVAL},
		{"open NUL", func(d *Dir) error { _, err := d.Open("a\x00b"); return err }, abi.EINVAL},
		{"open directory", func(d *Dir) error { _, err := d.Open("a/b"); return err }, abi.EINVAL},
		{"open missing", func(d *Dir) error { _, err := d.Open("a/b/nope"); return err }, abi.ENOENT},
		{"read final symlink", func(d *Dir) error { _, err := d.ReadFile("link", 100); return err }, abi.ELOOP},
		{"opendir symlink", func(d *Dir) error { _, err := d.OpenDir("link"); return err }, abi.ELOOP},
		{"opendir file", func(d *Dir) error { _, err := d.OpenDir("a/b/file"); return err }, abi.ENOENT},
		{"mkdirall through symlink", func(d *Dir) error { _, err := d.MkdirAll("link/new/deeper", 0o700, Keep); return err }, abi.ELOOP},
		{"mkdir through symlink", func(d *Dir) error { return d.Mkdir("link/new", 0o700, Keep) }, abi.ELOOP},
		{"mkdir existing", func(d *Dir) error { return d.Mkdir("a", 0o700, Keep) }, abi.EEXIST},
		{"write through symlink", func(d *Dir) error { return d.WriteFile("link/secret", []byte("x"), 0o644, Keep) }, abi.ELOOP},
		{"create through symlink", func(d *Dir) error { _, err := d.Create("a/out/new", 0o600, Keep); return err }, abi.ELOOP},
		{"append through final symlink", func(d *Dir) error {
			_, err := d.OpenFile("a/sym-secret", os.O_WRONLY|os.O_APPEND, 0)
			return err
		}, abi.ELOOP},
		{"truncate through final symlink", func(d *Dir) error {
			_, err := d.OpenFile("a/sym-secret", os.O_WRONLY|os.O_TRUNC, 0)
			return err
		}, abi.ELOOP},
		{"remove through symlink", func(d *Dir) error { return d.Remove("link/secret") }, abi.ELOOP},
		{"removeall through symlink", func(d *Dir) error { return d.RemoveAll("link/secret") }, abi.ELOOP},
		{"rename into symlink dir", func(d *Dir) error { return d.Rename("a/b/file", d, "link/stolen") }, abi.ELOOP},
		{"lstat through symlink", func(d *Dir) error { _, err := d.Lstat("link/secret"); return err }, abi.ELOOP},
		{"write names nothing", func(d *Dir) error { return d.WriteFile(".", nil, 0o644, Keep) }, abi.EINVAL},
	}
	bothWalks(t, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t)
				must(t, os.Symlink(filepath.Join(fx.outside, "secret"), filepath.Join(fx.root, "a", "sym-secret")))
				d, err := OpenRoot(fx.root)
				must(t, err)
				defer d.Close()
				wantCode(t, c.name, c.op(d), c.code)
				fx.outsideUntouched(t)
			})
		}
	})
}

func TestNonRegularNeverBlocks(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		must(t, unix.Mkfifo(filepath.Join(fx.root, "fifo"), 0o666))
		ln, err := net.Listen("unix", filepath.Join(fx.root, "sock"))
		must(t, err)
		defer ln.Close()
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, name := range []string{"fifo", "sock"} {
				_, err := d.ReadFile(name, 1<<20)
				wantCode(t, "ReadFile "+name, err, abi.EINVAL)
				_, err = d.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
				if err == nil {
					t.Errorf("OpenFile(%s, O_WRONLY) succeeded", name)
				}
				err = d.WriteFile(name+"/x", nil, 0o644, Keep)
				if err == nil {
					t.Errorf("WriteFile under %s succeeded", name)
				}
			}
			_, err := d.OpenFile("fifo", os.O_RDWR, 0)
			wantCode(t, "OpenFile(fifo, O_RDWR)", err, abi.EINVAL)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("opening a FIFO blocked")
		}
	})
}

func TestDeviceRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): mknod of a device needs root")
	}
	fx := newFixture(t)
	// /dev/null's numbers: 1,3.
	must(t, unix.Mknod(filepath.Join(fx.root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	d, err := OpenRoot(fx.root)
	must(t, err)
	defer d.Close()
	_, err = d.ReadFile("null", 10)
	wantCode(t, "ReadFile(device)", err, abi.EINVAL)
}

func TestReadFileBound(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		b, err := d.ReadFile("a/b/file", 6)
		if err != nil || string(b) != "inside" {
			t.Fatalf("ReadFile at its exact size = %q, %v", b, err)
		}
		_, err = d.ReadFile("a/b/file", 5)
		wantCode(t, "ReadFile over max", err, abi.EMSGSIZE)
		b, err = ReadFile(filepath.Join(fx.root, "a/b/file"), 100)
		if err != nil || string(b) != "inside" {
			t.Fatalf("top-level ReadFile = %q, %v", b, err)
		}
		_, err = ReadFile(filepath.Join(fx.root, "link/secret"), 100)
		wantCode(t, "top-level ReadFile through symlink", err, abi.ELOOP)
		_, err = ReadFile(filepath.Join(fx.root, "a/b/nope"), 100)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing file: %v does not match fs.ErrNotExist", err)
		}
	})
}

func TestMkdirAllModesAndOwner(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		old := syscall.Umask(0o077)
		defer syscall.Umask(old)
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		must(t, os.Chmod(filepath.Join(fx.root, "a"), 0o751))
		owner := Keep
		if os.Geteuid() == 0 {
			owner = Owner{UID: 4242, GID: 4343}
		}
		leaf, err := d.MkdirAll("a/x/y/z", 0o755, owner)
		must(t, err)
		must(t, leaf.WriteFile("f", []byte("hi"), 0o640, owner))
		leaf.Close()
		for _, p := range []string{"a/x", "a/x/y", "a/x/y/z"} {
			fi, err := os.Lstat(filepath.Join(fx.root, p))
			must(t, err)
			if fi.Mode() != fs.ModeDir|0o755 {
				t.Errorf("%s: mode %v, want drwxr-xr-x despite umask 077", p, fi.Mode())
			}
			if st := fi.Sys().(*syscall.Stat_t); owner.UID >= 0 && (int(st.Uid) != owner.UID || int(st.Gid) != owner.GID) {
				t.Errorf("%s: owner %d:%d, want %d:%d", p, st.Uid, st.Gid, owner.UID, owner.GID)
			}
		}
		fi, err := os.Lstat(filepath.Join(fx.root, "a"))
		must(t, err)
		if fi.Mode().Perm() != 0o751 {
			t.Errorf("existing a/ changed to %v", fi.Mode())
		}
		fi, err = os.Lstat(filepath.Join(fx.root, "a/x/y/z/f"))
		must(t, err)
		if fi.Mode() != 0o640 {
			t.Errorf("written file mode %v, want 0640", fi.Mode())
		}
		if st := fi.Sys().(*syscall.Stat_t); owner.UID >= 0 && int(st.Uid) != owner.UID {
			t.Errorf("written file owner %d, want %d", st.Uid, owner.UID)
		}
		again, err := d.MkdirAll("a/x/y/z", 0o700, Keep)
		must(t, err)
		again.Close()
		if fi, _ := os.Lstat(filepath.Join(fx.root, "a/x/y/z")); fi.Mode().Perm() != 0o755 {
			t.Errorf("MkdirAll changed an existing directory to %v", fi.Mode())
		}
		self, err := d.MkdirAll(".", 0o700, Keep)
		must(t, err)
		self.Close()
	})
}

func TestWriteFileReplacesSymlinkNotTarget(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		p := filepath.Join(fx.root, "a", "b", "cfg")
		must(t, os.Symlink(filepath.Join(fx.outside, "secret"), p))
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		must(t, d.WriteFile("a/b/cfg", []byte("new"), 0o600, Keep))
		fi, err := os.Lstat(p)
		must(t, err)
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("cfg is %v, want a regular 0600 file", fi.Mode())
		}
		fx.outsideUntouched(t)
		left, _ := filepath.Glob(filepath.Join(fx.root, "a", "b", ".cfg.tmp-*"))
		if len(left) != 0 {
			t.Errorf("temporary files left: %v", left)
		}
	})
}

func TestOpenFileRefusesHardlinkWrites(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		// Same filesystem: link the outside file into the root.
		must(t, os.Link(filepath.Join(fx.outside, "secret"), filepath.Join(fx.root, "a", "hl")))
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		for _, flag := range []int{os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_TRUNC, os.O_WRONLY | os.O_CREATE | os.O_TRUNC} {
			_, err = d.OpenFile("a/hl", flag, 0o600)
			wantCode(t, "OpenFile(hardlink, write)", err, abi.EACCES)
		}
		fx.outsideUntouched(t)
		f, err := d.Open("a/hl")
		must(t, err) // reading is the caller's judgement (fstat the owner)
		f.Close()
	})
}

func TestOpenFileCreateAndTrunc(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		old := syscall.Umask(0o077)
		defer syscall.Umask(old)
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		f, err := d.OpenFile("a/log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		must(t, err)
		f.WriteString("one\n")
		f.Close()
		f, err = d.OpenFile("a/log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		must(t, err)
		f.WriteString("two\n")
		f.Close()
		b, _ := os.ReadFile(filepath.Join(fx.root, "a/log"))
		fi, _ := os.Stat(filepath.Join(fx.root, "a/log"))
		if string(b) != "one\ntwo\n" || fi.Mode().Perm() != 0o644 {
			t.Errorf("log = %q mode %v, want two lines and the mode of its creation (0644)", b, fi.Mode())
		}
		f, err = d.OpenFile("a/log", os.O_WRONLY|os.O_TRUNC, 0)
		must(t, err)
		f.Close()
		if b, _ := os.ReadFile(filepath.Join(fx.root, "a/log")); len(b) != 0 {
			t.Errorf("O_TRUNC left %q", b)
		}
		_, err = d.Create("a/log", 0o600, Keep)
		wantCode(t, "Create(existing)", err, abi.EEXIST)
	})
}

func TestRemoveAllStaysInside(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		must(t, os.MkdirAll(filepath.Join(fx.root, "doomed", "d1", "d2"), 0o755))
		must(t, os.Symlink(fx.outside, filepath.Join(fx.root, "doomed", "d1", "escape")))
		must(t, os.WriteFile(filepath.Join(fx.root, "doomed", "d1", "d2", "f"), nil, 0o644))
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		must(t, d.RemoveAll("doomed"))
		if _, err := os.Lstat(filepath.Join(fx.root, "doomed")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("doomed still there: %v", err)
		}
		fx.outsideUntouched(t)
		must(t, d.RemoveAll("doomed")) // missing is fine
		must(t, d.RemoveAll("link"))   // the link itself goes, not its target
		fx.outsideUntouched(t)
	})
}

func TestRenameAndNames(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		must(t, d.Rename("a/b/file", d, "a/moved"))
		b, err := d.ReadFile("a/moved", 100)
		if err != nil || string(b) != "inside" {
			t.Fatalf("after rename: %q, %v", b, err)
		}
		a, err := d.OpenDir("a")
		must(t, err)
		defer a.Close()
		names, err := a.Names()
		must(t, err)
		got := strings.Join(sortStrings(names), ",")
		if got != "b,moved,out,self" {
			t.Errorf("Names = %s", got)
		}
		st, err := d.Lstat("a/out")
		must(t, err)
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			t.Errorf("Lstat(a/out) is not a symlink: %o", st.Mode)
		}
	})
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestErrorsKeepPathError(t *testing.T) {
	fx := newFixture(t)
	d, err := OpenRoot(fx.root)
	must(t, err)
	defer d.Close()
	_, err = d.Open("link/secret")
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.ELOOP) {
		t.Errorf("error %v does not wrap a PathError with ELOOP", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte(fx.root)) {
		t.Errorf("error %q does not name the path", err)
	}
}

func TestReadDirTypesAndBound(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		must(t, unix.Mkfifo(filepath.Join(fx.root, "a", "fifo"), 0o600))
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		a, err := d.OpenDir("a")
		must(t, err)
		defer a.Close()
		es, err := a.ReadDir(100)
		must(t, err)
		got := map[string]uint32{}
		for _, e := range es {
			got[e.Name] = e.Type
		}
		want := map[string]uint32{"b": unix.S_IFDIR, "out": unix.S_IFLNK, "self": unix.S_IFLNK, "fifo": unix.S_IFIFO}
		if len(got) != len(want) {
			t.Fatalf("ReadDir = %v, want %v", got, want)
		}
		for n, typ := range want {
			if got[n] != typ {
				t.Errorf("%s: type %o, want %o", n, got[n], typ)
			}
		}
		// A second listing of the same descriptor starts over.
		again, err := a.ReadDir(100)
		if err != nil || len(again) != len(es) {
			t.Errorf("second ReadDir = %v, %v", again, err)
		}
		_, err = a.ReadDir(3)
		wantCode(t, "ReadDir over max", err, abi.EMSGSIZE)
	})
}

func TestReadlinkNeverFollows(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		target, err := d.Readlink("a/out")
		if err != nil || target != fx.outside {
			t.Errorf("Readlink(a/out) = %q, %v", target, err)
		}
		_, err = d.Readlink("link/secret")
		wantCode(t, "Readlink through a symlink", err, abi.ELOOP)
		_, err = d.Readlink("a/b/file")
		wantCode(t, "Readlink of a file", err, abi.EINVAL)
		_, err = d.Readlink("../x")
		wantCode(t, "Readlink leaving the root", err, abi.EINVAL)
	})
}

func TestSymlink(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		must(t, d.Symlink("b/file", "a/alias"))
		got, err := d.Readlink("a/alias")
		if err != nil || got != "b/file" {
			t.Fatalf("Readlink = %q, %v", got, err)
		}
		wantCode(t, "Symlink over existing", d.Symlink("x", "a/alias"), abi.EEXIST)
		wantCode(t, "Symlink through symlink", d.Symlink("x", "link/evil"), abi.ELOOP)
		fx.outsideUntouched(t)
	})
}

func TestReadAtJudgesWhatItRead(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		fx := newFixture(t)
		must(t, unix.Mkfifo(filepath.Join(fx.root, "a", "fifo"), 0o600))
		d, err := OpenRoot(fx.root)
		must(t, err)
		defer d.Close()
		buf := make([]byte, 4)
		n, st, err := d.ReadAt("a/b/file", buf, 2)
		if err != nil || string(buf[:n]) != "side" || st.Size != 6 || st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Errorf("ReadAt = %q, size %d, %v", buf[:n], st.Size, err)
		}
		n, _, err = d.ReadAt("a/b/file", buf, 6)
		if err != nil || n != 0 {
			t.Errorf("ReadAt at EOF = %d, %v", n, err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, err := d.ReadAt("a/fifo", buf, 0)
			wantCode(t, "ReadAt(fifo)", err, abi.EINVAL)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("ReadAt of a FIFO blocked")
		}
		_, _, err = d.ReadAt("link/secret", buf, 0)
		wantCode(t, "ReadAt through a symlink", err, abi.ELOOP)
		_, _, err = d.ReadAt("a/b", buf, 0)
		wantCode(t, "ReadAt of a directory", err, abi.EINVAL)
		fx.outsideUntouched(t)
	})
}

// A file whose size stat reports as 0 (procfs) is read to its end, and
// still bounded; any max, however large, is a bound and not an overflow.
func TestReadFileUnknownSize(t *testing.T) {
	d, err := OpenRoot(fmt.Sprintf("/proc/%d", os.Getpid()))
	if err != nil {
		t.Skipf("no procfs: %v", err)
	}
	defer d.Close()
	b, err := d.ReadFile("status", math.MaxInt64)
	if err != nil || !strings.Contains(string(b), "\nPid:") || len(b) < 200 {
		t.Fatalf("status (%d bytes): %v", len(b), err)
	}
	_, err = d.ReadFile("status", 100)
	wantCode(t, "a size-0 file longer than max", err, abi.EMSGSIZE)
}
