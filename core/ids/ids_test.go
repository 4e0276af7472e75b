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
