package desktop

import (
	"fmt"
	"testing"

	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// The Desktop words the seed fixes, written out independently of the code.
// (The spelling of the arm helpers' idempotent outcomes is checked with the
// rest of the delivery vocabulary.)
func TestDesktopVocabularyIsTheSeeds(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmt.Sprint(BindingStates), "[unbound bound degraded]"},
		{fmt.Sprint(ReadTransports), "[direct_file_read helper_cli_read]"},
		{fmt.Sprint(Capabilities), "[unknown validated unavailable]"},
		{fmt.Sprint(MarkerKinds), "[arm-pending arm-accepted]"},
		{fmt.Sprint([]delivery.Outcome{delivery.OutcomeTransientNotReady, delivery.OutcomeStaleOrSuperseded,
			delivery.OutcomeAlreadyCrossed, delivery.OutcomeBindingInvalid, delivery.OutcomeUnknownAfterFailure}),
			"[transient_not_ready stale_or_superseded already_crossed_or_handoff_recorded binding_or_capability_invalid unknown_after_helper_failure]"},
		{string(delivery.CloseHandoffRecorded), "handoff_recorded"},
		{string(delivery.ModeDesktopHeartbeat), "desktop_heartbeat"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, the seed says %s", c.got, c.want)
		}
	}
}
