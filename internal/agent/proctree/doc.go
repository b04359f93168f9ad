// Package proctree ends a child process together with its own children, so that nothing the
// agent starts (a script, the main agent under its watchdog) outlives its cancellation.
package proctree
