// Package fs is the go-fuse projection of /ctx: the durable tiers as they
// are, and per-agent views computed in memory (ctx-mount).
package fs
