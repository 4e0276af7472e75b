package model

import (
	"context"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
)

// The "debug" driver behind debug/echo streams the last user message back.
// Parameters (from .d/default or per call): repeat=N sends the text N times
// (for backpressure and throughput tests), delay_ms=N waits between deltas.
// Both are capped (issue 15: one send with repeat near 2^30 filled a disk):
// repeat ≤ MaxEchoRepeat, delay_ms ≤ MaxEchoDelayMS, and the text times
// repeat ≤ MaxEchoBytes; past a cap the run is EINVAL before any frame.
func init() { RegisterDriver("debug", func(Config) (Driver, error) { return echo{}, nil }) }

// Caps of the debug driver's parameters.
const (
	MaxEchoRepeat  = 1 << 16
	MaxEchoDelayMS = 10_000
	MaxEchoBytes   = 1 << 30
)

type echo struct{}

// maxEchoMessage bounds the final message frame; a repeated echo larger than
// this streams its deltas and skips the message, which would exceed a frame.
const maxEchoMessage = 512 << 10

func (echo) Stream(ctx context.Context, req Request, emit func(abi.Event) error) error {
	repeat, err := intParam(req.Params, "repeat", 1, 1, MaxEchoRepeat)
	if err != nil {
		return err
	}
	delay, err := intParam(req.Params, "delay_ms", 0, 0, MaxEchoDelayMS)
	if err != nil {
		return err
	}
	text := req.LastUser()
	if int64(len(text))*int64(repeat) > MaxEchoBytes {
		return abi.Errorf(abi.EINVAL, "debug: %d bytes repeated %d times is more than %d bytes", len(text), repeat, MaxEchoBytes)
	}
	chunks := splitChunks(text, 4)
	for i := 0; i < repeat; i++ {
		for _, c := range chunks {
			if err := ctx.Err(); err != nil {
				return err
			}
			if delay > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(delay) * time.Millisecond):
				}
			}
			if err := emit(abi.DeltaEvent("", c)); err != nil {
				return err
			}
		}
	}
	if len(text)*repeat <= maxEchoMessage {
		if err := emit(abi.TextMessage("", "assistant", strings.Repeat(text, repeat))); err != nil {
			return err
		}
	}
	in := 0
	for _, m := range req.Messages {
		in += countTokens(m.Content)
	}
	return emit(abi.UsageEvent("", in, countTokens(text)*repeat))
}

// splitChunks cuts text into at most n pieces at word boundaries, so the
// stream shows a few deltas that concatenate back to the exact input.
func splitChunks(text string, n int) []string {
	if text == "" {
		return []string{""}
	}
	words := strings.SplitAfter(text, " ")
	per := (len(words) + n - 1) / n
	var out []string
	for i := 0; i < len(words); i += per {
		end := min(i+per, len(words))
		out = append(out, strings.Join(words[i:end], ""))
	}
	return out
}

// countTokens approximates tokens as whitespace-separated words (at least
// one for non-empty text).
func countTokens(s string) int {
	n := len(strings.Fields(s))
	if n == 0 && s != "" {
		n = 1
	}
	return n
}
