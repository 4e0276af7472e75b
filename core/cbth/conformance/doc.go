// Package conformance holds cbth to the seed's vocabulary: its tests
// compare every state, outcome and reason the code can emit (Go constants
// of the enum types and the store's CHECK constraints) with the names the
// seed (cbth-shared-core.zh-CN.md) writes.
package conformance
