package tree

import "github.com/cortexfs/cortexfs/core/abi"

// echoModel describes the built-in debug/echo model that `ctx init` writes.
type echoModel struct{ ID string }

// EchoModel is local debug metadata; it does not imply a provider default.
var EchoModel = echoModel{ID: "debug/echo"}

func (echoModel) meta() []abi.KV {
	return []abi.KV{
		{Key: "id", Value: "debug/echo"},
		{Key: "name", Value: "echo"},
		{Key: "description", Value: "Built-in debug model: streams its input back"},
		{Key: "type", Value: "chat"},
		{Key: "created_at", Value: ""},
		{Key: "owned_by", Value: "cortexfs"},
		{Key: "context_length", Value: ""},
		{Key: "driver", Value: "debug"},
	}
}

func (echoModel) controls() map[string][]byte {
	return map[string][]byte{
		"id":      []byte("debug/echo\n"),
		"driver":  []byte("debug\n"),
		"cap":     []byte("chat\nstream\nsession\n"),
		"default": []byte("# KEY=VALUE defaults, one per line (debug driver: repeat=N, delay_ms=N)\n"),
		"session": []byte("socket\n"),
		"status":  []byte("ready\n"),
		"log":     nil,
	}
}
