package fs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// MountInfo is one projection found in the mount table.
type MountInfo struct {
	Mountpoint string `json:"mountpoint"`
	Source     string `json:"source"` // the durable root it serves (mount source)
	State      string `json:"state"`  // alive | dead | hung
	Detail     string `json:"detail,omitempty"`
}

// Mount states.
const (
	StateAlive = "alive"
	StateDead  = "dead" // its server is gone: ENOTCONN
	StateHung  = "hung" // its server did not answer statfs in time
)

// MountRecord is one line of /proc/self/mountinfo.
type MountRecord struct {
	Mountpoint string
	FSType     string
	Source     string
	Options    string
}

// ParseMountinfo reads /proc/<pid>/mountinfo: "ID PARENT MAJ:MIN ROOT
// MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPEROPTIONS", with
// spaces, tabs, newlines and backslashes in paths escaped as \ooo. A
// malformed line is EINVAL naming it.
func ParseMountinfo(data []byte) ([]MountRecord, error) {
	var out []MountRecord
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		f := strings.Fields(string(line))
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 7 || sep < 0 || sep+2 >= len(f) {
			return nil, abi.Errorf(abi.EINVAL, "mountinfo line %d: malformed", n+1)
		}
		mp, err := unescapeMount(f[4])
		if err != nil {
			return nil, abi.Errorf(abi.EINVAL, "mountinfo line %d: %v", n+1, err)
		}
		src, err := unescapeMount(f[sep+2])
		if err != nil {
			return nil, abi.Errorf(abi.EINVAL, "mountinfo line %d: %v", n+1, err)
		}
		out = append(out, MountRecord{Mountpoint: mp, FSType: f[sep+1], Source: src, Options: f[5]})
	}
	return out, nil
}

// unescapeMount undoes the kernel's \ooo escapes (show_mountinfo's
// mangle of " \t\n\\").
func unescapeMount(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", abi.Errorf(abi.EINVAL, "bad escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", abi.Errorf(abi.EINVAL, "bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// Mounts lists the projections in the caller's mount namespace and probes
// each with statfs(2), which the kernel never answers from its caches: a
// live server answers at once, a dead one fails with ENOTCONN (the kernel
// aborted the connection when the server's /dev/fuse descriptor closed),
// and a hung one blocks — so the probe gives up after timeout.
func Mounts(timeout time.Duration) ([]MountInfo, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, abi.Errorf(abi.CodeOf(err), "read mount table: %v", err)
	}
	recs, err := ParseMountinfo(data)
	if err != nil {
		return nil, err
	}
	var out []MountInfo
	for _, r := range recs {
		if r.FSType != FSType {
			continue
		}
		mi := MountInfo{Mountpoint: r.Mountpoint, Source: r.Source, State: StateAlive}
		switch err := probe(r.Mountpoint, timeout); {
		case err == nil:
		case errors.Is(err, unix.ENOTCONN), errors.Is(err, unix.ECONNABORTED):
			mi.State, mi.Detail = StateDead, "its server is gone (ENOTCONN)"
		case errors.Is(err, os.ErrDeadlineExceeded):
			mi.State, mi.Detail = StateHung, "its server did not answer within "+timeout.String()
		default:
			mi.Detail = err.Error() // answering, e.g. EACCES for this user
		}
		out = append(out, mi)
	}
	return out, nil
}

func probe(mountpoint string, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		done <- unix.Statfs(mountpoint, &st)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return os.ErrDeadlineExceeded // the goroutine stays blocked; callers are short-lived
	}
}
