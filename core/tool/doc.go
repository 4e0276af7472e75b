// Package tool holds the built-in tools behind /ctx/tool (fs.read, fs.write,
// shell.exec) and the small JSON Schema validator that guards their input.
package tool
