package toolsrc

import "encoding/json"

// MarshalJSON writes a tier without sources as "sources":[] (never null):
// every --json list promises an array, and a report that crossed the
// daemon's socket decodes an empty list back to nil.
func (r TierReport) MarshalJSON() ([]byte, error) {
	type plain TierReport
	if r.Sources == nil {
		r.Sources = []SourceReport{}
	}
	return json.Marshal(plain(r))
}

// MarshalJSON writes a source without tools as "tools":[].
func (s SourceReport) MarshalJSON() ([]byte, error) {
	type plain SourceReport
	if s.Tools == nil {
		s.Tools = []ToolReport{}
	}
	return json.Marshal(plain(s))
}
