//go:build kube

package main

// handOffToFleet: this is warren-fleet (built with -tags kube), which runs
// node mode, the gateway and the fleet suite itself.
func handOffToFleet() error { return nil }
