package ids

import (
	"sort"
	"testing"
)

func TestNewSortsAndIsUnique(t *testing.T) {
	seen := map[string]bool{}
	var list []string
	for i := 0; i < 10000; i++ {
		id := New("r")
		if !Valid("r", id) {
			t.Fatalf("invalid id %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		list = append(list, id)
	}
	if !sort.StringsAreSorted(list) {
		t.Error("ids made in sequence do not sort in creation order")
	}
	if Valid("r", "x"+list[0][1:]) || Valid("r", list[0]+"0") || Valid("r", "rIIIIIIIIIIIIIIIIIIIIIIIII") {
		t.Error("Valid accepted a malformed id")
	}
}

func TestLeaseIsFreshlyRandom(t *testing.T) {
	a, b := Lease("l_"), Lease("l_")
	if !Valid("l_", a) || !Valid("l_", b) || a == b {
		t.Fatalf("Lease: %s %s", a, b)
	}
	// New within one millisecond differs only in its last characters;
	// Lease ids must not share their random part's prefix.
	if a[2+10:2+20] == b[2+10:2+20] {
		t.Errorf("lease ids share random bits: %s %s", a, b)
	}
}
