package desktop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/home"
)

// FingerprintInputs is what the validation fingerprint covers (seed 9): the
// Codex Desktop/helper build identity, the cbth helper-surface revision and
// build, and the local permission/execution shape that no-approval reads
// and writebacks depend on. All of it is observed by the daemon, so every
// client of one home sees the same fingerprint.
type FingerprintInputs struct {
	CodexBuild            string `json:"codex_build"`
	HelperSurfaceRevision string `json:"helper_surface_revision"`
	CbthBuild             string `json:"cbth_build"`
	PermissionShape       string `json:"permission_shape"`
}

// Fingerprint is the stable digest of the inputs.
func (in FingerprintInputs) Fingerprint() string {
	b, _ := json.Marshal(in)
	sum := sha256.Sum256(b)
	return "fp1:" + hex.EncodeToString(sum[:16])
}

// cbthVersion is the running binary's version (the fingerprint covers it).
var cbthVersion = ""

// SetBuildVersion records the binary's version; the daemon and the doctor
// (which may observe without a daemon) both set it.
func SetBuildVersion(v string) { cbthVersion = v }

// ObserveFingerprint reads the current inputs. It only stats files and
// reads one small package.json, so bridge-preflight can afford it on every
// wake.
func ObserveFingerprint(cfg config.Config, h home.Home) FingerprintInputs {
	return FingerprintInputs{
		CodexBuild:            codexBuild(cfg.Desktop.CodexBin),
		HelperSurfaceRevision: HelperSurfaceRevision,
		CbthBuild:             "version=" + cbthVersion + " " + fileIdentity("/proc/self/exe"),
		PermissionShape:       permissionShape(h),
	}
}

// codexBuild identifies the configured codex binary by its resolved path,
// size and mtime, plus the npm package version beside it when there is one
// (an upgrade changes at least one of them).
func codexBuild(bin string) string {
	if bin == "" {
		p, err := exec.LookPath("codex")
		if err != nil {
			return "absent: no codex on the daemon's PATH (set [desktop] codex_bin)"
		}
		bin = p
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "absent: " + bin
	}
	id := fileIdentity(real)
	if v := packageVersion(filepath.Join(filepath.Dir(filepath.Dir(real)), "package.json")); v != "" {
		id += " package=" + v
	}
	return id
}

func fileIdentity(p string) string {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "absent: " + p
	}
	return fmt.Sprintf("path=%s size=%d mtime=%d.%09d", p, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

// packageVersion reads name@version from a package.json of at most 64 KiB.
func packageVersion(p string) string {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return ""
	}
	var pkg struct{ Name, Version string }
	if json.Unmarshal(b, &pkg) != nil || pkg.Version == "" {
		return ""
	}
	return pkg.Name + "@" + pkg.Version
}

// permissionShape is the uid/gid the helpers run as, the home they write,
// its owner and mode and the mount flags of its filesystem (read-only,
// nosuid, noexec).
func permissionShape(h home.Home) string {
	s := fmt.Sprintf("uid=%d gid=%d home=%s", os.Getuid(), os.Getgid(), h.Root)
	var st unix.Stat_t
	if unix.Stat(h.Root, &st) == nil {
		s += fmt.Sprintf(" owner=%d mode=%04o", st.Uid, st.Mode&0o7777)
	}
	var fs unix.Statfs_t
	if unix.Statfs(h.Root, &fs) == nil {
		s += fmt.Sprintf(" fsflags=%#x", fs.Flags&(unix.ST_RDONLY|unix.ST_NOSUID|unix.ST_NOEXEC|unix.ST_NODEV))
	}
	return s
}
