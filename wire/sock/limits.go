package sock

import (
	"net"
	"sync"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Limits bound what one peer uid can take from a Server: connections,
// idle time, and the disk its session logs fill. They are the whole
// resource policy of socket sessions, kept in this one place (issue 15,
// defect 7); a zero field takes its DefaultLimits value, a negative one
// switches that limit off.
type Limits struct {
	// MaxConnsPerUID bounds the connections one uid holds open at once;
	// one more is answered EBUSY and closed. Root is exempt, so an
	// administrator can always reach a daemon a user is flooding.
	MaxConnsPerUID int
	// IdleTimeout closes a connection that sent no request and had nothing
	// written to it for this long, and one whose client has not read a
	// frame for this long (a stalled reader no longer pins a run).
	IdleTimeout time.Duration
	// MaxSessionBytes bounds one session's log (events and send index).
	MaxSessionBytes int64
	// MaxUIDBytes bounds the logs of all of one uid's sessions (across
	// every Server sharing one Usage).
	MaxUIDBytes int64
}

// DefaultLimits are the limits of a Server that sets none.
var DefaultLimits = Limits{
	MaxConnsPerUID:  64,
	IdleTimeout:     10 * time.Minute,
	MaxSessionBytes: 256 << 20,
	MaxUIDBytes:     1 << 30,
}

// terminalReserve is room kept below a quota for the error and done frames
// that close a run: a run refused for space still ends with its done frame,
// so no log is left half-written.
const terminalReserve = 16 << 10

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxConnsPerUID != 0 {
		d.MaxConnsPerUID = l.MaxConnsPerUID
	}
	if l.IdleTimeout != 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.MaxSessionBytes != 0 {
		d.MaxSessionBytes = l.MaxSessionBytes
	}
	if l.MaxUIDBytes != 0 {
		d.MaxUIDBytes = l.MaxUIDBytes
	}
	return d
}

// Usage accounts the bytes each uid's session logs hold. Servers of one
// daemon share one, so a uid's quota covers all its sessions; the first
// time a uid is seen, measure reports what its sessions already hold on
// disk (nil: count from zero).
type Usage struct {
	measure func(uid uint32) (int64, error)
	mu      sync.Mutex
	bytes   map[uint32]int64
}

// NewUsage returns an empty account.
func NewUsage(measure func(uid uint32) (int64, error)) *Usage {
	return &Usage{measure: measure, bytes: map[uint32]int64{}}
}

// charge adds n bytes to uid's account: refused with ENOSPC when that
// would pass limit (less the terminal reserve) unless force, which is for
// the frames that close a run.
func (u *Usage) charge(uid uint32, n, limit int64, force bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	cur, ok := u.bytes[uid]
	if !ok && u.measure != nil {
		m, err := u.measure(uid)
		if err != nil {
			return abi.Errorf(abi.CodeOf(err), "cannot measure the session logs of uid %d: %w", uid, err)
		}
		cur = m
	}
	if !force && limit > 0 && cur+n > limit-terminalReserve {
		return abi.Errorf(abi.ENOSPC, "uid %d's session logs hold %d bytes; the limit is %d", uid, cur, limit)
	}
	u.bytes[uid] = cur + n
	return nil
}

// release gives back the bytes of a removed session.
func (u *Usage) release(uid uint32, n int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if cur, ok := u.bytes[uid]; ok {
		u.bytes[uid] = max(cur-n, 0)
	}
}

// quotaLocked checks that n more bytes fit the session's and its uid's
// quota, and charges the uid; s.mu is held. force is for the frames that
// end a run, which always go in (their size is what terminalReserve keeps
// free).
func (s *session) quotaLocked(h *hub, n int64, force bool) error {
	lim := h.limits
	if !force && lim.MaxSessionBytes > 0 && s.log.Size()+n > lim.MaxSessionBytes-terminalReserve {
		return abi.Errorf(abi.ENOSPC, "session %s holds %d bytes; the limit is %d", s.key.Name, s.log.Size(), lim.MaxSessionBytes)
	}
	return h.usage.charge(s.key.UID, n, lim.MaxUIDBytes, force)
}

// deadlineConn sets a write deadline before each write, so a client that
// stops reading for the idle timeout fails the write instead of holding
// a subscriber, and with it a run, forever.
type deadlineConn struct {
	*net.UnixConn
	d time.Duration
}

func (c deadlineConn) Write(p []byte) (int, error) {
	if c.d > 0 {
		_ = c.UnixConn.SetWriteDeadline(time.Now().Add(c.d))
	}
	return c.UnixConn.Write(p)
}
