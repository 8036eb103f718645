// Peer driver: Go's github.com/google/renameio WriteFile (Debian's
// golang-github-google-renameio-dev, built offline in GOPATH mode).
//
//	renameio DIR K SIZE distinct|same
//
// K writes in one process; prints the elapsed seconds. The loop sits
// between the access() markers that bench/run cuts strace output at.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/google/renameio"
)

const maxBufs = 1000

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: renameio DIR K SIZE distinct|same")
		os.Exit(2)
	}
	dir := os.Args[1]
	k, _ := strconv.Atoi(os.Args[2])
	size, _ := strconv.Atoi(os.Args[3])
	same := os.Args[4] == "same"
	nbuf := k
	if nbuf > maxBufs {
		nbuf = maxBufs
	}
	bufs := make([][]byte, nbuf)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		for j := range bufs[i] {
			bufs[i][j] = byte(j*131 + i*7 + 1)
		}
	}
	names := make([]string, k)
	for i := range names {
		if same {
			names[i] = filepath.Join(dir, "target")
		} else {
			names[i] = filepath.Join(dir, "t"+strconv.Itoa(i))
		}
	}
	_ = syscall.Access("fsafe-bench:begin", 0)
	t0 := time.Now()
	for i := 0; i < k; i++ {
		if err := renameio.WriteFile(names[i], bufs[i%nbuf], 0666); err != nil {
			fmt.Fprintln(os.Stderr, "renameio:", err)
			os.Exit(1)
		}
	}
	t := time.Since(t0).Seconds()
	_ = syscall.Access("fsafe-bench:end", 0)
	fmt.Printf("%.9f\n", t)
}
