package tasks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	procfs "github.com/cortexfs/cortexfs/core/proc"
)

func TestParseEventStream(t *testing.T) {
	tests := []struct {
		name, stream, tail string
		truncated          bool
		final              string
		failed, done       bool
		failure            string
	}{
		{name: "message wins over deltas", stream: `{"type":"start","run":"r"}
{"type":"delta","run":"r","text":"par"}
{"type":"message","run":"r","role":"assistant","content":[{"type":"text","text":"the answer"}]}
{"type":"done","run":"r","status":"ok"}
`, final: "the answer", done: true},
		{name: "deltas when no message", stream: `{"type":"start","run":"r"}
{"type":"delta","run":"r","text":"a"}
{"type":"delta","run":"r","text":"b"}
{"type":"done","run":"r","status":"ok"}`, final: "ab", done: true},
		{name: "error frame", stream: `{"type":"error","run":"r","code":"EACCES","message":"denied"}
{"type":"done","run":"r","status":"error"}`, failed: true, done: true, failure: "EACCES: denied"},
		{name: "done error without frame", stream: `{"type":"done","run":"r","status":"cancelled"}`, failed: true, done: true,
			failure: "EIO: the run ended with status cancelled"},
		{name: "tool message is not the answer", stream: `{"type":"message","run":"r","role":"assistant","content":[{"type":"text","text":"A"}]}
{"type":"message","run":"r","role":"tool","call_id":"c","content":[{"type":"text","text":"T"}]}
{"type":"done","run":"r","status":"ok"}`, final: "A", done: true},
		{name: "junk lines are skipped", stream: "not json\n{}\n" + `{"type":"done","status":"ok"}`, done: true},
		{name: "end recovered from the tail", stream: `{"type":"start","run":"r"}` + "\n" + `{"type":"delta","run":"r","te`,
			tail:      `xt":"cut"}` + "\n" + `{"type":"error","run":"r","code":"ETIMEDOUT","message":"slow"}` + "\n" + `{"type":"done","run":"r","status":"error"}` + "\n",
			truncated: true, failed: true, done: true, failure: "ETIMEDOUT: slow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "stdout")
			os.WriteFile(p, []byte(tt.stream), 0o600)
			s := ParseEventStream(p, tt.tail, tt.truncated)
			if s.Final != tt.final || s.Failed() != tt.failed || s.Done != tt.done || tt.failed && s.FailureText() != tt.failure {
				t.Errorf("got final %q failed %v done %v failure %q", s.Final, s.Failed(), s.Done, s.FailureText())
			}
		})
	}
	long := strings.Repeat("é", maxFinal)
	if got := clipFinal(long); len(got) > maxFinal+len("…") || !strings.HasPrefix(got, "…é") {
		t.Errorf("clipFinal keeps %d bytes starting %q", len(got), got[:8])
	}
}

// An identity is alive only while pid, start time and boot all match.
func TestIdentityAlive(t *testing.T) {
	self, err := procfs.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !(Identity{PID: os.Getpid(), StartTime: self.StartTime, BootID: procfs.BootID()}).Alive() {
		t.Error("own identity not alive")
	}
	if (Identity{PID: os.Getpid(), StartTime: self.StartTime + 1, BootID: procfs.BootID()}).Alive() {
		t.Error("another start time proves nothing")
	}
}

func FuzzParseEventStream(f *testing.F) {
	f.Add([]byte(`{"type":"done","status":"ok"}`), "")
	f.Add([]byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"x"}]}`), `{"type":"error","code":"EIO"}`+"\n")
	f.Fuzz(func(t *testing.T, stream []byte, tail string) {
		p := filepath.Join(t.TempDir(), "s")
		os.WriteFile(p, stream, 0o600)
		s := ParseEventStream(p, tail, true)
		if len(s.Final) > maxFinal+len("…") {
			t.Fatalf("final of %d bytes", len(s.Final))
		}
		if s.Failed() && !strings.Contains(s.FailureText(), ":") {
			t.Fatalf("failure text %q", s.FailureText())
		}
	})
}
