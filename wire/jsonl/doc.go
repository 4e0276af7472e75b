// Package jsonl splits a byte stream into newline-delimited frames of bounded
// size and writes such frames, leaving every protocol decision to the caller.
package jsonl
