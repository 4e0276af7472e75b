package jobs

import (
	"context"
	"fmt"
	"testing"
)

func BenchmarkSubmitMany(b *testing.B) {
	sv, _ := newServiceB(b)
	items := make([]BulkItem, 1024)
	for i := range items {
		items[i] = BulkItem{Line: i + 1, Request: SubmitRequest{TargetKind: "cli", SourceThreadID: fmt.Sprintf("t%d", i%50),
			TaskKind: "k", Summary: fmt.Sprintf("s%d", i)}}
	}
	b.ResetTimer()
	for range b.N {
		res, err := sv.SubmitMany(context.Background(), actor, items)
		if err != nil || !res[0].OK {
			b.Fatal(err, res[0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(items)), "µs/job")
}
