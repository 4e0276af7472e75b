package policy

import (
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func mustPolicy(t *testing.T, s string) *Policy {
	t.Helper()
	p, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAttenuatePolicy(t *testing.T) {
	parent := mustPolicy(t, "allow coder_t tool:fs.read execute\nallow coder_t model:openai/gpt-4o use\nallow coder_t agent:reviewer create\n")
	tests := []struct {
		name, child string
		ok          bool
	}{
		{"subset", "allow reviewer_t tool:fs.read execute\n", true},
		{"equal", "allow reviewer_t tool:fs.read execute\nallow reviewer_t model:openai/gpt-4o use\n", true},
		{"empty", "", true},
		{"widens tool", "allow reviewer_t tool:shell.exec execute\n", false},
		{"widens network", "allow reviewer_t network:default connect\n", false},
		{"other subject", "allow coder_t tool:fs.read execute\n", false},
		{"other perm", "allow reviewer_t agent:reviewer start\n", false},
	}
	for _, tt := range tests {
		err := AttenuatePolicy(parent, "coder_t", mustPolicy(t, tt.child), "reviewer_t")
		if tt.ok && err != nil || !tt.ok && abi.CodeOf(err) != abi.EACCES {
			t.Errorf("%s: AttenuatePolicy = %v, want ok=%v (EACCES otherwise)", tt.name, err, tt.ok)
		}
	}
	// Same label: the child is the same subject.
	if err := AttenuatePolicy(parent, "coder_t", mustPolicy(t, "allow coder_t tool:fs.read execute\n"), "coder_t"); err != nil {
		t.Errorf("same subject subset refused: %v", err)
	}
}

func TestAttenuateGroups(t *testing.T) {
	if err := AttenuateGroups([]int{10, 20}, []int{20}); err != nil {
		t.Error(err)
	}
	if err := AttenuateGroups([]int{10, 20}, nil); err != nil {
		t.Error(err)
	}
	if err := AttenuateGroups([]int{10}, []int{10, 30}); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("extra group = %v, want EACCES", err)
	}
}

func TestAttenuateMounts(t *testing.T) {
	parent, err := ParseMountFile([]byte("/home/me/project\t/work\trw\trbind,nosuid,nodev\n" +
		"/ctx/shared/project-a\t/shared/project-a\tro\trbind,nosuid,nodev\n/ctx\t/ctx\tro\trbind\n/ctx/home/1\t/h\trw\tbind\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, child string
		ok          bool
	}{
		{"rw to ro", "/home/me/project\t/work\tro\trbind,nosuid,nodev\n", true},
		{"rw stays rw, subdir", "/home/me/project/src\t/src\trw\tbind,nosuid,nodev,noexec\n", true},
		{"visible to hidden (nothing)", "", true},
		{"ro to rw", "/ctx/shared/project-a\t/shared/project-a\trw\trbind,nosuid,nodev\n", false},
		{"hidden to visible", "/home/user\t/home/user\tro\trbind,nosuid,nodev\n", false},
		{"etc", "/etc\t/etc\tro\tbind,nosuid,nodev\n", false},
		{"sibling project", "/ctx/shared/project-b\t/shared/project-b\tro\trbind,nosuid,nodev\n", true}, // under /ctx ro
		{"prefix is not a parent", "/home/me/project2\t/p\tro\tbind,nosuid,nodev\n", false},
		{"drops nosuid", "/home/me/project\t/work\tro\trbind,nodev\n", false},
		{"most specific decides: rw under ro /ctx", "/ctx/home/1/x\t/x\trw\tbind\n", true},
		{"ro /ctx stays ro", "/ctx/model\t/m\trw\tbind\n", false},
	}
	for _, tt := range tests {
		child, err := ParseMountFile([]byte(tt.child))
		if err != nil {
			t.Fatal(err)
		}
		err = AttenuateMounts(parent, child)
		if tt.ok && err != nil || !tt.ok && abi.CodeOf(err) != abi.EACCES {
			t.Errorf("%s: AttenuateMounts = %v, want ok=%v (EACCES otherwise)", tt.name, err, tt.ok)
		}
	}
}

func TestDeriveMount(t *testing.T) {
	parent, _ := ParseMountFile([]byte("/home/me/project\t/work\trw\trbind,nosuid,nodev\n/ctx/shared/project-a\t/shared/project-a\tro\trbind,nosuid,nodev\n"))
	m, err := DeriveMount(parent, "/work/src", "/work", "ro")
	if err != nil || m.Source != "/home/me/project/src" || m.Target != "/work" || m.Mode != "ro" || !m.Has("nosuid") {
		t.Fatalf("DeriveMount = %+v, %v", m, err)
	}
	if _, err := DeriveMount(parent, "/shared/project-a", "/shared/project-a", "rw"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("ro→rw = %v, want EACCES", err)
	}
	if _, err := DeriveMount(parent, "/etc", "/etc", "ro"); abi.CodeOf(err) != abi.EACCES {
		t.Errorf("hidden→visible = %v, want EACCES", err)
	}
	if _, err := DeriveMount(parent, "work", "/etc", "ro"); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("relative = %v, want EINVAL", err)
	}
}
