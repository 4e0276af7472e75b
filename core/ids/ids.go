// Package ids makes identifiers that sort by creation time and cannot be
// guessed: 48 bits of milliseconds and 80 random bits, Crockford base32.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var (
	mu       sync.Mutex
	lastMS   uint64
	lastRand [10]byte
)

// New returns prefix + a 26-character id. Ids made in the same millisecond
// by this process still sort in creation order (the random part is
// incremented), as ULIDs do.
func New(prefix string) string {
	mu.Lock()
	ms := uint64(time.Now().UnixMilli())
	var r [10]byte
	if ms <= lastMS {
		ms = lastMS
		r = lastRand
		for i := len(r) - 1; i >= 0; i-- {
			r[i]++
			if r[i] != 0 {
				break
			}
		}
	} else if _, err := rand.Read(r[:]); err != nil {
		mu.Unlock()
		panic("ids: crypto/rand failed: " + err.Error())
	}
	lastMS, lastRand = ms, r
	mu.Unlock()

	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	copy(b[6:], r[:])
	return prefix + encode(b)
}

// encode writes 128 bits as 26 base32 characters, most significant first.
func encode(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Valid reports whether s is prefix followed by a well-formed id.
func Valid(prefix, s string) bool {
	if !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+26 {
		return false
	}
	for _, c := range s[len(prefix):] {
		if !strings.ContainsRune(alphabet, c) {
			return false
		}
	}
	return s[len(prefix)] <= '7' // 128 bits: the first character carries 3 bits
}
