package desktop

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// testdata/rollout-codex-0.169.0.jsonl was recorded from the real codex
// 0.169.0 (codex exec, then two codex exec resume) against t/codexfake:
// three bridge turns whose assistant messages carry two markers; the
// second turn's user prompt carries a third marker that must not count.
const (
	rolloutFile      = "testdata/rollout-codex-0.169.0.jsonl"
	rolloutSession   = "01a20779-4170-79b1-bb66-0fcc0a649122"
	recordedPending  = "cbth-relay/v1/mrk_01TESTARMPENDING0000000000"
	recordedAccepted = "cbth-relay/v1/mrk_01TESTARMACCEPTED000000000"
	recordedInPrompt = "cbth-relay/v1/mrk_01TESTINPROMPTONLY000000000"
)

func TestScanRecordedRollout(t *testing.T) {
	for _, c := range []struct {
		marker string
		found  bool
	}{{recordedPending, true}, {recordedAccepted, true}, {recordedInPrompt, false}, {"cbth-relay/v1/mrk_NEVER", false}} {
		ev, err := ReadRollout(rolloutFile, c.marker)
		if err != nil || ev.SessionID != rolloutSession || ev.Found != c.found || ev.BadLines != 0 {
			t.Errorf("%s: %+v %v", c.marker, ev, err)
		}
		if c.found && (ev.Item != "response_item/message/assistant" || ev.Timestamp == "" || ev.Line == 0) {
			t.Errorf("%s: evidence %+v", c.marker, ev)
		}
	}
}

func TestScanRolloutRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	abs, _ := filepath.Abs(rolloutFile)
	os.Symlink(abs, link)
	for _, p := range []string{fifo, link, dir, filepath.Join(dir, "missing")} {
		if _, err := ReadRollout(p, recordedPending); err == nil {
			t.Errorf("ReadRollout(%s) succeeded", p)
		}
	}
	two := `{"type":"session_meta","payload":{"id":"a"}}` + "\n" + `{"type":"session_meta","payload":{"id":"b"}}` + "\n"
	if _, err := ScanRollout(strings.NewReader(two), "m"); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("two sessions: %v", err)
	}
	if _, err := ScanRollout(strings.NewReader(`{"type":"response_item"}`), "m"); abi.CodeOf(err) != abi.EINVAL {
		t.Errorf("no session_meta: %v", err)
	}
	long := `{"type":"session_meta","payload":{"id":"a"}}` + "\n" + strings.Repeat("x", MaxRolloutLine+10) + "\n" +
		`{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"m"}]}}`
	ev, err := ScanRollout(strings.NewReader(long), "m")
	if err != nil || ev.OversizeLines != 1 || !ev.Found || ev.Line != 3 {
		t.Errorf("oversize line: %+v %v", ev, err)
	}
}

// relayRollout is the recorded rollout with its markers replaced by the
// ones the daemon issued.
func relayRollout(t *testing.T, pending, accepted string) string {
	b, err := os.ReadFile(rolloutFile)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(recordedPending), []byte(pending))
	b = bytes.ReplaceAll(b, []byte(recordedAccepted), []byte(accepted))
	p := filepath.Join(t.TempDir(), "rollout.jsonl")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) marker(kind MarkerKind, k tok, req string) *MarkerResult {
	f.t.Helper()
	m, err := f.sv.IssueMarker(f.ctx, actor, MarkerRequest{BridgeThreadID: rolloutSession, Kind: kind,
		SourceThreadID: k.thread, AttemptID: k.attempt, Generation: k.gen, BridgeRequestID: req})
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) consume(path, marker string) (*ConsumeResult, error) {
	ev, err := ReadRollout(path, marker)
	if err != nil {
		return nil, err
	}
	return f.sv.ConsumeTranscript(f.ctx, actor, ConsumeRequest{Marker: marker, Evidence: ev})
}

func TestTranscriptRelay(t *testing.T) {
	f := world(t)
	k := f.tok("T")
	mp := f.marker(MarkerArmPending, k, "rq")
	if mp.Outcome != delivery.OutcomeOK || !strings.HasPrefix(mp.Marker, markerText) {
		t.Fatalf("issue: %+v", mp)
	}
	// arm-accepted is refused until the arm is pending under rq.
	var early *MarkerResult
	f.unchanged("early arm-accepted marker", func() { early = f.marker(MarkerArmAccepted, k, "rq") })
	if early.Outcome != delivery.OutcomeStaleOrSuperseded || early.Marker != "" {
		t.Fatalf("early arm-accepted: %+v", early)
	}
	// The marker is not in this rollout: transient_not_ready, no change.
	var res *ConsumeResult
	var err error
	f.unchanged("not found", func() { res, err = f.consume(rolloutFile, mp.Marker) })
	if err != nil || res.Outcome != delivery.OutcomeTransientNotReady {
		t.Fatalf("absent marker: %+v %v", res, err)
	}
	path := relayRollout(t, mp.Marker, "cbth-relay/v1/unused")
	res, err = f.consume(path, mp.Marker)
	if err != nil || res.Outcome != delivery.OutcomeOK || res.Result.BridgeArmLeaseID == "" || res.ConsumedAt == nil ||
		f.head("T").HeadAttempt.State != delivery.AttemptArmPending {
		t.Fatalf("consume arm-pending: %+v %v", res, err)
	}
	f.unchanged("consume again", func() { res, err = f.consume(path, mp.Marker) })
	if err != nil || res.Outcome != delivery.OutcomeAlreadyPending {
		t.Fatalf("consume again: %+v %v", res, err)
	}
	ma := f.marker(MarkerArmAccepted, k, "rq")
	if other := f.marker(MarkerArmAccepted, k, "rq-other"); other.Outcome != delivery.OutcomeLeaseHeld || other.Marker != "" {
		t.Fatalf("marker for another request: %+v", other)
	}
	path = relayRollout(t, mp.Marker, ma.Marker)
	res, err = f.consume(path, ma.Marker)
	if err != nil || res.Outcome != delivery.OutcomeOK || f.head("T").HeadAttempt.State != delivery.AttemptCooldown ||
		*f.binding("T").ArmedGeneration != k.gen {
		t.Fatalf("consume arm-accepted: %+v %v", res, err)
	}
	f.unchanged("consume accepted again", func() { res, err = f.consume(path, ma.Marker) })
	if err != nil || res.Outcome != delivery.OutcomeAlreadyArmed || f.head("T").DeliveryAttemptCount != 1 {
		t.Fatalf("consume accepted again: %+v %v", res, err)
	}
	// A rollout of another thread is not evidence for this bridge.
	wrong, _ := ReadRollout(path, ma.Marker)
	wrong.SessionID = "someone-else"
	f.unchanged("other thread's rollout", func() {
		if _, err := f.sv.ConsumeTranscript(f.ctx, actor, ConsumeRequest{Marker: ma.Marker, Evidence: wrong}); abi.CodeOf(err) != abi.EINVAL {
			t.Errorf("other thread's rollout: %v", err)
		}
	})
	f.unchanged("unknown marker", func() {
		if _, err := f.sv.ConsumeTranscript(f.ctx, actor, ConsumeRequest{Marker: markerText + "mrk_X", Evidence: wrong}); abi.CodeOf(err) != abi.ENOENT {
			t.Errorf("unknown marker: %v", err)
		}
	})
}

// An expired, never consumed marker performs nothing.
func TestRelayMarkerExpires(t *testing.T) {
	f := world(t)
	k := f.tok("T")
	mp := f.marker(MarkerArmPending, k, "rq")
	path := relayRollout(t, mp.Marker, "x")
	f.now = f.now.Add(f.cfg().Desktop.RelayMarkerTTL + 1)
	var res *ConsumeResult
	var err error
	f.unchanged("expired", func() { res, err = f.consume(path, mp.Marker) })
	if err != nil || res.Outcome != delivery.OutcomeStaleOrSuperseded {
		t.Fatalf("expired marker: %+v %v", res, err)
	}
}

func FuzzScanRollout(f *testing.F) {
	b, _ := os.ReadFile(rolloutFile)
	f.Add(b, recordedPending)
	f.Add([]byte(`{"type":"session_meta","payload":{"id":"x"}}`), "m")
	f.Add([]byte("\n\n{"), "m")
	f.Fuzz(func(t *testing.T, data []byte, marker string) {
		ev, err := ScanRollout(bytes.NewReader(data), marker)
		if err != nil {
			if c := abi.CodeOf(err); c != abi.EINVAL && c != abi.EIO {
				t.Fatalf("error code %s: %v", c, err)
			}
			return
		}
		if ev.SessionID == "" || (ev.Found && (ev.Line < 1 || ev.Line > ev.LinesRead || marker == "")) {
			t.Fatalf("inconsistent evidence %+v", ev)
		}
		// (JSON escapes can spell a marker, so only escape-free input is checked.)
		if ev.Found && !bytes.Contains(data, []byte(marker)) && !bytes.ContainsRune(data, '\\') {
			t.Fatalf("found a marker that is not in the input: %+v", ev)
		}
	})
}
