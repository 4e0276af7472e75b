package ids

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// Lease returns prefix + a 26-character id like New, except that its 80
// low bits are always fresh randomness: New increments them within one
// millisecond (to keep order), which would let one lease id predict the
// next. Leases need to be unguessable more than ordered.
func Lease(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[6:]); err != nil {
		panic("ids: crypto/rand failed: " + err.Error())
	}
	ms := uint64(time.Now().UnixMilli())
	var hi [8]byte
	binary.BigEndian.PutUint64(hi[:], ms<<16)
	copy(b[:6], hi[:6])
	return prefix + encode(b)
}
