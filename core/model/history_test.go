package model

import (
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestHistoryStart(t *testing.T) {
	tests := []struct {
		sizes []int64
		turns int
		bytes int64
		want  int
	}{
		{nil, 10, 100, 0},
		{[]int64{1, 1, 1}, 10, 100, 0},
		{[]int64{1, 1, 1}, 2, 100, 1},
		{[]int64{1, 1, 1}, 0, 100, 3},
		{[]int64{50, 30, 30}, 10, 60, 1},
		{[]int64{50, 30, 30}, 10, 59, 2},
		{[]int64{50, 30, 70}, 10, 60, 3}, // the newest alone is too big: nothing
		{[]int64{10, 90, 10}, 10, 25, 2}, // a big turn ends the window, never skipped over
	}
	for _, tt := range tests {
		if got := HistoryStart(tt.sizes, tt.turns, tt.bytes); got != tt.want {
			t.Errorf("HistoryStart(%v, %d, %d) = %d, want %d", tt.sizes, tt.turns, tt.bytes, got, tt.want)
		}
	}
}

func TestHistoryBounds(t *testing.T) {
	tests := []struct {
		def   map[string]string
		turns int
		bytes int64
		ok    bool
	}{
		{map[string]string{}, DefaultHistoryTurns, DefaultHistoryBytes, true},
		{map[string]string{KeyHistoryTurns: "3", KeyHistoryBytes: "1024"}, 3, 1024, true},
		{map[string]string{KeyHistoryTurns: "0"}, 0, DefaultHistoryBytes, true},
		{map[string]string{KeyHistoryTurns: "-1"}, 0, 0, false},
		{map[string]string{KeyHistoryTurns: "many"}, 0, 0, false},
		{map[string]string{KeyHistoryBytes: "99999999999999"}, 0, 0, false},
	}
	for _, tt := range tests {
		turns, bytes, err := historyBounds(tt.def)
		if (err == nil) != tt.ok || (tt.ok && (turns != tt.turns || bytes != tt.bytes)) {
			t.Errorf("historyBounds(%v) = %d, %d, %v", tt.def, turns, bytes, err)
		}
		if err != nil && abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("historyBounds(%v): code %s, want EINVAL", tt.def, abi.CodeOf(err))
		}
	}
}
