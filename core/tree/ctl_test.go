package tree

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

// OpenCtl reads each file exactly as ReadCtl does, whatever state the
// control directory is in.
func TestOpenCtlReadsAsReadCtl(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, setup func(d string)) Object {
		obj := filepath.Join(dir, name)
		os.WriteFile(obj, []byte("#!/x\n"), 0o755)
		if setup != nil {
			setup(obj + ".d")
		}
		return Object{Class: abi.ClassModel, Name: name, Path: obj}
	}
	objects := map[string]Object{
		"plain": mk("plain", func(d string) {
			os.Mkdir(d, 0o755)
			os.WriteFile(filepath.Join(d, "id"), []byte(" x \n"), 0o644)
			syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644)
			os.Symlink("/etc/passwd", filepath.Join(d, "link"))
		}),
		"nodir": mk("nodir", nil),
		"linkdir": mk("linkdir", func(d string) {
			os.Mkdir(d+"-real", 0o755)
			os.WriteFile(filepath.Join(d+"-real", "id"), []byte("x"), 0o644)
			os.Symlink(d+"-real", d)
		}),
	}
	for name, o := range objects {
		ctl := o.OpenCtl()
		for _, file := range []string{"id", "missing", "fifo", "link"} {
			want, werr := o.ReadCtl(file)
			got, gerr := ctl.Read(file)
			if string(got) != string(want) || abi.CodeOf(gerr) != abi.CodeOf(werr) {
				t.Errorf("%s/%s: OpenCtl read %q %v, ReadCtl %q %v", name, file, got, gerr, want, werr)
			}
			ws, werr := o.CtlString(file)
			gs, gerr := ctl.String(file)
			if gs != ws || abi.CodeOf(gerr) != abi.CodeOf(werr) {
				t.Errorf("%s/%s: String %q %v, CtlString %q %v", name, file, gs, gerr, ws, werr)
			}
		}
		if err := ctl.Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
}
