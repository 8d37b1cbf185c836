// Package e2e holds black-box end-to-end tests of the airlock command line. They build the
// airlock binary once (or use $AIRLOCK_BIN), run it as a subprocess the way a user would, and
// check the contract of docs/cli.md#command-line: exit statuses, the --json exec result object, streaming,
// bounded memory, cleanup of processes and cgroups, filesystem options, doctor and version.
//
// The tests need root (the process isolation level does); without it the package is skipped
// with a message. They inspect global host state (processes in the sandbox uid range, cgroups
// under "airlock"), so they run one after another, never in parallel with each other.
package e2e
