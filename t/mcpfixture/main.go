// Command mcpfixture is a test peer: a small MCP server on the official Go
// SDK that the npm reference server cannot stand in for — it pages its
// tools two at a time and adds a tool when asked (tools/list_changed) —
// and, for `make bench`, the tiny client that calls a warm server directly.
//
//	mcpfixture serve          MCP server on stdio
//	mcpfixture call SOCKET    send one JSON-RPC line from argv[3] to a relay socket, print the answer
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "serve" {
		serve()
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "call" {
		call(os.Args[2], os.Args[3])
		return
	}
	fmt.Fprintln(os.Stderr, "usage: mcpfixture serve | mcpfixture call SOCKET REQUEST")
	os.Exit(2)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func serve() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpfixture", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	obj := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"},"secs":{"type":"number"}}}`)
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "Echo the message.", InputSchema: obj}, func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Message string }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		return text("fixture: " + a.Message), nil
	})
	var added atomic.Int32
	srv.AddTool(&mcp.Tool{Name: "add-tool", Description: "Add a tool (tools/list_changed follows).", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := fmt.Sprintf("added-%d", added.Add(1))
		srv.AddTool(&mcp.Tool{Name: n, Description: "A tool added at run time.", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(n + " ran"), nil
		})
		return text("added " + n), nil
	})
	srv.AddTool(&mcp.Tool{Name: "sleep", Description: "Sleep secs seconds.", InputSchema: obj}, func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Secs float64 }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		select {
		case <-time.After(time.Duration(a.Secs * float64(time.Second))):
		case <-ctx.Done():
		}
		return text("slept"), nil
	})
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Report an error result.", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text("the tool failed")
		r.IsError = true
		return r, nil
	})
	// Two names that map to one tool name: a clash, reported, projected for neither.
	for _, n := range []string{"x/y", "x:y"} {
		srv.AddTool(&mcp.Tool{Name: n, InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("clash"), nil
		})
	}
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfixture:", err)
		os.Exit(1)
	}
}

// call is the bench's tiny client: one request line to a relay that owns a
// warm server's stdio, one answer line back.
func call(sock, req string) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Fprintln(c, req)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(line)
}
