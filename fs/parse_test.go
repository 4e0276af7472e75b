package fs

import (
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []MountRecord
		code abi.Code
	}{
		{"fuse projection", "43 27 0:39 / /tmp/m/mnt ro,nosuid,nodev,relatime - fuse.cortexfs /tmp/m/ctx ro,user_id=0,group_id=0,default_permissions,allow_other\n",
			[]MountRecord{{Mountpoint: "/tmp/m/mnt", FSType: "fuse.cortexfs", Source: "/tmp/m/ctx", Options: "ro,nosuid,nodev,relatime"}}, ""},
		{"optional fields", "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue\n",
			[]MountRecord{{Mountpoint: "/mnt2", FSType: "ext3", Source: "/dev/root", Options: "rw,noatime"}}, ""},
		{"escaped space and backslash", `1 2 0:1 / /a\040b\134c rw - fuse.cortexfs /src\011x rw` + "\n",
			[]MountRecord{{Mountpoint: `/a b\c`, FSType: "fuse.cortexfs", Source: "/src\tx", Options: "rw"}}, ""},
		{"blank lines", "\n\n", nil, ""},
		{"no separator", "1 2 0:1 / /a rw fuse x rw\n", nil, abi.EINVAL},
		{"too short", "1 2 3\n", nil, abi.EINVAL},
		{"separator without source", "1 2 0:1 / /a rw - fuse\n", nil, abi.EINVAL},
		{"bad escape", `1 2 0:1 / /a\09 rw - fuse x rw` + "\n", nil, abi.EINVAL},
		{"truncated escape", `1 2 0:1 / /a\0 rw - fuse x rw` + "\n", nil, abi.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountinfo([]byte(tt.in))
			if tt.code != "" {
				if abi.CodeOf(err) != tt.code {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseMountinfo = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte("43 27 0:39 / /tmp/m/mnt ro,nosuid - fuse.cortexfs /tmp/m/ctx ro\n"))
	f.Add([]byte(`1 2 0:1 / /a\040b rw a:1 - fuse.cortexfs /s\134 rw`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ParseMountinfo(data)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("error without EINVAL: %v", err)
			}
			return
		}
		for _, r := range recs {
			if r.FSType == "" || r.Options == "" {
				t.Fatalf("record with empty fields: %+v", r)
			}
		}
	})
}

func TestParseStatusGroups(t *testing.T) {
	tests := []struct {
		in   string
		want []uint32
		ok   bool
	}{
		{"Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 \nNgid:\t0\n", []uint32{4, 24, 1000}, true},
		{"Groups:\t\n", nil, true},
		{"Groups:", nil, true},
		{"Name:\tx\n", nil, false},
		{"Groups:\t4 x\n", nil, false},
		{"Groups:\t4294967296\n", nil, false},
		{"Groups:\t-1\n", nil, false},
	}
	for _, tt := range tests {
		got, ok := parseStatusGroups([]byte(tt.in))
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseStatusGroups(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseStatusGroups(f *testing.F) {
	f.Add([]byte("Groups:\t4 24 1000\n"))
	f.Add([]byte("Uid:\t0\nGroups:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		groups, ok := parseStatusGroups(data)
		if !ok && groups != nil {
			t.Fatalf("groups %v returned with ok=false", groups)
		}
	})
}

// A caller whose groups cannot be read gets no more than both the group
// and the other triad allow: never more than the kernel would give.
func TestCallerUnknownGroupsFailClosed(t *testing.T) {
	c := &caller{uid: 1000, gid: 1000, loaded: true} // groups unreadable
	cases := []struct {
		mode  uint32
		allow bool
	}{
		{0o705, false}, // a member of the group gets nothing: refuse
		{0o750, false}, // only members may read: unknown, refuse
		{0o755, true},  // everyone may: no groups needed
		{0o775, true},
	}
	for _, cs := range cases {
		st := unix.Stat_t{Mode: unix.S_IFREG | cs.mode, Uid: 0, Gid: 50}
		if got := c.permits(&st, 4); got != cs.allow {
			t.Errorf("mode %04o: permits = %v, want %v", cs.mode, got, cs.allow)
		}
	}
	member := &caller{uid: 1000, gid: 1000, loaded: true, known: true, groups: []uint32{50}}
	st := unix.Stat_t{Mode: unix.S_IFREG | 0o705, Gid: 50}
	if member.permits(&st, 4) {
		t.Error("a member of a group whose triad is empty may read")
	}
	st.Mode = unix.S_IFREG | 0o750
	if !member.permits(&st, 4) {
		t.Error("a member of the file's group may not read 0750")
	}
}
