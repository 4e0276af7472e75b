package provider

import (
	"context"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Decode maps a recorded response body of driver onto canonical frames,
// exactly as a live stream would be (tool names are passed through). It
// is for benchmarks, fuzzing and diagnostics.
func Decode(driver string, body io.Reader, emit func(abi.Event) error) error {
	c := &Conn{Driver: driver, ModelID: "recorded/" + driver}
	o := newOut(emit, toolNames{})
	ctx := context.Background()
	switch driver {
	case "openai-chat":
		return decodeOpenAIChat(ctx, c, body, o)
	case "openai-responses":
		return decodeResponses(ctx, c, body, o)
	case "anthropic-messages":
		return decodeAnthropic(ctx, c, body, o)
	case "gemini":
		return decodeGemini(ctx, c, body, o)
	case "ollama":
		return decodeOllama(ctx, c, body, o)
	}
	return abi.Errorf(abi.ENOTSUP, "no decoder for driver %q", driver)
}
