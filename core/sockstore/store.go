// Package sockstore keeps the durable sessions behind object sockets: each
// session's event log and send index on disk, reached without following
// symlinks, with the commit policy (when and how appends become durable)
// in one place.
package sockstore

import (
	"encoding/json"
	"fmt"
)

// SessionKey names one session: sessions are private per peer uid, so two
// users' "default" sessions are different sessions.
type SessionKey struct {
	UID  uint32 // peer uid from SO_PEERCRED
	Name string // session name, a valid abi name
}

// Store opens the durable log of a session, creating it when it is new.
// The Server opens each session at most once at a time and closes the Log
// when the session has no run and no subscriber left.
type Store interface {
	Open(key SessionKey) (Log, error)
}

// Remover is a Store that can delete a session's durable record. The
// Server removes a session that only temp sends used once its last
// connection and run are gone; Remove is called with the session closed.
type Remover interface {
	Remove(key SessionKey) error
}

// Measurer is a Store that can tell how many bytes one uid's sessions
// hold, so quotas survive restarts.
type Measurer interface {
	Measure(uid uint32) (int64, error)
}

// Log is one session's durable record: every frame the session produced,
// in event id order, and the index of sends that started its runs.
//
// The Server calls Append, Sync and Record for one session from one
// goroutine at a time; LastID and Frames may run concurrently with them
// and with each other.
type Log interface {
	// Append appends frame, whose event id is id. Ids are strictly
	// increasing; the frame is a complete JSON object without newline.
	Append(id uint64, frame []byte) error
	// Sync makes every appended frame durable. The Server calls it at each
	// run's done frame, before clients see that frame.
	Sync() error
	// LastID is the id of the last appended frame, 0 for an empty log.
	LastID() uint64
	// Frames calls fn, in id order, for each frame with an id greater than
	// after that was appended before Frames was called. frame is only
	// valid during fn; an error from fn stops Frames and is returned.
	Frames(after uint64, fn func(id uint64, frame []byte) error) error
	// Record durably records a send, before the run it starts emits
	// anything, so a retry and the session history survive restarts. It
	// returns where the record starts, for SendAt.
	Record(s SendRecord) (int64, error)
	// Sends calls fn for every recorded send, oldest first, with the
	// offset SendAt reads it back from; an error from fn stops it.
	Sends(fn func(off int64, s SendRecord) error) error
	// SendAt reads back the send recorded at off.
	SendAt(off int64) (SendRecord, error)
	// Size is how many bytes the log holds on disk (events and sends), for
	// quotas.
	Size() int64
	// Close releases the log.
	Close() error
}

// SendRecord is one entry of a session's send index: the client's message
// id, the run it started and what was sent.
type SendRecord struct {
	ID    string          `json:"id"`
	Run   string          `json:"run"`
	Cwd   string          `json:"cwd,omitempty"`
	Temp  bool            `json:"temp,omitempty"`
	Input json.RawMessage `json:"input"`
}

func (k SessionKey) String() string { return fmt.Sprintf("%s (uid %d)", k.Name, k.UID) }
