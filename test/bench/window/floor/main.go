// Command floor is the floor of test/bench/window: a Go program that
// registers SIGQUIT in its only package initialisation, synchronously,
// and imports nothing else. No Go program can catch SIGQUIT sooner; until
// it does, SIGQUIT gets the Go runtime's goroutine dump (exit 2). It exits
// 0 once caught, or after 100 ms.
package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

var quit = make(chan os.Signal, 1)

func init() { signal.Notify(quit, syscall.SIGQUIT) }

func main() {
	select {
	case <-quit:
	case <-time.After(100 * time.Millisecond):
	}
	os.Exit(0)
}
