package policy

import "testing"

func TestCredPermits(t *testing.T) {
	alice := Cred{UID: 1000, GID: 1000, Groups: []uint32{50}}
	root := Cred{}
	tests := []struct {
		name  string
		c     Cred
		mode  uint32
		uid   uint32
		gid   uint32
		dir   bool
		want  Access
		allow bool
	}{
		{"owner reads 0600", alice, 0o600, 1000, 0, false, MayRead, true},
		{"owner cannot exec 0644", alice, 0o644, 1000, 0, false, MayExec, false},
		{"other reads 0644", alice, 0o644, 0, 0, false, MayRead, true},
		{"other cannot read 0600", alice, 0o600, 0, 0, false, MayRead, false},
		{"other searches 0755 dir", alice, 0o755, 0, 0, true, MayExec, true},
		{"other cannot search 0700 dir", alice, 0o700, 0, 0, true, MayExec, false},
		{"supplementary group reads 0640", alice, 0o640, 0, 50, false, MayRead, true},
		{"primary group execs 0750", alice, 0o750, 0, 1000, false, MayExec, true},
		{"owner triad does not fall through to other", alice, 0o007, 1000, 0, false, MayRead, false},
		{"group triad does not fall through to other", alice, 0o707, 0, 50, false, MayRead, false},
		{"read and exec together need both", alice, 0o754, 0, 0, true, MayRead | MayExec, false},
		{"read and exec together", alice, 0o755, 0, 0, true, MayRead | MayExec, true},
		{"root reads 0000", root, 0, 1000, 1000, false, MayRead, true},
		{"root searches 0000 dir", root, 0, 1000, 1000, true, MayExec, true},
		{"root cannot exec without any x bit", root, 0o644, 0, 0, false, MayExec, false},
		{"root execs with only other x", root, 0o601, 1000, 1000, false, MayExec, true},
		{"nothing asked", alice, 0, 0, 0, false, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Permits(tt.mode, tt.uid, tt.gid, tt.dir, tt.want); got != tt.allow {
				t.Errorf("Permits(%04o, %d:%d, %v) = %v, want %v", tt.mode, tt.uid, tt.gid, tt.want, got, tt.allow)
			}
		})
	}
}

func TestNeedsGroups(t *testing.T) {
	for mode, want := range map[uint32]bool{0o755: false, 0o644: false, 0o750: true, 0o700: false, 0o770: true, 0o705: true} {
		if got := NeedsGroups(mode); got != want {
			t.Errorf("NeedsGroups(%04o) = %v, want %v", mode, got, want)
		}
	}
}
