// Command pause is the process of a Pod sandbox's container on a test node
// (see package pauseimage): it holds the Pod's namespaces open and does
// nothing until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of its PID namespace the process gets no default action for
	// SIGTERM or SIGINT: without these handlers the runtime could only
	// SIGKILL it.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
