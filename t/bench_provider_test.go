package t

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/model/provider"
	"github.com/cortexfs/cortexfs/t/fake"
)

func init() {
	addBench("provider-parsers", benchProviderParsers)
	addBench("provider-call", benchProviderCall)
}

// recorded builds a ~10 MB stream of kind k made of short text deltas, as
// a provider would send a long answer.
func recorded(k fake.Kind, size int) []byte {
	one := map[fake.Kind]func(...string) []string{fake.OpenAIChat: fake.ChatText, fake.OpenAIResponses: fake.ResponsesText,
		fake.Anthropic: fake.AnthropicText, fake.Gemini: fake.GeminiText, fake.Ollama: fake.OllamaText}[k]
	d := "lorem ipsum "
	per := len(strings.Join(one(d, d), "")) - len(strings.Join(one(d), ""))
	deltas := make([]string, size/per+1)
	for i := range deltas {
		deltas[i] = "lorem ipsum "
	}
	return []byte(strings.Join(one(deltas...), ""))
}

// benchProviderParsers: each driver's stream parser, frames encoded as
// JSON, over a recorded 10 MB stream against a raw read of the same bytes.
func benchProviderParsers(t *testing.T, _ floors) {
	for _, k := range fake.Kinds {
		data := recorded(k, 10<<20)
		buf := make([]byte, 32<<10)
		raw := bestOf(5, func() {
			r := bytes.NewReader(data)
			for {
				if _, err := r.Read(buf); err == io.EOF {
					return
				}
			}
		})
		frames := 0
		parse := bestOf(3, func() {
			frames = 0
			err := provider.Decode(string(k), bytes.NewReader(data), func(e abi.Event) error {
				frames++
				_, err := json.Marshal(e)
				return err
			})
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
		})
		mb := float64(len(data)) / (1 << 20)
		addRow(row{figure: "parse " + string(k), ours: per(mb/parse.Seconds(), "MB/s"), floor: per(mb/raw.Seconds(), "MB/s"),
			note: fmt.Sprintf("%.1f MB recorded stream, %d frames encoded as JSON; floor: a raw read of the same bytes", mb, frames)})
	}
}

func bestOf(n int, f func()) time.Duration {
	best := time.Duration(1 << 62)
	for i := 0; i < n; i++ {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}

// benchProviderCall: per-call wall of R/model/fake/x hello against a local
// fake provider vs debug/echo, in the same run.
func benchProviderCall(t *testing.T, f floors) {
	srv := fake.New()
	defer srv.Close()
	root := newRoot(t)
	addModel(t, root, "fake/x", "--driver", "openai-chat", "--base-url", srv.BaseURL(fake.OpenAIChat))
	echo := medianRun(t, 30, filepath.Join(root, "model", "debug", "echo"))
	prov := medianRun(t, 30, modelPath(root, "fake/x"))
	addRow(row{figure: "call: model/fake/x (openai-chat fake)", ours: ms(prov), floor: ms(echo),
		note: "median of 30 one-shot calls against a local fake provider; floor: debug/echo the same way"})
}

func medianRun(t *testing.T, n int, path string) time.Duration {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		mustOK(t, run(t, runOpts{env: keyEnv}, path, "hello"))
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[n/2]
}
