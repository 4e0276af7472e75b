package fs

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchMask is every change of a directory's entries or of an entry's
// attributes or content that a projection shows.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// entryEvents change which names a directory holds.
const entryEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO

// selfEvents mean the watched directory itself went away or moved.
const selfEvents = unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_IGNORED

// event is one change seen in a watched directory: name is the entry that
// changed ("" for the directory itself).
type event struct {
	name string
	mask uint32
}

// listener receives the coalesced events of one watched directory.
type listener func(evs []event)

// watcher turns inotify events on durable directories into calls of the
// listeners registered for them, coalesced over a short window so that a
// burst (an atomic rename is three events) costs one invalidation.
//
// A directory is watched through /proc/self/fd/N of a descriptor opened
// without following symlinks (core/safefs): inotify_add_watch resolves that
// magic link to exactly the directory the projection serves, never to
// whatever a user's symlink names at that path now.
type watcher struct {
	f *os.File // the inotify descriptor, non-blocking, in Go's poller

	mu    sync.Mutex
	byWD  map[int32]*watched
	byKey map[string]*watched // durable path of the directory

	window time.Duration
	done   chan struct{}
	// overflow is called when the kernel dropped events (IN_Q_OVERFLOW):
	// everything cached may be stale.
	overflow func()
}

type watched struct {
	wd        int32
	key       string
	listeners map[any]listener
}

func newWatcher(overflow func()) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), byWD: map[int32]*watched{}, byKey: map[string]*watched{},
		window: 5 * time.Millisecond, done: make(chan struct{}), overflow: overflow}
	go w.loop()
	return w, nil
}

// add registers l for changes in the directory open as dirfd, known as key
// (its durable path). It reports whether the directory is watched: when
// the kernel refuses (max_user_watches), the caller falls back to short
// cache timeouts for what lies in that directory.
func (w *watcher) add(dirfd int, key string, owner any, l listener) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.byKey[key]; x != nil {
		x.listeners[owner] = l
		return true
	}
	wd, err := unix.InotifyAddWatch(int(w.f.Fd()), "/proc/self/fd/"+strconv.Itoa(dirfd), watchMask)
	if err != nil {
		return false
	}
	x := w.byWD[int32(wd)]
	if x == nil {
		// The same directory may be known under two keys (a CTX_PATH
		// tier spelled two ways): inotify gives one wd for one inode.
		x = &watched{wd: int32(wd), key: key, listeners: map[any]listener{}}
		w.byWD[int32(wd)] = x
	}
	w.byKey[key] = x
	x.listeners[owner] = l
	return true
}

// remove drops owner's interest in key; the last one removes the watch.
func (w *watcher) remove(key string, owner any) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	x := w.byKey[key]
	if x == nil {
		return
	}
	delete(x.listeners, owner)
	if len(x.listeners) > 0 {
		return
	}
	delete(w.byKey, key)
	for _, y := range w.byKey {
		if y == x {
			return // still known under another key
		}
	}
	delete(w.byWD, x.wd)
	_, _ = unix.InotifyRmWatch(int(w.f.Fd()), uint32(x.wd))
}

func (w *watcher) close() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.done
}

// loop reads events and dispatches them after the window passes without a
// new batch (at most 4 windows after the first event, so a steady stream
// of writes cannot postpone invalidation forever).
func (w *watcher) loop() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	reads := make(chan []byte)
	go func() {
		defer close(reads)
		for {
			n, err := w.f.Read(buf)
			if err != nil {
				if errors.Is(err, os.ErrClosed) {
					return
				}
				continue
			}
			b := make([]byte, n)
			copy(b, buf[:n])
			reads <- b
		}
	}()
	pending := map[int32][]event{}
	overflow := false
	var timer <-chan time.Time
	var first time.Time
	for {
		select {
		case b, ok := <-reads:
			if !ok {
				return
			}
			overflow = parseEvents(b, pending) || overflow
			if timer == nil {
				first = time.Now()
			}
			wait := w.window
			if time.Since(first) > 4*w.window {
				wait = 0
			}
			timer = time.After(wait)
		case <-timer:
			timer = nil
			w.dispatch(pending, overflow)
			pending, overflow = map[int32][]event{}, false
		}
	}
}

// parseEvents appends the inotify records in b to pending by watch
// descriptor; it reports an overflow record.
func parseEvents(b []byte, pending map[int32][]event) (overflow bool) {
	for len(b) >= unix.SizeofInotifyEvent {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(raw.Len)
		if end > len(b) {
			break
		}
		name := b[unix.SizeofInotifyEvent:end]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if raw.Mask&unix.IN_Q_OVERFLOW != 0 {
			overflow = true
		} else {
			pending[raw.Wd] = append(pending[raw.Wd], event{name: string(name), mask: raw.Mask})
		}
		b = b[end:]
	}
	return overflow
}

func (w *watcher) dispatch(pending map[int32][]event, overflow bool) {
	type call struct {
		l   listener
		evs []event
	}
	var calls []call
	w.mu.Lock()
	for wd, evs := range pending {
		x := w.byWD[wd]
		if x == nil {
			continue
		}
		for _, l := range x.listeners {
			calls = append(calls, call{l, evs})
		}
		if gone(evs) {
			// The kernel dropped the watch (IN_IGNORED) or the directory
			// left its place: its listeners re-watch on their next lookup.
			delete(w.byWD, wd)
			for k, y := range w.byKey {
				if y == x {
					delete(w.byKey, k)
				}
			}
			_, _ = unix.InotifyRmWatch(int(w.f.Fd()), uint32(wd))
		}
	}
	w.mu.Unlock()
	// Listeners run without the lock: they send FUSE notifications, which
	// may wait for the kernel, which may wait for a request whose handler
	// registers a watch.
	for _, c := range calls {
		c.l(c.evs)
	}
	if overflow && w.overflow != nil {
		w.overflow()
	}
}

func gone(evs []event) bool {
	for _, e := range evs {
		if e.name == "" && e.mask&selfEvents != 0 {
			return true
		}
	}
	return false
}
