package model

import (
	"strconv"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The bounds of what one socket turn replays of its session (issue 15:
// history grew without bound). A turn replays the newest earlier turns
// that fit both bounds, oldest first; everything else stays in the
// session's log on disk, never in memory.
const (
	KeyHistoryTurns = "history_turns" // .d/default: earlier turns replayed at most
	KeyHistoryBytes = "history_bytes" // .d/default: bytes of earlier turns replayed at most

	DefaultHistoryTurns = 100
	DefaultHistoryBytes = 4 << 20

	maxHistoryTurns = 100_000
	maxHistoryBytes = 1 << 30
)

// historyBounds reads the bounds from .d/default; a value that is not a
// number in range is EINVAL.
func historyBounds(defaults map[string]string) (turns int, bytes int64, err error) {
	turns, bytes = DefaultHistoryTurns, DefaultHistoryBytes
	if v := strings.TrimSpace(defaults[KeyHistoryTurns]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxHistoryTurns {
			return 0, 0, abi.Errorf(abi.EINVAL, "%s=%q: want an integer in [0,%d]", KeyHistoryTurns, v, maxHistoryTurns)
		}
		turns = n
	}
	if v := strings.TrimSpace(defaults[KeyHistoryBytes]); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxHistoryBytes {
			return 0, 0, abi.Errorf(abi.EINVAL, "%s=%q: want an integer in [0,%d]", KeyHistoryBytes, v, maxHistoryBytes)
		}
		bytes = n
	}
	return turns, bytes, nil
}

// HistoryStart is the index of the oldest of the earlier turns (sizes,
// oldest first) that a turn replays: the newest ones, as many as fit
// maxTurns and maxBytes together. len(sizes) means none.
func HistoryStart(sizes []int64, maxTurns int, maxBytes int64) int {
	var total int64
	i := len(sizes)
	for i > 0 && len(sizes)-i < maxTurns && total+sizes[i-1] <= maxBytes {
		total += sizes[i-1]
		i--
	}
	return i
}
