// Package ns builds agent sandboxes: namespaces, bind mounts, pivot_root,
// credentials, capabilities and a seccomp filter, through a re-exec'd init.
//
// Start (the launcher's side) clones this binary as InitArgv with new
// mount, pid, ipc, uts and cgroup namespaces — plus a network namespace
// unless the spec keeps the host's network, and a user namespace when it
// maps ids — and hands it a Spec over a pipe. Init (the sandbox's pid 1)
// makes every mount private, assembles the tree (the root, then each mount
// in order, as the agent's identity), pivots into it, drops every
// privilege, installs the filter, starts the payload and reaps until the
// payload exits. Every step that cannot be done fails the whole start,
// with the reason: a payload never runs in a sandbox that is only partly
// built.
package ns
